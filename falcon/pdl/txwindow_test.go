package pdl

import (
	"testing"
	"time"

	"falconnic/falcon/wire"
)

func TestTxWindowAckAdvance(t *testing.T) {
	var w TxWindow
	w.Init(0xfffffffe, 4)
	for i := 0; i < 4; i++ {
		_, s := w.Alloc()
		s.Request = true
		w.ORC++
	}
	if !w.Full() || w.Outstanding() != 4 {
		t.Fatalf("outstanding %d full %v", w.Outstanding(), w.Full())
	}
	// Ack out of order (EACK bits), then the base.
	w.MarkAcked(w.Slot(0))
	if w.Advance() != 0 {
		t.Error("base moved over unacked PSNs")
	}
	if w.MarkAcked(w.Slot(0)) {
		t.Error("double ack counted")
	}
	w.MarkAcked(w.Slot(0xfffffffe))
	w.MarkAcked(w.Slot(0xffffffff))
	if n := w.Advance(); n != 3 || w.Base() != 1 {
		t.Errorf("advanced %d to %d, want 3 to 1", n, w.Base())
	}
	if w.ORC != 1 {
		t.Errorf("ORC %d, want 1", w.ORC)
	}
	if !w.Contains(1) || w.Contains(2) || w.Contains(0) {
		t.Error("Contains wrong after advance")
	}
	psn, s := w.Alloc()
	if psn != 2 || s.State != SlotInflight {
		t.Errorf("alloc %d %v", psn, s.State)
	}
}

func TestCoalescer(t *testing.T) {
	c := Coalescer{Threshold: 10, Timeout: 8 * time.Microsecond}
	c.Note(0, 2)
	if c.Due(7 * time.Microsecond) {
		t.Error("due before the timeout")
	}
	if !c.Due(8 * time.Microsecond) {
		t.Error("not due at the timeout")
	}
	c.Sent()
	for i := 0; i < 5; i++ {
		c.Note(time.Duration(i), 2)
	}
	if !c.Due(5) {
		t.Error("count threshold did not trigger")
	}
	c.Sent()
	c.Request(3)
	if !c.Due(3) {
		t.Error("AR did not trigger")
	}
	c.Sent()
	if _, armed := c.Deadline(); armed {
		t.Error("armed after Sent")
	}
}

func TestRTT(t *testing.T) {
	var r RTT
	if r.Or(5) != 5 {
		t.Error("default before samples")
	}
	r.Sample(100)
	r.Sample(200)
	if r.Smoothed != 125 || r.Min != 100 {
		t.Errorf("smoothed %v min %v", r.Smoothed, r.Min)
	}
}

var _ = wire.PSN(0)

// InFlight counts the outstanding slots the peer neither acknowledged nor
// reported received, across out-of-order acks, receipts, a refusal and
// the base's advance over the wrap.
func TestTxWindowInFlight(t *testing.T) {
	var w TxWindow
	w.Init(0xfffffffe, 8)
	for i := 0; i < 6; i++ {
		w.Alloc()
	}
	steps := []struct {
		do   func()
		want uint32
	}{
		{func() {}, 6},
		{func() { w.MarkReceived(w.Slot(1)) }, 5},
		{func() { w.MarkReceived(w.Slot(1)) }, 5},                                            // again: counted once
		{func() { w.MarkAcked(w.Slot(1)) }, 5},                                               // received, then acked: still landed once
		{func() { w.MarkAcked(w.Slot(2)) }, 4},                                               // acked beyond the hole
		{func() { w.MarkReceived(w.Slot(2)) }, 4},                                            // acked slots are not received again
		{func() { w.MarkReceived(w.Slot(3)); w.ClearReceived(w.Slot(3)) }, 4},                // refused: in flight again
		{func() { w.MarkAcked(w.Slot(0xfffffffe)); w.Advance() }, 3},                         // base moves one
		{func() { w.MarkAcked(w.Slot(0xffffffff)); w.MarkAcked(w.Slot(0)); w.Advance() }, 1}, // over 1 and 2 too
	}
	for i, st := range steps {
		st.do()
		if got := w.InFlight(); got != st.want {
			t.Fatalf("step %d: in flight %d, want %d (outstanding %d)", i, got, st.want, w.Outstanding())
		}
	}
	if w.Base() != 3 || w.Outstanding() != 1 {
		t.Errorf("base %d outstanding %d, want 3 and 1", w.Base(), w.Outstanding())
	}
}

// Unsettled counts what InFlight does plus the received slots before the
// first hole: a receiver holding packets for its slow ULP keeps them in
// the window, while packets past a hole are set aside until the repair.
func TestTxWindowUnsettled(t *testing.T) {
	var w TxWindow
	w.Init(0xfffffffe, 8) // PSNs 0xfffffffe, 0xffffffff, 0, 1, 2, 3
	for i := 0; i < 6; i++ {
		w.Alloc()
	}
	steps := []struct {
		do               func()
		inFlight, unsett uint32
	}{
		{func() {}, 6, 6},
		{func() { w.MarkReceived(w.Slot(1)); w.MarkReceived(w.Slot(2)) }, 4, 4},        // past the hole at the base
		{func() { w.MarkReceived(w.Slot(0xfffffffe)) }, 3, 4},                          // the base held for the ULP
		{func() { w.MarkAcked(w.Slot(0xffffffff)) }, 2, 4},                             // acked out of order: 0 is the hole
		{func() { w.MarkReceived(w.Slot(0)) }, 1, 6},                                   // no hole left: all held
		{func() { w.ClearReceived(w.Slot(0)) }, 2, 4},                                  // refused: the hole again
		{func() { w.MarkAcked(w.Slot(0xfffffffe)); w.Advance() }, 2, 2},                // the base moves over two: 0 is the hole
		{func() { w.MarkAcked(w.Slot(0)); w.MarkAcked(w.Slot(1)); w.Advance() }, 1, 2}, // 2 held, 3 in flight
	}
	for i, st := range steps {
		st.do()
		if got, u := w.InFlight(), w.Unsettled(); got != st.inFlight || u != st.unsett {
			t.Fatalf("step %d: in flight %d unsettled %d, want %d and %d (outstanding %d)", i, got, u, st.inFlight, st.unsett, w.Outstanding())
		}
	}
}
