package vhostuser

import (
	"encoding/binary"
	"errors"
	"sort"

	"golang.org/x/sys/unix"
)

// Inflight shared-memory layout (INFLIGHT_SHMFD, split rings), the one
// QEMU's libvhost-user uses (docs/interop/vhost-user.rst, "Inflight I/O
// tracking"):
//
//	per queue, stride align64(16*queue_size + 16):
//	  u64 features; u16 version (=1); u16 desc_num; u16 last_batch_head; u16 used_idx;
//	  desc[queue_size] { u8 inflight; u8 pad[5]; u16 next; u64 counter }
const (
	inflightHeader  = 16
	inflightDesc    = 16
	inflightVersion = 1
)

// ErrBadInflight rejects inflight requests with impossible sizes.
var ErrBadInflight = errors.New("vhostuser: bad inflight request")

// InflightQueueStride returns the per-queue size of the inflight region.
func InflightQueueStride(queueSize int) int {
	return (inflightDesc*queueSize + inflightHeader + 63) &^ 63
}

// inflightRegion is the mapped region QEMU handed us with SET_INFLIGHT_FD.
type inflightRegion struct {
	mem       []byte
	numQueues int
	queueSize int
}

func (r *inflightRegion) unmap() {
	if r != nil && r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

// queue returns the view of queue i, or nil if i or size do not fit.
func (r *inflightRegion) queue(i, size int) *inflightQueue {
	if r == nil || r.mem == nil || i >= r.numQueues || size > r.queueSize {
		return nil
	}
	stride := InflightQueueStride(r.queueSize)
	if (i+1)*stride > len(r.mem) {
		return nil
	}
	return &inflightQueue{b: r.mem[i*stride : (i+1)*stride], size: size}
}

// allocInflight creates a zeroed memfd for numQueues queues of queueSize.
func allocInflight(numQueues, queueSize int) (fd int, size uint64, err error) {
	if numQueues <= 0 || numQueues > 1024 || queueSize <= 0 || queueSize > MaxQueueSize {
		return -1, 0, ErrBadInflight
	}
	size = uint64(numQueues * InflightQueueStride(queueSize))
	fd, err = unix.MemfdCreate("vhost-inflight", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, 0, err
	}
	if err = unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, size, nil
}

// mapInflight maps the region of a SET_INFLIGHT_FD message.
func mapInflight(fd int, m InflightMsg) (*inflightRegion, error) {
	nq, qs := int(m.NumQueues()), int(m.QueueSize())
	if nq == 0 || qs == 0 || qs > MaxQueueSize || m.MmapSize() < uint64(nq*InflightQueueStride(qs)) || m.MmapSize() > 1<<30 {
		return nil, ErrBadInflight
	}
	if m.MmapOffset()%uint64(unix.Getpagesize()) != 0 {
		return nil, ErrBadInflight
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || m.MmapOffset()+m.MmapSize() > uint64(st.Size) {
		return nil, ErrBadInflight
	}
	mem, err := unix.Mmap(fd, int64(m.MmapOffset()), int(m.MmapSize()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, ErrBadInflight
	}
	return &inflightRegion{mem: mem, numQueues: nq, queueSize: qs}, nil
}

// inflightQueue is one queue's slice of the region.
type inflightQueue struct {
	b       []byte
	size    int
	counter uint64
}

func (f *inflightQueue) desc(i uint16) []byte {
	o := inflightHeader + inflightDesc*int(i)
	return f.b[o : o+inflightDesc]
}

// recover prepares the queue at start: it initialises a fresh region, or
// returns the heads that were popped but never completed, oldest first.
func (f *inflightQueue) recover(features uint64, usedIdx uint16) []uint16 {
	le := binary.LittleEndian
	if le.Uint16(f.b[8:]) != inflightVersion || int(le.Uint16(f.b[10:])) != f.size {
		clear(f.b)
		le.PutUint64(f.b[0:], features)
		le.PutUint16(f.b[8:], inflightVersion)
		le.PutUint16(f.b[10:], uint16(f.size))
		le.PutUint16(f.b[14:], usedIdx)
		return nil
	}
	// A crash between publishing used idx and clearing the descriptor
	// leaves last_batch_head marked: it did complete.
	if le.Uint16(f.b[14:]) != usedIdx {
		if h := le.Uint16(f.b[12:]); int(h) < f.size {
			f.desc(h)[0] = 0
		}
		le.PutUint16(f.b[14:], usedIdx)
	}
	type ent struct {
		head uint16
		ctr  uint64
	}
	var ents []ent
	for i := 0; i < f.size; i++ {
		d := f.desc(uint16(i))
		if d[0] == 1 {
			ents = append(ents, ent{uint16(i), le.Uint64(d[8:])})
		}
	}
	sort.Slice(ents, func(a, b int) bool { return ents[a].ctr < ents[b].ctr })
	heads := make([]uint16, len(ents))
	for i, e := range ents {
		heads[i] = e.head
		if e.ctr > f.counter {
			f.counter = e.ctr
		}
	}
	return heads
}

func (f *inflightQueue) popped(head uint16) {
	f.counter++
	d := f.desc(head)
	binary.LittleEndian.PutUint64(d[8:], f.counter)
	d[0] = 1
}

func (f *inflightQueue) prePush(head uint16) {
	binary.LittleEndian.PutUint16(f.b[12:], head)
}

func (f *inflightQueue) pushed(head, usedIdx uint16) {
	f.desc(head)[0] = 0
	binary.LittleEndian.PutUint16(f.b[14:], usedIdx)
}
