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

// word returns the aligned 32-bit word at gpa in guest RAM, with the table
// reference to release; the failure is counted.
func (m *rdmaMem) word(gpa uint64) (*uint32, *vhostuser.MemTable, error) {
	if gpa%4 != 0 {
		m.stats.DMABadGPA.Inc()
		return nil, nil, verbs.ErrBadGPA
	}
	t := m.acquire()
	if t == nil {
		m.stats.DMANoMemory.Inc()
		return nil, nil, verbs.ErrNoMemory
	}
	h, err := t.Translate(gpa, 4)
	if err != nil || len(h) < 4 {
		t.Release()
		m.stats.DMABadGPA.Inc()
		return nil, nil, verbs.ErrBadGPA
	}
	return (*uint32)(unsafe.Pointer(&h[0])), t, nil
}

// CompareAndSwap32 is an atomic compare-and-swap of the aligned 32-bit word
// at gpa in guest RAM (the CQ arm word the guest's vCPUs update
// concurrently: verbs.CQArmWordOff).
func (m *rdmaMem) CompareAndSwap32(gpa uint64, old, new uint32) (bool, error) {
	w, t, err := m.word(gpa)
	if err != nil {
		return false, err
	}
	defer t.Release()
	return atomic.CompareAndSwapUint32(w, old, new), nil
}

// Swap32 atomically stores new in the aligned 32-bit word at gpa and
// returns the old value: a full barrier (XCHG on amd64), as an SQ's polling
// flag needs before the producer index is read again (verbs.SQPollFlagOff).
func (m *rdmaMem) Swap32(gpa uint64, new uint32) (uint32, error) {
	w, t, err := m.word(gpa)
	if err != nil {
		return 0, err
	}
	defer t.Release()
	return atomic.SwapUint32(w, new), nil
}

// Load32 atomically reads the aligned 32-bit word at gpa (a producer index
// the guest stores concurrently).
func (m *rdmaMem) Load32(gpa uint64) (uint32, error) {
	w, t, err := m.word(gpa)
	if err != nil {
		return 0, err
	}
	defer t.Release()
	return atomic.LoadUint32(w), nil
}
