package pdl

import (
	"strconv"

	"falconnic/falcon/wire"
)

// Receiver window sizes [S §9, digest §3].
const (
	RxRequestWindow = 64
	RxDataWindow    = 128
)

// Verdict is the sliding-window classification of a received PSN
// [S §9.2.2.4].
type Verdict uint8

// Verdicts, in the order the receiver tests them.
const (
	VerdictNew      Verdict = iota // in window, never seen: admit
	VerdictOld                     // PSN < Base: old duplicate
	VerdictBeyond                  // PSN ≥ Base+Size: out of window (OWN)
	VerdictDupAcked                // in window, ack bit set
	VerdictDupRx                   // in window, received, not yet acked
)

var verdictNames = [...]string{"new", "old", "beyond", "dup-acked", "dup-received"}

// String names the verdict.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// NackMemo remembers the ULP NACK given to a received packet so a duplicate
// gets the same NACK again (lost-NACK recovery, [S §9.2.2.4]).
type NackMemo struct {
	PSN   wire.PSN
	Valid bool
	Code  wire.NackCode
	ULP   uint8
	RNR   uint8
}

// RxWindow is one receiver sliding window.
type RxWindow struct {
	base wire.PSN
	size uint32
	ack  Bits
	rx   Bits
	own  bool
	memo [RxDataWindow]NackMemo
}

// Init sets the window's base and size (64 or 128; anything else is clamped
// into [1, 128]).
func (w *RxWindow) Init(base wire.PSN, size uint32) {
	if size == 0 || size > RxDataWindow {
		size = RxDataWindow
	}
	*w = RxWindow{base: base, size: size}
}

// Base returns the oldest PSN not yet acknowledged.
func (w *RxWindow) Base() wire.PSN { return w.base }

// Size returns the window size.
func (w *RxWindow) Size() uint32 { return w.size }

// Classify returns the verdict for psn without changing state.
func (w *RxWindow) Classify(psn wire.PSN) Verdict {
	d := psn.Sub(w.base)
	switch {
	case d < 0:
		return VerdictOld
	case uint32(d) >= w.size:
		return VerdictBeyond
	case w.ack.Test(uint32(d)):
		return VerdictDupAcked
	case w.rx.Test(uint32(d)):
		return VerdictDupRx
	}
	return VerdictNew
}

// Receive marks an in-window psn received (not yet acknowledged).
func (w *RxWindow) Receive(psn wire.PSN) {
	if d := psn.Sub(w.base); d >= 0 && uint32(d) < w.size {
		w.rx.Set(uint32(d))
	}
}

// Ack marks psn received and acknowledged and advances the base over the
// leading run of acked PSNs. It returns how far the base moved.
func (w *RxWindow) Ack(psn wire.PSN) uint32 {
	d := psn.Sub(w.base)
	if d < 0 || uint32(d) >= w.size {
		return 0
	}
	w.rx.Set(uint32(d))
	w.ack.Set(uint32(d))
	n := w.ack.TrailingOnes()
	if n == 0 {
		return 0
	}
	for i := uint32(0); i < n; i++ {
		w.memo[uint32(w.base.Add(i))%RxDataWindow].Valid = false
	}
	w.ack.ShiftDown(n)
	w.rx.ShiftDown(n)
	w.base = w.base.Add(n)
	return n
}

// Unreceive clears the rx bit of a received but unacknowledged psn (a push
// the ULP refused with RNR must be admitted again when retransmitted).
func (w *RxWindow) Unreceive(psn wire.PSN) {
	if d := psn.Sub(w.base); d >= 0 && uint32(d) < w.size && !w.ack.Test(uint32(d)) {
		w.rx.Clear(uint32(d))
	}
}

// NextExpected returns the first PSN not yet received (the base plus the run
// of received PSNs at its start): the only PSN a Go-Back-N receiver admits.
func (w *RxWindow) NextExpected() wire.PSN { return w.base.Add(w.rx.TrailingOnes()) }

// SetOWN records an out-of-window drop; TakeOWN reads and clears it (an
// outgoing EACK carried it [S §9.2.2.4]).
func (w *RxWindow) SetOWN()        { w.own = true }
func (w *RxWindow) OWN() bool      { return w.own }
func (w *RxWindow) ClearOWN()      { w.own = false }
func (w *RxWindow) AckBits() Bits  { return w.ack }
func (w *RxWindow) RxBits() Bits   { return w.rx }
func (w *RxWindow) HasState() bool { return !w.ack.Zero() || !w.rx.Zero() || w.own }

// NeedsEACK reports whether an ACK for this window must be an EACK
// [S §9.1.6]: any ack bit beyond the base, a hole in the rx bitmap, or OWN.
// rackTLP makes any rx bit beyond the base require an EACK (digest §5.3).
func (w *RxWindow) NeedsEACK(rackTLP bool) bool {
	if w.own || !w.ack.Zero() {
		return true
	}
	if rackTLP {
		return !w.rx.Zero()
	}
	return !w.rx.Contiguous()
}

// Memo returns the NACK memo slot of psn.
func (w *RxWindow) Memo(psn wire.PSN) *NackMemo { return &w.memo[uint32(psn)%RxDataWindow] }

// Remember stores the NACK given to psn.
func (w *RxWindow) Remember(psn wire.PSN, code wire.NackCode, ulp, rnr uint8) {
	w.memo[uint32(psn)%RxDataWindow] = NackMemo{PSN: psn, Valid: true, Code: code, ULP: ulp, RNR: rnr}
}

// Recall returns the NACK remembered for psn, if any.
func (w *RxWindow) Recall(psn wire.PSN) (NackMemo, bool) {
	m := w.memo[uint32(psn)%RxDataWindow]
	return m, m.Valid && m.PSN == psn
}
