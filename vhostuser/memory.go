package vhostuser

import (
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Guest-memory errors.
var (
	ErrBadGPA         = errors.New("vhostuser: guest address outside the memory table")
	ErrCrossesRegion  = errors.New("vhostuser: guest range crosses a region end")
	ErrBadRegion      = errors.New("vhostuser: malformed memory region")
	ErrRegionOverlap  = errors.New("vhostuser: memory regions overlap")
	ErrTooManyRegions = errors.New("vhostuser: too many memory regions")
	ErrNoRegion       = errors.New("vhostuser: no such memory region")
)

// MaxMemSlots is our GET_MAX_MEM_SLOTS answer (CONFIGURE_MEM_SLOTS).
const MaxMemSlots = 32

// maxRegionSize caps one region (1 TiB): larger sizes are hostile.
const maxRegionSize = 1 << 40

// mapping is one mmap of a region's fd, shared by every table that lists the region.
type mapping struct {
	whole []byte // what mmap returned
	refs  atomic.Int32
}

func (m *mapping) release() {
	if m.refs.Add(-1) == 0 {
		unix.Munmap(m.whole)
	}
}

// Region is one guest memory region mapped into our address space.
type Region struct {
	GPA, Size, UVA, MmapOffset uint64
	Data                       []byte // len == Size
	m                          *mapping
	// dups counts extra ADD_MEM_REGs of this same region: with several
	// queue pairs QEMU 7.2 adds every region once per vhost_dev on the one
	// connection. Only the control goroutine touches it.
	dups int
}

// same reports whether r describes the same guest range as o.
func (r *Region) same(gpa, size, uva, off uint64) bool {
	return r.GPA == gpa && r.Size == size && r.UVA == uva && r.MmapOffset == off
}

// MapRegion mmaps size bytes of fd at off (shared, read-write). It does not close fd.
func MapRegion(fd int, gpa, size, uva, off uint64) (*Region, error) {
	if size == 0 || size > maxRegionSize || gpa+size < gpa || uva+size < uva || off+size < off {
		return nil, ErrBadRegion
	}
	// A region past the end of its file would SIGBUS on access.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: fstat: %v", ErrBadRegion, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && off+size > uint64(st.Size) {
		return nil, fmt.Errorf("%w: %#x bytes at %#x beyond the file's %#x", ErrBadRegion, size, off, st.Size)
	}
	page := uint64(unix.Getpagesize())
	delta := off % page
	whole, err := unix.Mmap(fd, int64(off-delta), int(size+delta), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%w: mmap: %v", ErrBadRegion, err)
	}
	m := &mapping{whole: whole}
	m.refs.Store(1)
	return &Region{GPA: gpa, Size: size, UVA: uva, MmapOffset: off, Data: whole[delta : delta+size : delta+size], m: m}, nil
}

// MemTable is an immutable guest memory table. Queue workers hold a
// reference while they touch guest memory; the last Release unmaps regions
// that no newer table shares.
type MemTable struct {
	regions []*Region // sorted by GPA
	refs    atomic.Int32
	onFree  func() // called after the last reference is gone
}

// NewMemTable builds a table that takes over the regions' mappings (one
// reference each). It rejects overlapping GPA ranges; on error the caller
// still owns the regions.
func NewMemTable(regions []*Region) (*MemTable, error) {
	rs := append([]*Region(nil), regions...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].GPA < rs[j].GPA })
	for i := 1; i < len(rs); i++ {
		if rs[i].GPA < rs[i-1].GPA+rs[i-1].Size {
			return nil, ErrRegionOverlap
		}
	}
	t := &MemTable{regions: rs}
	t.refs.Store(1)
	return t, nil
}

// Regions returns the regions sorted by GPA (do not modify).
func (t *MemTable) Regions() []*Region { return t.regions }

// TryAcquire takes a reference unless the table is already released.
func (t *MemTable) TryAcquire() bool {
	for {
		n := t.refs.Load()
		if n <= 0 {
			return false
		}
		if t.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference; the last one unmaps regions no other table holds.
func (t *MemTable) Release() {
	if t.refs.Add(-1) == 0 {
		for _, r := range t.regions {
			r.m.release()
		}
		if t.onFree != nil {
			t.onFree()
		}
	}
}

// With returns a new table with r added (r's mapping reference moves to it).
func (t *MemTable) With(r *Region) (*MemTable, error) {
	var rs []*Region
	if t != nil {
		if len(t.regions) >= MaxMemSlots {
			return nil, ErrTooManyRegions
		}
		rs = append(rs, t.regions...)
	}
	nt, err := NewMemTable(append(rs, r))
	if err != nil {
		return nil, err
	}
	for _, old := range rs {
		old.m.refs.Add(1)
	}
	return nt, nil
}

// Without returns a new table without the region at gpa with size.
func (t *MemTable) Without(gpa, size uint64) (*MemTable, error) {
	if t == nil {
		return nil, ErrNoRegion
	}
	var rs []*Region
	found := false
	for _, r := range t.regions {
		if !found && r.GPA == gpa && r.Size == size {
			found = true
			continue
		}
		rs = append(rs, r)
	}
	if !found {
		return nil, ErrNoRegion
	}
	for _, r := range rs {
		r.m.refs.Add(1)
	}
	nt, _ := NewMemTable(rs)
	return nt, nil
}

// Translate returns the n bytes at guest-physical gpa. The range must lie
// inside one region.
func (t *MemTable) Translate(gpa, n uint64) ([]byte, error) {
	for _, r := range t.regions {
		if gpa >= r.GPA && gpa-r.GPA < r.Size {
			off := gpa - r.GPA
			if n > r.Size-off {
				return nil, ErrCrossesRegion
			}
			return r.Data[off : off+n : off+n], nil
		}
	}
	return nil, ErrBadGPA
}

// TranslateUVA returns the n bytes at front-end virtual address uva (ring addresses).
func (t *MemTable) TranslateUVA(uva, n uint64) ([]byte, error) {
	for _, r := range t.regions {
		if uva >= r.UVA && uva-r.UVA < r.Size {
			off := uva - r.UVA
			if n > r.Size-off {
				return nil, ErrCrossesRegion
			}
			return r.Data[off : off+n : off+n], nil
		}
	}
	return nil, ErrBadGPA
}
