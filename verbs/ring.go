package verbs

import "errors"

// Ring is a shared rxe_queue_buf in guest memory: a 384-byte header
// (log2_elem_size, index_mask, producer_index @128, consumer_index @256)
// then slots elements of 1<<log2 bytes. The NIC trusts only its own slot
// count and element size (from the create request), never the header's.
// librxe keeps both indices masked (0..slots-1) and so does the NIC when it
// writes one; the NIC compares indices modulo the slot count, so a peer
// that lets them run free works too. The ring is full when
// ((producer+1)&mask) == (consumer&mask), as librxe computes it.
type Ring struct {
	reg   region
	slots uint32
	log2  uint32
	idx   [4]byte // scratch: Memory takes a slice, which would escape
}

// RingSpec describes a ring in a create request (struct falconnic_ring).
type RingSpec struct {
	PBL       PBL
	Slots     uint32
	Log2Elem  uint32
	MaxSGE    uint32
	MaxInline uint32
}

// Ring errors.
var (
	ErrRingSlots = errors.New("verbs: ring slot count is not a power of two in range")
	ErrRingElem  = errors.New("verbs: ring element size out of range")
)

// MaxRingSlots bounds a ring.
const MaxRingSlots = 1 << 16

// NewRing loads a ring's page list and checks it covers the ring.
func NewRing(mem Memory, s RingSpec, minElem int) (*Ring, error) {
	if s.Slots < 2 || s.Slots > MaxRingSlots || s.Slots&(s.Slots-1) != 0 {
		return nil, ErrRingSlots
	}
	if s.Log2Elem > 13 || 1<<s.Log2Elem < minElem {
		return nil, ErrRingElem
	}
	pages, err := LoadPBL(mem, s.PBL)
	if err != nil {
		return nil, err
	}
	reg, err := newRegion(pages, 0, RingHdrSize+uint64(s.Slots)<<s.Log2Elem)
	if err != nil {
		return nil, err
	}
	return &Ring{reg: reg, slots: s.Slots, log2: s.Log2Elem}, nil
}

// Slots returns the slot count.
func (r *Ring) Slots() uint32 { return r.slots }

// ElemSize returns the element size in bytes.
func (r *Ring) ElemSize() int { return 1 << r.log2 }

func (r *Ring) index(mem Memory, off uint64) (uint32, error) {
	if err := r.reg.read(mem, off, r.idx[:]); err != nil {
		return 0, err
	}
	return le.Uint32(r.idx[:]), nil
}

func (r *Ring) setIndex(mem Memory, off uint64, v uint32) error {
	le.PutUint32(r.idx[:], v)
	return r.reg.write(mem, off, r.idx[:])
}

// Producer reads producer_index.
func (r *Ring) Producer(mem Memory) (uint32, error) { return r.index(mem, ringProducerOff) }

// Consumer reads consumer_index.
func (r *Ring) Consumer(mem Memory) (uint32, error) { return r.index(mem, ringConsumerOff) }

// SetProducer writes producer_index (masked).
func (r *Ring) SetProducer(mem Memory, v uint32) error {
	return r.setIndex(mem, ringProducerOff, v&(r.slots-1))
}

// SetConsumer writes consumer_index (masked).
func (r *Ring) SetConsumer(mem Memory, v uint32) error {
	return r.setIndex(mem, ringConsumerOff, v&(r.slots-1))
}

// Pending returns how many elements lie between the index from and the
// producer index prod, modulo the slot count.
func (r *Ring) Pending(prod, from uint32) uint32 { return (prod - from) & (r.slots - 1) }

func (r *Ring) slotOff(i uint32) uint64 {
	return RingHdrSize + uint64(i&(r.slots-1))<<r.log2
}

// ReadSlot copies element i (masked) into b (len(b) ≤ element size).
func (r *Ring) ReadSlot(mem Memory, i uint32, b []byte) error {
	if len(b) > r.ElemSize() {
		return ErrBounds
	}
	return r.reg.read(mem, r.slotOff(i), b)
}

// WriteSlot copies b into element i (masked).
func (r *Ring) WriteSlot(mem Memory, i uint32, b []byte) error {
	if len(b) > r.ElemSize() {
		return ErrBounds
	}
	return r.reg.write(mem, r.slotOff(i), b)
}

// InitHeader writes log2_elem_size and index_mask (a guest does this; the
// test peer uses it to build rings).
func (r *Ring) InitHeader(mem Memory) error {
	var b [8]byte
	le.PutUint32(b[0:], r.log2)
	le.PutUint32(b[4:], r.slots-1)
	return r.reg.write(mem, 0, b[:])
}
