package falcon

import (
	"testing"

	"falconnic/internal/stats"
)

// TestHotCounterTables checks every per-event counter index names a
// counter of its own that the counter table exports.
func TestHotCounterTables(t *testing.T) {
	var es EndpointCounters
	var cs ConnCounters
	exported := map[*stats.Counter]bool{}
	for _, d := range es.Set() {
		exported[d.Counter] = true
	}
	for _, d := range cs.Set() {
		exported[d.Counter] = true
	}
	seen := map[*stats.Counter]bool{}
	check := func(what string, k int, p *stats.Counter) {
		if seen[p] || !exported[p] {
			t.Errorf("%s hot counter %d: shared with another index or not exported", what, k)
		}
		seen[p] = true
	}
	for k, f := range epHotCounters {
		if f == nil {
			t.Fatalf("endpoint hot counter %d has no row", k)
		}
		check("endpoint", k, f(&es))
	}
	for k, f := range connHotCounters {
		if f == nil {
			t.Fatalf("connection hot counter %d has no row", k)
		}
		check("connection", k, f(&cs))
	}
}

// hotPair is a pair whose B acknowledges every push at once.
func hotPair(t *testing.T) (*Pair, *recULP) {
	ua, ub := &recULP{}, &recULP{}
	ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	p, err := NewPair(PairConfig{Conn: ConnConfig{SCID: 1, DCID: 2, MaxTxns: 4}, ULPA: ua, ULPB: ub})
	if err != nil {
		t.Fatal(err)
	}
	return p, ua
}

// TestHotCountsOutsideBursts: outside a burst every count is in its
// counter when the call that made it returns.
func TestHotCountsOutsideBursts(t *testing.T) {
	p, ua := hotPair(t)
	for i := 0; i < 4; i++ {
		if _, err := p.CA.Push(0, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.CA.Stats.TxnSubmitted.Load(); got != 4 {
		t.Fatalf("txn_submitted after 4 pushes = %d", got)
	}
	if got := p.A.Stats.TxFrames.Load(); got != 4 {
		t.Fatalf("tx_frames after 4 pushes = %d", got)
	}
	if _, err := p.CA.Push(0, []byte("x")); err != ErrXoff {
		t.Fatalf("fifth push: %v, want ErrXoff", err)
	}
	if got := p.CA.Stats.Xoff.Load(); got != 1 {
		t.Fatalf("xoff after a refusal = %d", got)
	}
	if !p.RunUntil(func() bool { return len(ua.cpls) == 4 }, 1e9) {
		t.Fatal("pushes did not complete")
	}
	if got := p.CA.Stats.Completed.Load(); got != 4 {
		t.Errorf("txn_completed = %d, want 4", got)
	}
	if got := p.CB.Stats.Delivered.Load(); got != 4 {
		t.Errorf("txn_delivered = %d, want 4", got)
	}
	if a, b := p.A.Stats.TxFrames.Load(), p.B.Stats.RxFrames.Load(); a != b {
		t.Errorf("A sent %d frames, B received %d", a, b)
	}
}

// TestHotCountsPublishedWhenBurstEnds: frames received in a burst are
// counted when the burst ends.
func TestHotCountsPublishedWhenBurstEnds(t *testing.T) {
	p, _ := hotPair(t)
	for i := 0; i < 3; i++ {
		if _, err := p.CA.Push(0, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	p.B.BeginBurst()
	if n := p.AB.Poll(p.B.Receive); n != 3 {
		t.Fatalf("delivered %d frames, want 3", n)
	}
	if got := p.B.Stats.RxFrames.Load(); got != 0 {
		t.Errorf("rx_frames inside the burst = %d, want 0 (published at EndBurst)", got)
	}
	p.B.EndBurst()
	if got := p.B.Stats.RxFrames.Load(); got != 3 {
		t.Errorf("rx_frames after the burst = %d, want 3", got)
	}
	if got := p.CB.Stats.Delivered.Load(); got != 3 {
		t.Errorf("txn_delivered after the burst = %d, want 3", got)
	}
}
