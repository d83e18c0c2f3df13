package pdl

import (
	"testing"

	"falconnic/falcon/wire"
)

// The receiver's sliding-window verdicts [S §9.2.2.4], across the 2^32 wrap.
func TestRxWindowVerdicts(t *testing.T) {
	var w RxWindow
	base := wire.PSN(0xfffffffe)
	w.Init(base, RxRequestWindow)
	cases := []struct {
		psn  wire.PSN
		want Verdict
	}{
		{base, VerdictNew},
		{base.Add(63), VerdictNew},
		{base.Add(64), VerdictBeyond},
		{base - 1, VerdictOld},
		{base.Add(1 << 31), VerdictOld}, // half the space away: behind
	}
	for _, c := range cases {
		if got := w.Classify(c.psn); got != c.want {
			t.Errorf("Classify(%d) = %v, want %v", c.psn, got, c.want)
		}
	}
	w.Receive(base.Add(2))
	if got := w.Classify(base.Add(2)); got != VerdictDupRx {
		t.Errorf("received, unacked: %v", got)
	}
	w.Ack(base.Add(2))
	if got := w.Classify(base.Add(2)); got != VerdictDupAcked {
		t.Errorf("acked: %v", got)
	}
	if w.Base() != base {
		t.Fatalf("base moved over a hole")
	}
	if !w.NeedsEACK(false) {
		t.Error("an ack beyond the base must be reported in an EACK")
	}
	w.Ack(base)
	w.Ack(base.Add(1))
	if w.Base() != base.Add(3) || w.Base() != 1 {
		t.Errorf("base %d after filling the hole, want 1 (wrapped)", w.Base())
	}
	if w.HasState() {
		t.Error("state left after the base passed everything")
	}
}

// Push Data is received before its ULP ack; RNR undoes the receipt.
func TestRxWindowPushLifecycle(t *testing.T) {
	var w RxWindow
	w.Init(100, RxDataWindow)
	w.Receive(100)
	w.Receive(101)
	if w.NeedsEACK(false) {
		t.Error("contiguous receipts need only a BACK")
	}
	if w.NextExpected() != 102 {
		t.Errorf("next expected %d", w.NextExpected())
	}
	w.Unreceive(100)
	if w.Classify(100) != VerdictNew || !w.NeedsEACK(false) {
		t.Error("RNR'd push must be admitted again; the hole needs an EACK")
	}
	w.Remember(101, wire.NackCIE, 9, 0)
	if m, ok := w.Recall(101); !ok || m.Code != wire.NackCIE || m.ULP != 9 {
		t.Errorf("recall %+v %v", m, ok)
	}
	if _, ok := w.Recall(100); ok {
		t.Error("recalled a NACK never given")
	}
	w.Ack(100)
	w.Ack(101)
	if _, ok := w.Recall(101); ok {
		t.Error("NACK memo outlived the window")
	}
}

func TestBits(t *testing.T) {
	var b Bits
	for _, n := range []uint32{0, 1, 2, 63, 64, 100, 127} {
		b.Set(n)
	}
	if b.TrailingOnes() != 3 || b.Highest() != 127 || b.Count() != 7 || b.Contiguous() {
		t.Errorf("bits %v", b)
	}
	b.ShiftDown(64)
	if !b.Test(0) || !b.Test(36) || !b.Test(63) || b.Count() != 3 {
		t.Errorf("after shift %v", b)
	}
	b.ShiftDown(200)
	if !b.Zero() {
		t.Error("shift past the end leaves bits")
	}
}
