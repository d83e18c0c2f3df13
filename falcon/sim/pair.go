package sim

import (
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/internal/clock"
)

// PairConfig describes two endpoints A and B joined by an in-memory link.
type PairConfig struct {
	AB, BA     link.MemConfig
	Conn       falcon.ConnConfig // A's view; B gets falcon.Mirror(Conn)
	ULPA, ULPB falcon.ULP
	RUEA, RUEB rue.Engine
	Limits     tl.Limits
	Start      time.Duration // initial clock reading
}

// Pair is the two-endpoint test peer of Falcon's users (verbs, nvme,
// firmware tests) and the loss bench: two endpoints over link.MemPair
// on a manual clock, with one connection between them.
type Pair struct {
	Clock  *clock.Manual
	A, B   *falcon.Endpoint
	AB, BA *link.Mem
	CA, CB *falcon.Conn
}

// NewPair builds a Pair.
func NewPair(cfg PairConfig) (*Pair, error) {
	clk := clock.NewManual(cfg.Start)
	ab, ba := link.NewMemPair(clk, cfg.AB, cfg.BA)
	p := &Pair{Clock: clk, AB: ab, BA: ba}
	p.A = falcon.New(falcon.Config{Clock: clk, Link: ab, ULP: cfg.ULPA, RUE: cfg.RUEA, Limits: cfg.Limits})
	p.B = falcon.New(falcon.Config{Clock: clk, Link: ba, ULP: cfg.ULPB, RUE: cfg.RUEB, Limits: cfg.Limits})
	var err error
	if p.CA, err = p.A.Connect(cfg.Conn); err != nil {
		return nil, err
	}
	if p.CB, err = p.B.Connect(falcon.Mirror(cfg.Conn)); err != nil {
		return nil, err
	}
	return p, nil
}

// Step delivers every frame due now, runs due timers, and otherwise moves
// the clock to the next event: min(link NextDue, endpoint NextDeadline). It
// reports false when nothing at all is pending.
func (p *Pair) Step() bool {
	now := p.Clock.Now()
	n := poll(p.AB, p.B) + poll(p.BA, p.A)
	now = p.Clock.Now()
	p.A.OnTimer(now)
	p.B.OnTimer(now)
	if n > 0 {
		return true
	}
	next, ok := time.Duration(0), false
	consider := func(t time.Duration, has bool) {
		if has && (!ok || t < next) {
			next, ok = t, true
		}
	}
	consider(p.AB.NextDue())
	consider(p.BA.NextDue())
	consider(p.A.NextDeadline())
	consider(p.B.NextDeadline())
	if !ok {
		return false
	}
	if next <= now {
		next = now + 1 // a deadline OnTimer did not clear: move on rather than spin
	}
	p.Clock.Set(next)
	return true
}

// poll delivers the frames due on l to e as one burst.
func poll(l *link.Mem, e *falcon.Endpoint) int {
	e.BeginBurst()
	defer e.EndBurst()
	return l.Poll(e.Receive)
}

// RunUntil steps until done reports true, nothing is pending, or the
// simulated time advanced by limit. It reports done().
func (p *Pair) RunUntil(done func() bool, limit time.Duration) bool {
	end := p.Clock.Now() + limit
	for !done() {
		if p.Clock.Now() > end || !p.Step() {
			return done()
		}
	}
	return true
}

// Connect adds another connection between A and B (A's view; B gets the
// mirror).
func (p *Pair) Connect(cc falcon.ConnConfig) (a, b *falcon.Conn, err error) {
	if a, err = p.A.Connect(cc); err != nil {
		return nil, nil, err
	}
	if b, err = p.B.Connect(falcon.Mirror(cc)); err != nil {
		p.A.Close(cc.SCID)
		return nil, nil, err
	}
	return a, b, nil
}
