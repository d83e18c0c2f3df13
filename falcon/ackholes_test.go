package falcon

import (
	"strings"
	"testing"
)

// TestAckHolesAcknowledgesLossAndRepairAtOnce: with AckHoles the receiver
// answers a packet that lands beyond a hole, and the one that fills it,
// with an ACK at once; without, both wait for the coalescing count or
// timer.
func TestAckHolesAcknowledgesLossAndRepairAtOnce(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1, AckHoles: on})
		for i := 0; i < 3; i++ {
			if _, err := s.ca.Push(uint64(i), pattern(0, 64)); err != nil {
				t.Fatal(err)
			}
		}
		if len(s.q) != 3 {
			t.Fatalf("%d frames queued, want 3 pushes", len(s.q))
		}
		s.lose(0)    // PSN 0
		s.deliver(0) // PSN 1: beyond the hole
		acks := func() int {
			n := 0
			for _, f := range s.q {
				if f.dir == "B→A" {
					n++
				}
			}
			return n
		}
		if got, want := acks(), map[bool]int{false: 0, true: 1}[on]; got != want {
			t.Errorf("AckHoles %v: %d ACKs after a packet beyond a hole, want %d", on, got, want)
		}
		holes := s.cb.Stats.AckByHole.Load()
		// Resend PSN 0 by hand: the receiver sees the hole filled.
		s.ca.retransmit(dataW, s.ca.tx[dataW].Base(), s.ca.tx[dataW].Slot(s.ca.tx[dataW].Base()), s.clk.Now())
		for i, f := range s.q {
			if f.dir == "A→B" && strings.Contains(s.line(f, false), "psn=0") {
				s.deliver(i)
				break
			}
		}
		if on && s.cb.Stats.AckByHole.Load() != holes+1 {
			t.Errorf("filling the hole asked for no ACK (ack_by_hole %d → %d)", holes, s.cb.Stats.AckByHole.Load())
		}
		if !on && s.cb.Stats.AckByHole.Load() != 0 {
			t.Error("ack_by_hole counted with AckHoles off")
		}
	}
}
