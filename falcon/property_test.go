package falcon

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"falconnic/falcon/link"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// propULP drives one side of a property run: it answers requests (pushes
// acked, pulls answered with pattern(rsn, len)), sometimes with RNR or CIE,
// and checks every completion.
type propULP struct {
	t        *testing.T
	name     string
	rng      *rand.Rand
	ordered  bool
	rnrProb  float64
	cieProb  float64
	rnrRSN   map[wire.RSN]bool // RNR'd and not yet accepted (ordered: later ones wait too)
	rnrMin   wire.RSN          // smallest of rnrRSN when rnrAny
	rnrAny   bool
	accepted []wire.RSN        // target: RSNs accepted, in order
	got      map[wire.RSN]bool // target: accepted or CIE'd (exactly once)
	cieRSN   map[wire.RSN]bool
	// initiator side
	want      map[wire.RSN]want
	completed int
	lastCpl   wire.RSN
	anyCpl    bool
	errs      int
	deferred  []func() // responses given later, outside the callback
}

type want struct {
	kind   tl.Kind
	length int
}

func newPropULP(t *testing.T, name string, seed uint64, ordered bool) *propULP {
	return &propULP{t: t, name: name, rng: rand.New(rand.NewPCG(seed, 7)), ordered: ordered,
		rnrRSN: map[wire.RSN]bool{}, got: map[wire.RSN]bool{}, cieRSN: map[wire.RSN]bool{}, want: map[wire.RSN]want{}}
}

func (u *propULP) fail(format string, a ...any) {
	u.errs++
	if u.errs < 5 {
		u.t.Errorf(u.name+": "+format, a...)
	}
}

func (u *propULP) OnRequest(c *Conn, r *Request) {
	// On an ordered connection the ULP answers in delivery order: once one
	// answer is deferred, later ones queue behind it.
	if u.rng.IntN(4) == 0 || u.ordered && len(u.deferred) > 0 {
		req := *r
		req.Payload = append([]byte(nil), r.Payload...)
		u.deferred = append(u.deferred, func() { u.respond(c, &req) })
		return
	}
	u.respond(c, r)
}

// runDeferred answers the requests held back.
func (u *propULP) runDeferred() {
	d := u.deferred
	u.deferred = nil
	for _, f := range d {
		f()
	}
}

func (u *propULP) respond(c *Conn, r *Request) {
	if u.got[r.RSN] {
		u.fail("request rsn=%d delivered again after it was answered", r.RSN)
		return
	}
	blocked := u.ordered && u.rnrAny && u.rnrMin.Less(r.RSN)
	if c.Dead() {
		return
	}
	if blocked || u.rng.Float64() < u.rnrProb {
		u.rnrRSN[r.RSN] = true
		if !u.rnrAny || r.RSN.Less(u.rnrMin) {
			u.rnrMin, u.rnrAny = r.RSN, true
		}
		if r.Kind == tl.Push {
			c.NackPush(r.RSN, wire.NackRNR, 0, 1) // 10 µs
		} else {
			c.NackPull(r.RSN, 1)
		}
		return
	}
	delete(u.rnrRSN, r.RSN)
	if u.rnrAny && u.rnrMin == r.RSN {
		u.rnrAny = false
		for b := range u.rnrRSN {
			if !u.rnrAny || b.Less(u.rnrMin) {
				u.rnrMin, u.rnrAny = b, true
			}
		}
	}
	u.got[r.RSN] = true
	u.accepted = append(u.accepted, r.RSN)
	if r.Kind == tl.Push {
		if !bytes.Equal(r.Payload, pattern(r.RSN, len(r.Payload))) {
			u.fail("push rsn=%d payload corrupted", r.RSN)
		}
		if u.rng.Float64() < u.cieProb {
			u.cieRSN[r.RSN] = true
			c.NackPush(r.RSN, wire.NackCIE, 7, 0)
			return
		}
		c.AckPush(r.RSN)
		return
	}
	u.answerPull(c, r.RSN, int(r.Length))
}

// answerPull sends Pull Data, retrying later while the NIC's Tx data pool
// refuses it (ErrXoff).
func (u *propULP) answerPull(c *Conn, rsn wire.RSN, n int) {
	if err := c.PullData(rsn, pattern(rsn, n)); errors.Is(err, ErrXoff) {
		u.deferred = append(u.deferred, func() { u.answerPull(c, rsn, n) })
	} else if err != nil && !c.Dead() {
		u.fail("PullData rsn=%d: %v", rsn, err)
	}
}

func (u *propULP) OnCompletion(c *Conn, cpl *Completion) {
	w, ok := u.want[cpl.RSN]
	if !ok {
		u.fail("completion for unknown or already completed rsn=%d", cpl.RSN)
		return
	}
	delete(u.want, cpl.RSN)
	u.completed++
	if u.ordered && u.anyCpl && !u.lastCpl.Less(cpl.RSN) {
		u.fail("ordered completion rsn=%d after rsn=%d", cpl.RSN, u.lastCpl)
	}
	u.lastCpl, u.anyCpl = cpl.RSN, true
	if cpl.Kind != w.kind {
		u.fail("rsn=%d completed as %v, submitted as %v", cpl.RSN, cpl.Kind, w.kind)
	}
	switch {
	case cpl.Status == tl.CmplTargetNackCIE && w.kind == tl.Push:
	case cpl.Status != tl.CmplAck:
		u.fail("rsn=%d completed with %v at %v", cpl.RSN, cpl.Status, c.ep.Now())
	case w.kind == tl.Pull && !bytes.Equal(cpl.Data, pattern(cpl.RSN, w.length)):
		u.fail("pull rsn=%d data corrupted (%d bytes)", cpl.RSN, len(cpl.Data))
	}
}

func (u *propULP) OnXon(c *Conn) {}

// submit offers n random transactions on c, as many as flow control allows
// now; it returns how many were accepted.
func (u *propULP) submit(c *Conn, n int) int {
	k := 0
	for ; k < n; k++ {
		length := u.rng.IntN(1500)
		var rsn wire.RSN
		var err error
		kind := tl.Push
		if u.rng.IntN(3) == 0 {
			kind = tl.Pull
			next := c.ini.Next
			rsn, err = c.Pull(uint64(next), length)
		} else {
			next := c.ini.Next
			u.want[next] = want{kind: tl.Push, length: length}
			rsn, err = c.Push(uint64(next), pattern(next, length))
			if err != nil {
				delete(u.want, next)
			}
		}
		if err != nil {
			break
		}
		u.want[rsn] = want{kind: kind, length: length}
	}
	return k
}

// TestPropertyReliableDelivery: over many seeds, with loss up to 20 %,
// reordering, duplication and corruption in both directions, every
// transaction completes exactly once with intact data, ordered connections
// deliver and complete in RSN order, and nothing stalls.
func TestPropertyReliableDelivery(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	for seed := 0; seed < seeds; seed++ {
		runProperty(t, uint64(seed), 300)
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
}

func runProperty(t *testing.T, seed uint64, total int) { runPropertyCfg(t, seed, total, nil) }

func runPropertyCfg(t *testing.T, seed uint64, total int, tweak func(*ConnConfig)) {
	rng := rand.New(rand.NewPCG(seed, 99))
	drop := rng.Float64() * 0.2
	mem := func(s int64) link.MemConfig {
		return link.MemConfig{Delay: time.Duration(1+rng.IntN(5)) * time.Microsecond, RateBitsPerSec: 100e9,
			DropProb: drop, ReorderProb: rng.Float64() * 0.2, ReorderDelay: time.Duration(1+rng.IntN(10)) * time.Microsecond,
			DupProb: rng.Float64() * 0.05, CorruptProb: rng.Float64() * 0.05, Seed: s}
	}
	ordered := seed%2 == 0
	cc := ConnConfig{SCID: 10 + uint32(seed%7), DCID: 20, Ordered: ordered,
		TxReqPSN: wire.PSN(rng.Uint32()), TxDataPSN: wire.PSN(0xffffff00 + rng.Uint32()%0x200),
		RxReqPSN: wire.PSN(rng.Uint32()), RxDataPSN: wire.PSN(rng.Uint32()),
		TxRSN: wire.RSN(0xfffffff0 + rng.Uint32()%0x40), RxRSN: wire.RSN(rng.Uint32()),
		MaxTxns: 64, MaxRetries: 40}
	if seed%5 == 1 {
		cc.RACK, cc.TLP = true, true
	}
	if seed%7 == 3 {
		cc.GoBackN = true
	}
	if seed%4 == 2 {
		cc.Flows = 4
	}
	ua := newPropULP(t, fmt.Sprintf("seed %d A", seed), seed*3+1, ordered)
	ub := newPropULP(t, fmt.Sprintf("seed %d B", seed), seed*3+2, ordered)
	ua.rnrProb, ub.rnrProb = 0.03, 0.03
	ua.cieProb, ub.cieProb = 0.02, 0.02
	if tweak != nil {
		tweak(&cc)
	}
	var limits tl.Limits
	if seed%3 == 2 && !cc.GoBackN {
		cc.PullTimeout = -1 // tight pools can hold a pull back for long: no TL timeout
		// Tight pools (not with Go-Back-N, which deadlocks when both ends'
		// pools fill with pulls whose data waits behind a refused push).
		// Resource NACKs, Xoff and the HoL reserve get exercised.
		limits = tl.Limits{CellSize: 256, TxReqPkts: 24, TxReqCells: 64, TxDataPkts: 12, TxDataCell: 40,
			RxReqPkts: 16, RxReqCells: 40, RxNetPkts: 10, RxNetCells: 30, HoLPkts: 2, HoLCells: 8, Alpha: 2}
	}
	p, err := NewPair(PairConfig{AB: mem(int64(seed)*2 + 1), BA: mem(int64(seed)*2 + 2), Conn: cc, ULPA: ua, ULPB: ub, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	sentA, sentB := 0, 0
	done := func() bool {
		ua.runDeferred()
		ub.runDeferred()
		if sentA < total {
			sentA += ua.submit(p.CA, total-sentA)
		}
		if sentB < total/3 {
			sentB += ub.submit(p.CB, total/3-sentB)
		}
		return sentA == total && sentB == total/3 && len(ua.want) == 0 && len(ub.want) == 0 &&
			p.CA.Idle() && p.CB.Idle()
	}
	if !p.RunUntil(done, 20*time.Second) {
		t.Errorf("seed %d (drop %.2f, ordered %v): stalled at %v: A sent %d, %d outstanding; B sent %d, %d outstanding; idle %v/%v\nA: %v\nB: %v",
			seed, drop, ordered, p.Clock.Now(), sentA, len(ua.want), sentB, len(ub.want), p.CA.Idle(), p.CB.Idle(),
			p.CA.Stats.Set().NonZero(), p.CB.Stats.Set().NonZero())
		return
	}
	for _, u := range []*propULP{ua, ub} {
		if u.ordered {
			for i := 1; i < len(u.accepted); i++ {
				if !u.accepted[i-1].Less(u.accepted[i]) {
					t.Errorf("%s: ordered delivery rsn=%d after rsn=%d", u.name, u.accepted[i], u.accepted[i-1])
					break
				}
			}
		}
	}
	if ua.completed != total || ub.completed != total/3 {
		t.Errorf("seed %d: completions A %d/%d B %d/%d", seed, ua.completed, total, ub.completed, total/3)
	}
	for _, e := range []*Endpoint{p.A, p.B} {
		r := e.Resources()
		for name, reg := range map[string]*tl.Region{"tx-req": &r.TxReq, "tx-data": &r.TxData, "rx-req": &r.RxReq, "rx-net": &r.RxNet} {
			if reg.Pkt.Used != 0 || reg.Buf.Used != 0 {
				t.Errorf("seed %d: %s pool leaks %d packets, %d cells", seed, name, reg.Pkt.Used, reg.Buf.Used)
			}
		}
	}
	if testing.Verbose() {
		t.Logf("seed %d: resource drops A %d B %d, xoff %d", seed, p.CA.Stats.RxNoResource.Load(), p.CB.Stats.RxNoResource.Load(), p.CA.Stats.Xoff.Load())
	}
	if p.CA.Dead() || p.CB.Dead() {
		t.Errorf("seed %d: connection died", seed)
	}
}
