package litmus

import (
	"fmt"

	"falconnic/internal/clock"
)

// Options are one side's run of the lock.
type Options struct {
	// Rounds to play; 0: until the other side is done.
	Rounds uint64
	// Clock and Deadline bound the run: past Deadline, Play returns
	// ErrTimeout, whether it is spinning or not.
	Clock    clock.Clock
	Deadline clock.Time
	// Plain stores the flag and turn words with plain stores instead of
	// atomic ones (XCHG): what TCG without CF_PARALLEL makes of the
	// guest's XCHG, for a control run on real hardware.
	Plain bool
	// Spread is a delay range in steps (loads of one of the side's
	// own words, a few nanoseconds each). StoreBuffering's host jitters its
	// delay before its store over it (0: DefaultSpread). In Peterson a
	// side waits 0 to Spread-1 steps between two rounds (0: not at all),
	// so that it comes to the lock afresh rather than queued behind the
	// other side.
	Spread uint64
}

// Result is one side's count.
type Result struct {
	Rounds     uint64 // critical sections entered
	Violations uint64 // of those, entered or left with the other side inside
	// Old (StoreBuffering) is the rounds in which this side loaded the
	// other side's word from an earlier round; Violations are then the
	// host's count of rounds in which both sides did.
	Old uint64
}

// checkEvery is how many spins or rounds pass between two reads of the
// clock.
const checkEvery = 1 << 12

// Play runs side's half of Peterson's lock on p: per round it raises its
// flag, gives the turn away, waits while the other side has its flag up
// and the turn, then in the critical section checks and sets the occupant
// word and bumps the counter with a plain load and store, and lowers its
// flag. When it ends, with its rounds done or (Rounds 0) once the other
// side is done, it publishes its Result in the page. A run that passes the
// deadline returns what it has counted and an error wrapping ErrTimeout;
// it publishes nothing.
func Play(p *Page, me Side, o Options) (Result, error) {
	var r Result
	other := me.other()
	flagMe, flagOther := p.word(offFlag+64*int(me)), p.word(offFlag+64*int(other))
	turn, occupant, counter := p.word(offTurn), p.word(offOccupant), p.word(offCounter)
	mine := uint64(me) + 1
	spins := 0
	for n := uint64(0); o.Rounds == 0 || n < o.Rounds; n++ {
		if o.Rounds == 0 && p.Done(other) {
			break
		}
		if n%checkEvery == 0 && o.Clock.Now() >= o.Deadline {
			return r, fmt.Errorf("%w: %s after %d rounds", ErrTimeout, me, r.Rounds)
		}
		if o.Spread != 0 {
			delay(flagMe, hash(n)%o.Spread)
		}
		if o.Plain {
			*flagMe = 1
			*turn = uint64(other)
		} else {
			storeWord(flagMe, 1)
			storeWord(turn, uint64(other))
		}
		for loadWord(flagOther) == 1 && loadWord(turn) == uint64(other) {
			spins++
			if spins%checkEvery == 0 {
				if o.Clock.Now() >= o.Deadline {
					storeWord(flagMe, 0)
					return r, fmt.Errorf("%w: %s waiting for the lock after %d rounds", ErrTimeout, me, r.Rounds)
				}
				if o.Rounds == 0 && p.Done(other) {
					break // the other side has finished (with its flag up: it was killed)
				}
			}
		}
		// Critical section.
		bad := loadWord(occupant) != 0
		storeWord(occupant, mine)
		*counter = *counter + 1 // plain: overlapping sections lose increments
		if loadWord(occupant) != mine {
			bad = true
		}
		storeWord(occupant, 0)
		storeWord(flagMe, 0)
		r.Rounds++
		if bad {
			r.Violations++
		}
	}
	p.publish(me, r)
	return r, nil
}
