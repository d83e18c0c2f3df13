package verbs

import (
	"encoding/binary"
	"errors"
)

// Memory is the DMA engine's view of one guest's RAM: guest-physical
// addresses, bounds checked by the implementation. A read or write that is
// not entirely inside guest RAM fails and touches nothing. device
// implements it over the vhost-user memory table; tests use FlatMemory.
type Memory interface {
	// Read copies len(b) bytes at gpa into b.
	Read(gpa uint64, b []byte) error
	// Write copies b to gpa.
	Write(gpa uint64, b []byte) error
	// Check reports whether [gpa, gpa+n) is guest RAM.
	Check(gpa, n uint64) bool
}

// AtomicMemory is a Memory whose 32-bit words the guest may update
// concurrently with the NIC (the CQ arm word, an SQ's polling flag and
// producer index): each method is a sequentially consistent atomic access
// to the aligned word at gpa (a full barrier on both sides of the swaps).
// device implements it over the shared guest RAM; without it the engine
// reads and writes the CQ arm word and does not poll doorbells.
type AtomicMemory interface {
	CompareAndSwap32(gpa uint64, old, new uint32) (bool, error)
	// Swap32 stores new and returns the word it replaced.
	Swap32(gpa uint64, new uint32) (uint32, error)
	// Load32 reads the word.
	Load32(gpa uint64) (uint32, error)
}

// PageShift is the page size of page lists (FALCONNIC_PAGE_SHIFT).
const PageShift = 12

// PageSize is 1 << PageShift.
const PageSize = 1 << PageShift

// pblEntries is the number of GPAs per 4 KiB page-list page.
const pblEntries = PageSize / 8

// Errors of memory access and translation (they become completion statuses
// or control-channel statuses, never panics).
var (
	ErrBadGPA    = errors.New("verbs: guest-physical address outside guest RAM or unaligned")
	ErrBounds    = errors.New("verbs: access outside the region")
	ErrBadPBL    = errors.New("verbs: malformed page list")
	ErrTooLarge  = errors.New("verbs: page list too large")
	ErrNoMemory  = errors.New("verbs: no guest memory attached")
	errShortCopy = errors.New("verbs: short copy")
)

// MaxPages bounds one page list (two levels of 512 entries).
const MaxPages = pblEntries * pblEntries

// PBL describes a page list held in guest memory (struct falconnic_pbl).
type PBL struct {
	Root   uint64
	NPages uint32
	Levels uint8
	Shift  uint8
}

// LoadPBL reads and validates a page list: every listed page is page
// aligned and inside guest RAM. The result is the NIC's own copy (its MTT).
func LoadPBL(mem Memory, p PBL) ([]uint64, error) {
	return loadPBLInto(mem, p, nil, new(pblScratch))
}

// pblScratch holds the page-list pages being read: a directory and a leaf.
type pblScratch struct{ dir, leaf [PageSize]byte }

// loadPBLInto is LoadPBL appending to dst[:0] with the caller's scratch: a
// fast registration reuses its MR's page array and the engine's scratch,
// so a registration per I/O allocates nothing.
func loadPBLInto(mem Memory, p PBL, dst []uint64, sc *pblScratch) ([]uint64, error) {
	if mem == nil {
		return nil, ErrNoMemory
	}
	if p.Shift != PageShift || p.NPages == 0 {
		return nil, ErrBadPBL
	}
	if p.NPages > MaxPages || (p.Levels == 1 && p.NPages > pblEntries) {
		return nil, ErrTooLarge
	}
	if p.Root%PageSize != 0 || !mem.Check(p.Root, PageSize) {
		return nil, ErrBadGPA
	}
	pages := dst[:0]
	if uint32(cap(pages)) < p.NPages {
		pages = make([]uint64, 0, p.NPages)
	}
	var err error
	switch p.Levels {
	case 1:
		if pages, err = readPBLLeaf(mem, p.Root, int(p.NPages), sc.leaf[:], pages); err != nil {
			return nil, err
		}
	case 2:
		ndir := (int(p.NPages) + pblEntries - 1) / pblEntries
		if err := mem.Read(p.Root, sc.dir[:ndir*8]); err != nil {
			return nil, ErrBadGPA
		}
		left := int(p.NPages)
		for i := range ndir {
			n := min(left, pblEntries)
			leaf := binary.LittleEndian.Uint64(sc.dir[i*8:])
			if pages, err = readPBLLeaf(mem, leaf, n, sc.leaf[:], pages); err != nil {
				return nil, err
			}
			left -= n
		}
	default:
		return nil, ErrBadPBL
	}
	return pages, nil
}

// readPBLLeaf appends the n page GPAs of the PBL page at gpa to pages,
// each checked: page aligned and inside guest RAM.
func readPBLLeaf(mem Memory, gpa uint64, n int, buf []byte, pages []uint64) ([]uint64, error) {
	if gpa%PageSize != 0 || !mem.Check(gpa, PageSize) {
		return pages, ErrBadGPA
	}
	if err := mem.Read(gpa, buf[:n*8]); err != nil {
		return pages, ErrBadGPA
	}
	for i := range n {
		pg := binary.LittleEndian.Uint64(buf[i*8:])
		if pg%PageSize != 0 || !mem.Check(pg, PageSize) {
			return pages, ErrBadGPA
		}
		pages = append(pages, pg)
	}
	return pages, nil
}

// region is a virtually contiguous byte range laid over a page list: byte x
// of the region lives at pages[(off+x)>>12] + ((off+x)&4095). Every access
// is checked against the region's size and then against guest RAM.
type region struct {
	pages []uint64
	off   uint64 // offset of byte 0 in the first page
	size  uint64
	dma   bool // byte x is GPA x (the DMALKey region; Memory checks bounds)
}

func newRegion(pages []uint64, off, size uint64) (region, error) {
	if off >= PageSize || off+size > uint64(len(pages))<<PageShift || off+size < off {
		return region{}, ErrBounds
	}
	return region{pages: pages, off: off, size: size}, nil
}

// access runs fn on each page-contiguous piece of [x, x+n).
func (r *region) access(x uint64, n int, fn func(gpa uint64, lo, hi int) error) error {
	if x > r.size || uint64(n) > r.size-x {
		return ErrBounds
	}
	if r.dma {
		return fn(x, 0, n)
	}
	done := 0
	for done < n {
		a := r.off + x + uint64(done)
		pg := a >> PageShift
		in := a & (PageSize - 1)
		chunk := min(n-done, int(PageSize-in))
		if err := fn(r.pages[pg]+in, done, done+chunk); err != nil {
			return err
		}
		done += chunk
	}
	return nil
}

// wordGPA returns the GPA of the aligned 32-bit word at region offset x.
func (r *region) wordGPA(x uint64) (uint64, bool) {
	if x%4 != 0 || x > r.size || r.size-x < 4 {
		return 0, false
	}
	if r.dma {
		return x, true
	}
	a := r.off + x
	return r.pages[a>>PageShift] + a&(PageSize-1), true
}

func (r *region) read(mem Memory, x uint64, b []byte) error {
	return r.access(x, len(b), func(gpa uint64, lo, hi int) error { return mem.Read(gpa, b[lo:hi]) })
}

func (r *region) write(mem Memory, x uint64, b []byte) error {
	return r.access(x, len(b), func(gpa uint64, lo, hi int) error { return mem.Write(gpa, b[lo:hi]) })
}

// FlatMemory is guest RAM as one byte slice at GPA Base: the test peer's
// fake guest memory, also a reference implementation of Memory's bounds.
type FlatMemory struct {
	Base uint64
	B    []byte
}

// Check reports whether [gpa, gpa+n) is inside the slice.
func (m *FlatMemory) Check(gpa, n uint64) bool {
	return gpa >= m.Base && n <= uint64(len(m.B)) && gpa-m.Base <= uint64(len(m.B))-n
}

// Read copies guest memory into b.
func (m *FlatMemory) Read(gpa uint64, b []byte) error {
	if !m.Check(gpa, uint64(len(b))) {
		return ErrBadGPA
	}
	copy(b, m.B[gpa-m.Base:])
	return nil
}

// CompareAndSwap32 swaps the aligned word at gpa to new if it holds old
// (FlatMemory has no concurrent guest: a plain read and write).
func (m *FlatMemory) CompareAndSwap32(gpa uint64, old, new uint32) (bool, error) {
	if gpa%4 != 0 || !m.Check(gpa, 4) {
		return false, ErrBadGPA
	}
	w := m.B[gpa-m.Base : gpa-m.Base+4]
	if le.Uint32(w) != old {
		return false, nil
	}
	le.PutUint32(w, new)
	return true, nil
}

// Swap32 stores new in the aligned word at gpa and returns the old value
// (a plain read and write, as CompareAndSwap32).
func (m *FlatMemory) Swap32(gpa uint64, new uint32) (uint32, error) {
	if gpa%4 != 0 || !m.Check(gpa, 4) {
		return 0, ErrBadGPA
	}
	w := m.B[gpa-m.Base : gpa-m.Base+4]
	old := le.Uint32(w)
	le.PutUint32(w, new)
	return old, nil
}

// Load32 reads the aligned word at gpa.
func (m *FlatMemory) Load32(gpa uint64) (uint32, error) {
	if gpa%4 != 0 || !m.Check(gpa, 4) {
		return 0, ErrBadGPA
	}
	return le.Uint32(m.B[gpa-m.Base:]), nil
}

// Write copies b into guest memory.
func (m *FlatMemory) Write(gpa uint64, b []byte) error {
	if !m.Check(gpa, uint64(len(b))) {
		return ErrBadGPA
	}
	copy(m.B[gpa-m.Base:], b)
	return nil
}
