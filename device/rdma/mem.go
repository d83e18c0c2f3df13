package rdma

import (
	"sync/atomic"
	"unsafe"

	"falconnic/verbs"
	"falconnic/vhostuser"
)

// rdmaMem is the RDMA function's DMA engine over one guest's memory: every
// access is translated through the vhost-user memory table and must lie
// inside guest RAM (it may span adjacent regions); otherwise it fails and
// touches nothing. It implements verbs.Memory.
type rdmaMem struct {
	t     atomic.Pointer[vhostuser.MemTable]
	stats *Counters
}

var _ verbs.AtomicMemory = (*rdmaMem)(nil)

// set installs the current memory table (nil: the guest is gone).
func (m *rdmaMem) set(t *vhostuser.MemTable) { m.t.Store(t) }

// acquire takes a reference on the current table so it cannot be unmapped
// while the access runs.
func (m *rdmaMem) acquire() *vhostuser.MemTable {
	t := m.t.Load()
	if t == nil || !t.TryAcquire() {
		return nil
	}
	return t
}

// span calls fn on each region-contiguous piece of [gpa, gpa+n).
func span(t *vhostuser.MemTable, gpa, n uint64, fn func(host []byte, lo, hi int)) bool {
	if gpa+n < gpa {
		return false
	}
	// First check the whole range, then copy: a failed access touches
	// nothing.
	for pass := 0; pass < 2; pass++ {
		a, done := gpa, uint64(0)
		for done < n {
			var r *vhostuser.Region
			for _, x := range t.Regions() {
				if a >= x.GPA && a-x.GPA < x.Size {
					r = x
					break
				}
			}
			if r == nil {
				return false
			}
			c := min(n-done, r.Size-(a-r.GPA))
			if pass == 1 {
				off := a - r.GPA
				fn(r.Data[off:off+c], int(done), int(done+c))
			}
			a += c
			done += c
		}
	}
	return true
}

// Check reports whether [gpa, gpa+n) is guest RAM.
func (m *rdmaMem) Check(gpa, n uint64) bool {
	t := m.acquire()
	if t == nil {
		return false
	}
	defer t.Release()
	return span(t, gpa, n, func([]byte, int, int) {})
}

// Read copies guest memory at gpa into b.
func (m *rdmaMem) Read(gpa uint64, b []byte) error {
	t := m.acquire()
	if t == nil {
		m.stats.DMANoMemory.Inc()
		return verbs.ErrNoMemory
	}
	defer t.Release()
	if !span(t, gpa, uint64(len(b)), func(h []byte, lo, hi int) { copy(b[lo:hi], h) }) {
		m.stats.DMABadGPA.Inc()
		return verbs.ErrBadGPA
	}
	m.stats.DMAReadBytes.Add(uint64(len(b)))
	return nil
}

// Write copies b to guest memory at gpa.
func (m *rdmaMem) Write(gpa uint64, b []byte) error {
	t := m.acquire()
	if t == nil {
		m.stats.DMANoMemory.Inc()
		return verbs.ErrNoMemory
	}
	defer t.Release()
	if !span(t, gpa, uint64(len(b)), func(h []byte, lo, hi int) { copy(h, b[lo:hi]) }) {
		m.stats.DMABadGPA.Inc()
		return verbs.ErrBadGPA
	}
	m.stats.DMAWriteBytes.Add(uint64(len(b)))
	return nil
}

// CompareAndSwap32 is an atomic compare-and-swap of the aligned 32-bit word
// at gpa in guest RAM (the CQ arm word the guest's vCPUs update
// concurrently: verbs.CQArmWordOff).
func (m *rdmaMem) CompareAndSwap32(gpa uint64, old, new uint32) (bool, error) {
	if gpa%4 != 0 {
		m.stats.DMABadGPA.Inc()
		return false, verbs.ErrBadGPA
	}
	t := m.acquire()
	if t == nil {
		m.stats.DMANoMemory.Inc()
		return false, verbs.ErrNoMemory
	}
	defer t.Release()
	h, err := t.Translate(gpa, 4)
	if err != nil || len(h) < 4 {
		m.stats.DMABadGPA.Inc()
		return false, verbs.ErrBadGPA
	}
	return atomic.CompareAndSwapUint32((*uint32)(unsafe.Pointer(&h[0])), old, new), nil
}
