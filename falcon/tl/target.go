package tl

import (
	"strconv"
	"time"

	"falconnic/falcon/framebuf"
	"falconnic/falcon/wire"
)

// TState is a target transaction state.
type TState uint8

// Target states (see the package diagram).
const (
	TFree       TState = iota
	TReceived          // admitted, waiting for in-order delivery
	TDelivered         // handed to the ULP, awaiting its response
	TRNRWait           // Pull refused with RNR: redeliver at Deadline
	TResponding        // Pull Data queued or sent, awaiting its ACK
	TFinished          // done; base may pass it
)

var tStateNames = [...]string{"free", "received", "delivered", "rnr-wait", "responding", "finished"}

// String names the state.
func (s TState) String() string {
	if int(s) < len(tStateNames) {
		return tStateNames[s]
	}
	return "TState(" + strconv.Itoa(int(s)) + ")"
}

// TTxn is one target transaction.
type TTxn struct {
	State    TState
	Kind     Kind
	Void     bool     // a Resync said it will never arrive
	AR       bool     // the request asked for an immediate ACK
	PSN      wire.PSN // PSN of the request in the receive window
	Length   uint32   // Pull: requested length
	Cells    int      // Rx network-request cells held
	TxCells  int      // Tx data cells held by Pull Data
	DataPSN  wire.PSN // PSN of our Pull Data
	Deadline time.Duration
	Payload  []byte // request bytes held for delivery (reused)
	// Frame is our Pull Data packet under construction, as ITxn.Frame.
	Frame []byte
	// Shared is instead our Pull Data packet under construction in Mem, a
	// shared frame buffer the transaction holds a reference to, until it
	// is sent (falcon's Pull Data over a RefLink).
	Shared []byte
	Mem    *framebuf.Buf
}

// Target is the target's transaction table over the peer's RSN space:
// RSNs in [Base, Base+Cap) may be held; NextDeliver is the next RSN an
// ordered connection hands to the ULP.
type Target struct {
	Base, NextDeliver wire.RSN
	mask              uint32
	slots             []TTxn
}

// Init sets the peer's initial RSN and the table size (power of two ≥ 2).
func (t *Target) Init(rsn wire.RSN, size uint32) {
	n := uint32(2)
	for n < size {
		n <<= 1
	}
	t.Base, t.NextDeliver, t.mask = rsn, rsn, n-1
	if uint32(len(t.slots)) != n {
		t.slots = make([]TTxn, n)
	}
}

// Cap returns the table size.
func (t *Target) Cap() uint32 { return t.mask + 1 }

// Fits reports whether rsn can be held now; old reports rsn < Base.
func (t *Target) Fits(rsn wire.RSN) (fits, old bool) {
	d := rsn.Sub(t.Base)
	return d >= 0 && uint32(d) <= t.mask, d < 0
}

// Slot returns rsn's slot; the caller checks Fits.
func (t *Target) Slot(rsn wire.RSN) *TTxn { return &t.slots[uint32(rsn)&t.mask] }

// Claim resets rsn's free slot for a new request, keeping its buffer.
func (t *Target) Claim(rsn wire.RSN, k Kind) *TTxn {
	s := &t.slots[uint32(rsn)&t.mask]
	p, f := s.Payload[:0], s.Frame[:0] // as in Initiator.Add
	*s = TTxn{State: TReceived, Kind: k}
	s.Payload, s.Frame = p, f
	return s
}

// Advance frees finished slots at the base and returns how many.
func (t *Target) Advance() int {
	n := 0
	for {
		s := &t.slots[uint32(t.Base)&t.mask]
		if s.State != TFinished {
			break
		}
		s.State = TFree
		t.Base = t.Base.Add(1)
		n++
	}
	if t.NextDeliver.Less(t.Base) {
		t.NextDeliver = t.Base
	}
	return n
}
