package pdl

import (
	"strconv"
	"time"

	"falconnic/falcon/framebuf"
	"falconnic/falcon/wire"
)

// SlotState is the state of one transmitter slot.
type SlotState uint8

// Slot states (see the package diagram).
const (
	SlotFree SlotState = iota
	SlotInflight
	SlotHeld // out of the retransmit queue: awaiting a Resync or an RNR delay
	SlotAcked
)

var slotStateNames = [...]string{"free", "inflight", "held", "acked"}

// String names the state.
func (s SlotState) String() string {
	if int(s) < len(slotStateNames) {
		return slotStateNames[s]
	}
	return "SlotState(" + strconv.Itoa(int(s)) + ")"
}

// TxSlot is the transmitter's record of one outstanding PSN.
type TxSlot struct {
	State    SlotState
	Type     wire.PacketType // type of the original packet
	Resync   bool            // the slot now carries a Resync for the original
	Code     wire.ResyncCode // Resync code when Resync
	Received bool            // peer's EACK data-rx bitmap showed it
	Request  bool            // counts toward the outstanding-request counter (ORC)
	Retx     bool            // last send was a retransmission (ORRC)
	Refused  bool            // the receiver refused it (resource or RNR NACK): the next resend is no attempt
	Resumed  bool            // Deadline was restarted after a host stall since the last send (falcon's Endpoint.Resumed)
	Flow     uint8
	Retries  uint8 // retransmissions of the current packet (reset by Resync)
	Early    uint8 // early retransmissions (capped)
	RSN      wire.RSN
	Ref      uint32        // owner's handle (transaction slot)
	SentAt   time.Duration // last (re)transmission time
	FirstAt  time.Duration // first transmission time
	Deadline time.Duration // RTO (or RNR) deadline while inflight/held
	Buf      []byte        // the packet as sent (header + payload, no trailer)
	// Lent: Buf is a ULP's buffer (falcon's PushFrame), its own parked in
	// Spare until the slot is acknowledged and gives Buf back.
	Lent  bool
	Spare []byte
	// Shared: Buf went to a RefLink by reference; it is not written again
	// (falcon's Conn.private copies it first).
	Shared bool
	// Mem: Buf lies in a shared frame buffer the slot holds a reference
	// to (falcon's Pull Data over a RefLink), its own buffer parked in
	// Spare until the slot is acknowledged and lets Mem go.
	Mem *framebuf.Buf
}

// TxWindow is one transmitter sliding window: PSNs in [Base, Next) are
// outstanding, each with a slot in a power-of-two ring.
type TxWindow struct {
	base, next wire.PSN
	mask       uint32
	slots      []TxSlot
	// ORC counts outstanding new requests (Push Data, Pull Request) for the
	// ncwnd gate; ORRC those that were retransmitted [S §9.1.2].
	ORC, ORRC int
	// landed counts the slots in [base, next) the peer acknowledged or
	// reported received; the rest are in flight.
	landed uint32
}

// Init sets the initial PSN and the ring size (rounded up to a power of two,
// at least 2).
func (w *TxWindow) Init(base wire.PSN, size uint32) {
	n := uint32(2)
	for n < size {
		n <<= 1
	}
	w.base, w.next, w.mask = base, base, n-1
	w.ORC, w.ORRC, w.landed = 0, 0, 0
	if uint32(len(w.slots)) != n {
		w.slots = make([]TxSlot, n)
	} else {
		for i := range w.slots {
			w.slots[i] = TxSlot{Buf: w.slots[i].own()}
		}
	}
}

// own is the slot's own buffer, emptied: never one a ULP lent it or one
// that is (or was) shared with a receiver — those go back through
// acknowledgement, or to the garbage collector.
func (s *TxSlot) own() []byte {
	if s.Lent || s.Shared || s.Mem != nil {
		return s.Spare[:0]
	}
	return s.Buf[:0]
}

// Base returns the oldest unacknowledged PSN.
func (w *TxWindow) Base() wire.PSN { return w.base }

// Next returns the PSN the next new packet gets.
func (w *TxWindow) Next() wire.PSN { return w.next }

// Cap returns the ring size.
func (w *TxWindow) Cap() uint32 { return w.mask + 1 }

// Outstanding returns Next − Base.
func (w *TxWindow) Outstanding() uint32 { return uint32(w.next.Sub(w.base)) }

// InFlight returns the outstanding packets the peer has neither
// acknowledged nor reported received.
func (w *TxWindow) InFlight() uint32 { return w.Outstanding() - w.landed }

// Unsettled returns the outstanding packets that still hold the window
// when it is gated on packets in flight: those in flight, and the
// received ones before the first hole — the receiver keeps them for its
// ULP (a slow host), and only the packets past a hole it has not
// acknowledged yet are set aside (they wait for the repair, not for the
// receiver).
func (w *TxWindow) Unsettled() uint32 {
	n := w.Outstanding()
	lead := uint32(0)
	for ; lead < n; lead++ {
		s := &w.slots[uint32(w.base.Add(lead))&w.mask]
		if !s.Received && s.State != SlotAcked {
			break
		}
	}
	return w.InFlight() + lead
}

// MarkReceived records that the peer's EACK data-rx bitmap shows an
// outstanding slot (received, its ULP acknowledgement pending).
func (w *TxWindow) MarkReceived(s *TxSlot) {
	if s.Received || s.State == SlotAcked || s.State == SlotFree {
		return
	}
	s.Received = true
	w.landed++
}

// ClearReceived forgets that the peer held a slot (it refused it after
// all: a resource or RNR NACK), so the slot is in flight again.
func (w *TxWindow) ClearReceived(s *TxSlot) {
	if !s.Received {
		return
	}
	s.Received = false
	if s.State != SlotAcked && s.State != SlotFree {
		w.landed--
	}
}

// Full reports whether the ring has no free slot.
func (w *TxWindow) Full() bool { return w.Outstanding() > w.mask }

// Contains reports whether psn is outstanding.
func (w *TxWindow) Contains(psn wire.PSN) bool {
	d := psn.Sub(w.base)
	return d >= 0 && d < w.next.Sub(w.base)
}

// Slot returns psn's slot; the caller checks Contains first.
func (w *TxWindow) Slot(psn wire.PSN) *TxSlot { return &w.slots[uint32(psn)&w.mask] }

// Alloc assigns the next PSN and returns its (reset) slot, keeping the slot's
// buffer for reuse. The caller checks Full first.
func (w *TxWindow) Alloc() (wire.PSN, *TxSlot) {
	psn := w.next
	s := &w.slots[uint32(psn)&w.mask]
	// The buffer is read out before the slot is reset in place: a
	// literal naming s's own fields would be built in a temporary and
	// copied over, whose wide loads of narrow stores stall.
	buf := s.own()
	*s = TxSlot{State: SlotInflight}
	s.Buf = buf
	w.next = w.next.Add(1)
	return psn, s
}

// MarkAcked moves an outstanding slot to acked and keeps ORC/ORRC. It
// reports whether the slot was not acked before.
func (w *TxWindow) MarkAcked(s *TxSlot) bool {
	if s.State == SlotAcked || s.State == SlotFree {
		return false
	}
	if s.Request {
		w.ORC--
		if s.Retx {
			w.ORRC--
		}
	}
	if !s.Received {
		w.landed++
	}
	s.State = SlotAcked
	return true
}

// Advance moves the base over the leading run of acked slots, freeing them,
// and returns how far it moved.
func (w *TxWindow) Advance() uint32 {
	n := uint32(0)
	for w.base != w.next {
		s := &w.slots[uint32(w.base)&w.mask]
		if s.State != SlotAcked {
			break
		}
		s.State = SlotFree
		w.landed--
		w.base = w.base.Add(1)
		n++
	}
	return n
}
