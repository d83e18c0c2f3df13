package vhostusertest

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Split-ring flags (virtio 1.2 §2.7.5).
const (
	DescNext     = 1
	DescWrite    = 2
	DescIndirect = 4
)

// Seg is one buffer of a chain the driver posts.
type Seg struct {
	GPA   uint64
	Len   uint32
	Write bool
}

// DriverQueue is the guest driver's side of one split virtqueue in
// simulated guest RAM: it posts chains, kicks, and reads the used ring.
// One goroutine uses it at a time.
type DriverQueue struct {
	g                          *GuestMemory
	Index                      int
	Size                       uint16
	DescGPA, AvailGPA, UsedGPA uint64
	desc, avail, used          []byte
	free                       []uint16
	chain                      [][]uint16 // descriptors of each outstanding head
	availIdx, lastUsed         uint16
	KickFD, CallFD             int
	// BufGPA is a per-descriptor buffer area: descriptor i owns
	// [BufGPA+i*BufSize, +BufSize).
	BufGPA  uint64
	BufSize uint32
	indGPA  uint64
	// UseIndirect posts multi-buffer chains through an indirect table.
	UseIndirect bool
	// EventIdx makes PublishKick honour avail_event (VIRTIO_F_EVENT_IDX),
	// as a Linux driver does.
	EventIdx  bool
	scratch   []uint16
	published uint16
}

// NewDriverQueue lays out a ring of size entries in region ri of g, with a
// BufSize buffer per descriptor, and creates its kick and call eventfds.
func NewDriverQueue(g *GuestMemory, index int, size uint16, ri int, bufSize uint32) (*DriverQueue, error) {
	q := &DriverQueue{g: g, Index: index, Size: size, BufSize: bufSize}
	n := uint64(size)
	q.DescGPA = g.Alloc(ri, 16*n, 16)
	q.AvailGPA = g.Alloc(ri, 6+2*n, 2)
	q.UsedGPA = g.Alloc(ri, 6+8*n, 4)
	q.BufGPA = g.Alloc(ri, n*uint64(bufSize), 64)
	q.indGPA = g.Alloc(ri, n*16*16, 16)
	q.desc = g.Bytes(q.DescGPA, 16*n)
	q.avail = g.Bytes(q.AvailGPA, 6+2*n)
	q.used = g.Bytes(q.UsedGPA, 6+8*n)
	q.chain = make([][]uint16, size)
	for i := int(size) - 1; i >= 0; i-- {
		q.free = append(q.free, uint16(i))
	}
	var err error
	if q.KickFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, err
	}
	if q.CallFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, err
	}
	return q, nil
}

// Close closes the eventfds.
func (q *DriverQueue) Close() {
	unix.Close(q.KickFD)
	unix.Close(q.CallFD)
}

// Buf returns the buffer area of descriptor i.
func (q *DriverQueue) Buf(i uint16) []byte {
	return q.g.Bytes(q.BufGPA+uint64(i)*uint64(q.BufSize), uint64(q.BufSize))
}

// BufGPAOf returns the GPA of descriptor i's buffer area.
func (q *DriverQueue) BufGPAOf(i uint16) uint64 { return q.BufGPA + uint64(i)*uint64(q.BufSize) }

// Free returns the number of free descriptors.
func (q *DriverQueue) Free() int { return len(q.free) }

// ErrRingFull means there are not enough free descriptors.
var ErrRingFull = errors.New("vhostusertest: ring full")

// RawDesc writes descriptor i directly (for malformed-chain tests).
func (q *DriverQueue) RawDesc(i uint16, gpa uint64, n uint32, flags, next uint16) {
	d := q.desc[16*int(i):]
	binary.LittleEndian.PutUint64(d[0:], gpa)
	binary.LittleEndian.PutUint32(d[8:], n)
	binary.LittleEndian.PutUint16(d[12:], flags)
	binary.LittleEndian.PutUint16(d[14:], next)
}

// RawAvail appends head to the avail ring without bookkeeping (malformed tests).
func (q *DriverQueue) RawAvail(head uint16) {
	binary.LittleEndian.PutUint16(q.avail[4+2*int(q.availIdx%q.Size):], head)
	q.availIdx++
}

// Add posts a chain. With UseIndirect and more than one segment the chain
// goes through one indirect descriptor. It returns the head; Publish makes
// it visible.
func (q *DriverQueue) Add(segs []Seg) (uint16, error) {
	if len(segs) == 0 {
		return 0, errors.New("vhostusertest: empty chain")
	}
	if q.UseIndirect && len(segs) > 1 && len(segs) <= 16 {
		if len(q.free) < 1 {
			return 0, ErrRingFull
		}
		head := q.take()
		tgpa := q.indGPA + uint64(head)*16*16
		t := q.g.Bytes(tgpa, uint64(16*len(segs)))
		for i, s := range segs {
			var fl uint16
			if s.Write {
				fl |= DescWrite
			}
			if i+1 < len(segs) {
				fl |= DescNext
			}
			d := t[16*i:]
			binary.LittleEndian.PutUint64(d[0:], s.GPA)
			binary.LittleEndian.PutUint32(d[8:], s.Len)
			binary.LittleEndian.PutUint16(d[12:], fl)
			binary.LittleEndian.PutUint16(d[14:], uint16(i+1))
		}
		q.RawDesc(head, tgpa, uint32(16*len(segs)), DescIndirect, 0)
		q.chain[head] = append(q.chain[head][:0], head)
		q.RawAvail(head)
		return head, nil
	}
	if len(q.free) < len(segs) {
		return 0, ErrRingFull
	}
	ids := q.scratch[:0]
	for range segs {
		ids = append(ids, q.take())
	}
	q.scratch = ids
	for i, s := range segs {
		var fl uint16
		var next uint16
		if s.Write {
			fl |= DescWrite
		}
		if i+1 < len(segs) {
			fl |= DescNext
			next = ids[i+1]
		}
		q.RawDesc(ids[i], s.GPA, s.Len, fl, next)
	}
	q.chain[ids[0]] = append(q.chain[ids[0]][:0], ids...)
	q.RawAvail(ids[0])
	return ids[0], nil
}

func (q *DriverQueue) take() uint16 {
	i := q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	return i
}

// Peek returns the head descriptor index the next Add would use (single-buffer chains).
func (q *DriverQueue) Peek() (uint16, bool) {
	if len(q.free) == 0 {
		return 0, false
	}
	return q.free[len(q.free)-1], true
}

// Publish makes posted chains visible: one atomic store of {flags, idx}.
func (q *DriverQueue) Publish() {
	w := (*uint32)(unsafe.Pointer(&q.avail[0]))
	flags := atomic.LoadUint32(w) & 0xffff
	atomic.StoreUint32(w, flags|uint32(q.availIdx)<<16)
}

// PublishKick publishes posted chains and kicks if the device asked for it:
// with EventIdx only when avail idx passed avail_event (vring_need_event),
// otherwise always. It reports whether it kicked.
func (q *DriverQueue) PublishKick() bool {
	old := q.published
	q.Publish()
	q.published = q.availIdx
	if q.EventIdx {
		ev := q.AvailEvent()
		if uint16(q.availIdx-ev-1) >= uint16(q.availIdx-old) {
			return false
		}
	}
	q.Kick()
	return true
}

// EnableCallback asks for an interrupt at the next used element
// (EVENT_IDX: used_event = the driver's last seen used idx), as Linux's
// virtqueue_enable_cb does before sleeping.
func (q *DriverQueue) EnableCallback() { q.SetUsedEvent(q.lastUsed) }

// SetNoInterrupt sets or clears VIRTQ_AVAIL_F_NO_INTERRUPT.
func (q *DriverQueue) SetNoInterrupt(on bool) {
	w := (*uint32)(unsafe.Pointer(&q.avail[0]))
	v := uint32(q.availIdx) << 16
	if on {
		v |= 1
	}
	atomic.StoreUint32(w, v)
}

// SetUsedEvent writes used_event (EVENT_IDX).
func (q *DriverQueue) SetUsedEvent(v uint16) { store16(q.avail, 4+2*int(q.Size), v) }

// AvailEvent reads avail_event (EVENT_IDX).
func (q *DriverQueue) AvailEvent() uint16 { return load16(q.used, 4+8*int(q.Size)) }

// UsedIdx reads the device's used idx.
func (q *DriverQueue) UsedIdx() uint16 { return load16(q.used, 2) }

// Kick signals the kick eventfd.
func (q *DriverQueue) Kick() {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], 1)
	unix.Write(q.KickFD, b[:])
}

// Calls reads and clears the call eventfd counter (0 if none).
func (q *DriverQueue) Calls() uint64 {
	var b [8]byte
	if n, err := unix.Read(q.CallFD, b[:]); err != nil || n != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

// Used is one used-ring element.
type Used struct {
	ID  uint16
	Len uint32
}

// PopUsed returns the next used element and frees its descriptors.
func (q *DriverQueue) PopUsed() (Used, bool) {
	if load16(q.used, 2) == q.lastUsed {
		return Used{}, false
	}
	e := q.used[4+8*int(q.lastUsed%q.Size):]
	u := Used{ID: uint16(binary.LittleEndian.Uint32(e[0:])), Len: binary.LittleEndian.Uint32(e[4:])}
	q.lastUsed++
	if int(u.ID) < len(q.chain) {
		for _, d := range q.chain[u.ID] {
			q.free = append(q.free, d)
		}
		q.chain[u.ID] = q.chain[u.ID][:0]
	}
	return u, true
}

// WaitUsed waits until the device has used at least n more elements than
// the driver has read, or the failsafe timeout passes (tests assert on the
// result, not on timing).
func (q *DriverQueue) WaitUsed(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for int(uint16(load16(q.used, 2)-q.lastUsed)) < n {
		if time.Now().After(deadline) {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(q.CallFD), Events: unix.POLLIN}}
		unix.Poll(fds, 5)
		q.Calls()
	}
	return true
}

func load16(b []byte, off int) uint16 {
	p := unsafe.Pointer(&b[off])
	if uintptr(p)&3 == 0 {
		return uint16(atomic.LoadUint32((*uint32)(p)))
	}
	return uint16(atomic.LoadUint32((*uint32)(unsafe.Add(p, -2))) >> 16)
}

func store16(b []byte, off int, v uint16) {
	p := unsafe.Pointer(&b[off])
	shift := 0
	if uintptr(p)&3 != 0 {
		p = unsafe.Add(p, -2)
		shift = 16
	}
	w := (*uint32)(p)
	for {
		old := atomic.LoadUint32(w)
		if atomic.CompareAndSwapUint32(w, old, old&^(0xffff<<shift)|uint32(v)<<shift) {
			return
		}
	}
}
