package litmus

import "fmt"

// DefaultSpread is the width of the host's delay jitter in the
// store-buffering test, in steps of Options.Spread.
const DefaultSpread = 32

// maxDelay bounds the host's adaptive delay.
const maxDelay = 1 << 16

// PlaySB plays one side of the store-buffering litmus, round by round. The
// host starts round r (writing go = r) once the guest has acknowledged
// round r-1; both sides then store r to their own word x[side] and load the
// other's. With a store→load barrier between the store and the load, at
// least one side loads r; loading an older value on both sides is the
// forbidden outcome, which a side whose store waits in a store buffer
// allows. The guest acknowledges each round with 2r + (it loaded an old
// value), so the host counts the forbidden rounds as its Violations.
//
// The forbidden outcome needs the two stores to meet within a store
// buffer's drain time, so the host aims its store at the guest's: it waits
// a delay after go that it adapts every round — one step longer when only
// it loaded an old value (its store came first), one step shorter when
// only the guest did — plus a jitter over Options.Spread steps. The delay
// settles where the stores cross, whatever the guest's speed. The guest
// plays Rounds rounds; the host plays until the guest is done.
func PlaySB(p *Page, me Side, o Options) (Result, error) {
	if me == Guest {
		return playSBGuest(p, o)
	}
	return playSBHost(p, o)
}

func playSBGuest(p *Page, o Options) (Result, error) {
	var res Result
	goW, xMe, xOther, ack := p.word(offGo), p.word(offX+64*int(Guest)), p.word(offX+64*int(Host)), p.word(offAck)
	spins := 0
	for r := uint64(1); r <= o.Rounds; r++ {
		for loadWord(goW) != r {
			spins++
			if spins%checkEvery == 0 && o.Clock.Now() >= o.Deadline {
				return res, fmt.Errorf("%w: guest waiting for round %d", ErrTimeout, r)
			}
		}
		if o.Plain {
			*xMe = r
		} else {
			storeWord(xMe, r)
		}
		old := loadWord(xOther) < r
		a := 2 * r
		if old {
			a++
			res.Old++
		}
		storeWord(ack, a)
		res.Rounds++
	}
	p.publish(Guest, res)
	return res, nil
}

func playSBHost(p *Page, o Options) (Result, error) {
	var res Result
	goW, xMe, xOther, ack := p.word(offGo), p.word(offX+64*int(Host)), p.word(offX+64*int(Guest)), p.word(offAck)
	spread := o.Spread
	if spread == 0 {
		spread = DefaultSpread
	}
	spins := 0
	center := spread // the adaptive part of the delay
	// wait spins until the guest has acknowledged round r; false: the
	// guest is done (it has no round r).
	wait := func(r uint64) (bool, error) {
		for loadWord(ack)>>1 != r {
			spins++
			if spins%checkEvery == 0 {
				if p.Done(Guest) {
					return false, nil
				}
				if o.Clock.Now() >= o.Deadline {
					return false, fmt.Errorf("%w: host waiting for the guest's round %d", ErrTimeout, r)
				}
			}
		}
		return true, nil
	}
	for r := uint64(1); ; r++ {
		if p.Done(Guest) {
			break
		}
		storeWord(goW, r)
		// A delay of d loads of go: center, give or take half the
		// spread, from a multiplicative hash of r.
		d := center + hash(r)%spread - spread/2
		if d > maxDelay { // wrapped below 0, or past the bound
			d = 0
		}
		delay(goW, d)
		storeWord(xMe, r)
		old := loadWord(xOther) < r
		ok, err := wait(r)
		if err != nil {
			return res, err
		}
		if !ok {
			break
		}
		res.Rounds++
		guestOld := loadWord(ack)&1 != 0
		if old {
			res.Old++
		}
		switch {
		case old && guestOld:
			res.Violations++
		case old && center < maxDelay:
			center++
		case guestOld && center > 0:
			center--
		}
	}
	p.publish(Host, res)
	return res, nil
}
