package falcon

import (
	"testing"
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/internal/clock"
)

func TestPathPolicyNames(t *testing.T) {
	for p := PathPolicy(0); p < numPathPolicies; p++ {
		got, ok := ParsePathPolicy(p.String())
		if !ok || got != p {
			t.Errorf("policy %d: name %q parses to %v, %v", p, p.String(), got, ok)
		}
	}
	if _, ok := ParsePathPolicy("random"); ok {
		t.Error("unknown policy parsed")
	}
}

// multiConn returns a connection of four flows with the given windows.
func multiConn(t *testing.T, pol PathPolicy, w [4]float64) *Conn {
	t.Helper()
	e := New(Config{Clock: clock.NewManual(time.Millisecond), Link: &sink{}, ULP: &recULP{name: "A"}})
	c, err := e.Connect(ConnConfig{SCID: 5, DCID: 9, Flows: 4, PathPolicy: pol})
	if err != nil {
		t.Fatal(err)
	}
	for i := range w {
		c.flows[i].fcwnd = rue.FixedFrom(w[i])
	}
	c.sumFcwnd()
	return c
}

// Max-open sends on the flow with the most open window (fcwnd less its
// packets in flight); ties go round robin; an ACK reopens a flow.
func TestMaxOpenPicksMostOpenFlow(t *testing.T) {
	c := multiConn(t, PathMaxOpen, [4]float64{4, 1, 1, 1})
	var seq []uint8
	for i := 0; i < 7; i++ {
		seq = append(seq, c.pickFlow())
	}
	want := []uint8{0, 0, 0, 1, 2, 3, 0}
	for i := range want {
		if seq[i] != want[i] {
			t.Fatalf("picks %v, want %v", seq, want)
		}
	}
	c.landed(2)
	c.landed(2) // a count never goes below zero
	if got := c.pickFlow(); got != 2 {
		t.Errorf("after flow 2's packet landed, picked %d", got)
	}
	if c.flows[2].out != 1 {
		t.Errorf("flow 2 in flight %d, want 1", c.flows[2].out)
	}
}

// Weighted round robin spreads packets in proportion to the flows' shares
// of the window (weights out of 15, at least 1).
func TestWeightedTracksFcwndShares(t *testing.T) {
	c := multiConn(t, PathWeighted, [4]float64{8, 4, 2, 2})
	var n [4]int
	for i := 0; i < 1600; i++ {
		n[c.pickFlow()]++
	}
	want := [4]int{800, 400, 200, 200}
	if n != want {
		t.Errorf("picks per flow %v, want %v", n, want)
	}
	// A flow whose window collapses still gets its weight of 1.
	c = multiConn(t, PathWeighted, [4]float64{100, 0.01, 100, 100})
	n = [4]int{}
	for i := 0; i < 1600; i++ {
		n[c.pickFlow()]++
	}
	if n[1] != 100 { // weights 5, 1, 5, 5
		t.Errorf("starved flow got %d of 1600, want 1/16", n[1])
	}
	// Round robin ignores the windows.
	c = multiConn(t, PathRoundRobin, [4]float64{8, 4, 2, 2})
	n = [4]int{}
	for i := 0; i < 400; i++ {
		n[c.pickFlow()]++
	}
	if n != [4]int{100, 100, 100, 100} {
		t.Errorf("round robin %v", n)
	}
}

// pathRUE asks for a new path on every event of flow 1.
type pathRUE struct{}

func (pathRUE) Handle(ev *rue.Event) (rue.Response, bool) {
	return rue.Response{Conn: ev.Conn, Flow: ev.Flow, Fcwnd: ev.Fcwnd, Ncwnd: ev.Ncwnd, RTO: ev.RTO,
		RandomizePath: ev.Flow == 1}, true
}

// PLB's request changes only the flow's label entropy (the low two bits
// keep the flow id); a protective reroute changes it on an RTO and holds
// PLB off the flow for a while.
func TestRepathAndProtectiveReroute(t *testing.T) {
	clk := clock.NewManual(time.Millisecond)
	e := New(Config{Clock: clk, Link: &sink{}, ULP: &recULP{name: "A"}, RUE: pathRUE{}})
	c, err := e.Connect(ConnConfig{SCID: 5, DCID: 9, Flows: 2, ProtectiveReroute: true, RerouteHold: time.Millisecond,
		InitRTO: 100 * time.Microsecond, MinRTO: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	labels := c.cfg.FlowLabels
	c.applyRUE(&rue.Response{Conn: 5, Flow: 1, Fcwnd: 32 * rue.One, Ncwnd: 64, RandomizePath: true})
	if c.cfg.FlowLabels[1] == labels[1] || c.cfg.FlowLabels[1]&3 != 1 || c.cfg.FlowLabels[0] != labels[0] {
		t.Fatalf("PLB repath: labels %x → %x", labels, c.cfg.FlowLabels)
	}
	if c.Stats.Repath.Load() != 1 {
		t.Errorf("repaths %d", c.Stats.Repath.Load())
	}
	// Two pushes, one per flow, never acknowledged: both time out.
	c.Push(1, []byte("x"))
	c.Push(2, []byte("y"))
	labels = c.cfg.FlowLabels
	clk.Advance(150 * time.Microsecond)
	e.OnTimer(clk.Now())
	if c.Stats.Reroute.Load() != 2 || c.cfg.FlowLabels[0] == labels[0] || c.cfg.FlowLabels[1] == labels[1] ||
		c.cfg.FlowLabels[0]&3 != 0 || c.cfg.FlowLabels[1]&3 != 1 {
		t.Fatalf("reroutes %d, labels %x → %x", c.Stats.Reroute.Load(), labels, c.cfg.FlowLabels)
	}
	// Within the hold PLB's request is refused and counted.
	labels = c.cfg.FlowLabels
	held := c.Stats.RepathHeld.Load() // the RETX events' requests were held too
	c.applyRUE(&rue.Response{Conn: 5, Flow: 1, Fcwnd: 32 * rue.One, Ncwnd: 64, RandomizePath: true})
	if c.cfg.FlowLabels != labels || c.Stats.RepathHeld.Load() != held+1 {
		t.Errorf("PLB repath during the hold: labels %x → %x, held %d", labels, c.cfg.FlowLabels, c.Stats.RepathHeld.Load()-held)
	}
	// After it (at most 2 × hold) PLB may move the flow again.
	clk.Advance(2 * time.Millisecond)
	c.applyRUE(&rue.Response{Conn: 5, Flow: 1, Fcwnd: 32 * rue.One, Ncwnd: 64, RandomizePath: true})
	if c.cfg.FlowLabels[1] == labels[1] || c.Stats.Repath.Load() != 2 {
		t.Errorf("PLB repath after the hold: labels %x → %x", labels, c.cfg.FlowLabels)
	}
}

// xonULP refills a connection as soon as it is told it may.
type xonULP struct{ order []uint32 }

func (u *xonULP) OnRequest(c *Conn, r *Request)         {}
func (u *xonULP) OnCompletion(c *Conn, cpl *Completion) {}
func (u *xonULP) OnXon(c *Conn) {
	u.order = append(u.order, c.SCID())
	for {
		if _, err := c.Push(0, []byte("x")); err != nil {
			return
		}
	}
}

// Freed transmit resources go round the Xoff'ed connections (RM-9): a
// ULP that refills at once must not hand every freed packet to the same
// first connection of the list.
func TestXonRoundRobin(t *testing.T) {
	u := &xonULP{}
	l := tl.DefaultLimits()
	l.TxReqPkts = 1
	e := New(Config{Clock: clock.NewManual(time.Millisecond), Link: &sink{}, ULP: u, Limits: l})
	var cs []*Conn
	for i := uint32(1); i <= 4; i++ {
		c, err := e.Connect(ConnConfig{SCID: i, DCID: i})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for _, c := range cs { // the first takes the only packet; all end Xoff'ed
		u.OnXon(c)
	}
	u.order = nil
	for round := 0; round < 8; round++ {
		e.res.TxReq.Give(1) // one packet frees (as a completion would)
		e.xonScan()
	}
	want := []uint32{1, 2, 3, 4, 1, 2, 3, 4} // a fixed-order scan gives 1, 1, 1, …
	if len(u.order) != len(want) {
		t.Fatalf("Xon order %v, want %v", u.order, want)
	}
	for i := range want {
		if u.order[i] != want[i] {
			t.Fatalf("Xon order %v, want %v", u.order, want)
		}
	}
}

// When probes reroute, a probe whose ACK never comes is followed by
// another a PTO later on a new path, up to maxRerouteProbes; plain TLP
// probes once and leaves the rest to the RTO.
func TestRerouteProbesRepeat(t *testing.T) {
	for _, rr := range []bool{false, true} {
		s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TLP: true, InitRTO: 10 * time.Millisecond,
			MinRTO: 10 * time.Millisecond, ProtectiveReroute: rr, RerouteOnProbe: rr})
		s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
		s.pushAcked(1) // an RTT sample: PTO = 50 µs
		label := s.ca.cfg.FlowLabels[0]
		s.autoLose = func(dir, desc string) bool { return dir == "A→B" } // the path dies
		s.ca.Push(2, nil)
		s.wait(400 * time.Microsecond)
		want, moved := uint64(1), uint64(0)
		if rr {
			want, moved = maxRerouteProbes, maxRerouteProbes
		}
		if got := s.ca.Stats.RetxTLP.Load(); got != want || s.ca.Stats.Reroute.Load() != moved || s.ca.Stats.RetxRTO.Load() != 0 {
			t.Errorf("reroute %v: %d probes, %d reroutes, %d RTOs; want %d, %d, 0", rr, got, s.ca.Stats.Reroute.Load(),
				s.ca.Stats.RetxRTO.Load(), want, moved)
		}
		if rr == (s.ca.cfg.FlowLabels[0] == label) {
			t.Errorf("reroute %v: label %x → %x", rr, label, s.ca.cfg.FlowLabels[0])
		}
	}
}
