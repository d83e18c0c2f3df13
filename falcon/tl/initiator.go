package tl

import (
	"strconv"
	"time"

	"falconnic/falcon/framebuf"
	"falconnic/falcon/wire"
)

// IState is an initiator transaction state.
type IState uint8

// Initiator states (see the package diagram).
const (
	IFree IState = iota
	IQueued
	ISent
	IDone
	ICompleted
)

var iStateNames = [...]string{"free", "queued", "sent", "done", "completed"}

// String names the state.
func (s IState) String() string {
	if int(s) < len(iStateNames) {
		return iStateNames[s]
	}
	return "IState(" + strconv.Itoa(int(s)) + ")"
}

// ITxn is one initiator transaction.
type ITxn struct {
	State   IState
	Kind    Kind
	ReqAckd bool // the Pull Request was acknowledged at the PDL
	Status  Status
	ULPCode uint8
	Cookie  uint64
	Length  uint32 // Pull: expected Pull Data length
	PSN     wire.PSN
	// Deadline is the TL's own timeout for a pull whose request the PDL
	// already delivered but whose data never comes [S §11 footnote].
	Deadline time.Duration
	Cells    int    // Tx buffer cells charged
	RxCells  int    // Rx cells pre-allocated for Pull Data
	Payload  []byte // Pull Request ULP header (reused buffer)
	// Frame is a Push's packet under construction: header room, then the
	// payload. Sending builds the header in place and swaps the buffer
	// with the PDL slot's, so the payload is copied once (reused buffer).
	Frame []byte
	// Shared is instead a Push's packet under construction in Mem, a
	// shared frame buffer the transaction holds a reference to until it
	// is sent (falcon's pushes over a RefLink).
	Shared []byte
	Mem    *framebuf.Buf
	Data   []byte // Pull Data held for ordered completion (reused buffer)
	// Lent is a PushFrame's buffer while the ULP's: before it is sent, and
	// once its PDL slot gave it back, until the completion reports it.
	Lent []byte
}

// Initiator is the initiator's transaction table: RSNs in [Base, Next) are
// live; SendNext is the first not yet handed to the PDL.
type Initiator struct {
	Base, Next, SendNext wire.RSN
	mask                 uint32
	slots                []ITxn
}

// Init sets the initial RSN and the table size (power of two ≥ 2).
func (t *Initiator) Init(rsn wire.RSN, size uint32) {
	n := uint32(2)
	for n < size {
		n <<= 1
	}
	t.Base, t.Next, t.SendNext, t.mask = rsn, rsn, rsn, n-1
	if uint32(len(t.slots)) != n {
		t.slots = make([]ITxn, n)
	}
}

// Cap returns the table size.
func (t *Initiator) Cap() uint32 { return t.mask + 1 }

// Live returns Next − Base.
func (t *Initiator) Live() uint32 { return uint32(t.Next.Sub(t.Base)) }

// Full reports whether no slot is free.
func (t *Initiator) Full() bool { return t.Live() > t.mask }

// Contains reports whether rsn is live.
func (t *Initiator) Contains(rsn wire.RSN) bool {
	d := rsn.Sub(t.Base)
	return d >= 0 && d < t.Next.Sub(t.Base)
}

// Slot returns rsn's slot; the caller checks Contains.
func (t *Initiator) Slot(rsn wire.RSN) *ITxn { return &t.slots[uint32(rsn)&t.mask] }

// Add assigns the next RSN to a queued transaction, keeping slot buffers.
func (t *Initiator) Add(k Kind, cookie uint64) (wire.RSN, *ITxn) {
	rsn := t.Next
	s := &t.slots[uint32(rsn)&t.mask]
	// The buffers are read out before the slot is reset in place: a
	// literal naming s's own fields would be built in a temporary and
	// copied over, whose wide loads of narrow stores stall.
	p, f, d := s.Payload[:0], s.Frame[:0], s.Data[:0]
	*s = ITxn{State: IQueued, Kind: k, Cookie: cookie}
	s.Payload, s.Frame, s.Data = p, f, d
	t.Next = t.Next.Add(1)
	return rsn, s
}

// Advance frees completed slots at the base and returns how many.
func (t *Initiator) Advance() int {
	n := 0
	for t.Base != t.Next {
		s := &t.slots[uint32(t.Base)&t.mask]
		if s.State != ICompleted {
			break
		}
		s.State = IFree
		t.Base = t.Base.Add(1)
		n++
	}
	return n
}
