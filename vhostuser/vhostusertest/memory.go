package vhostusertest

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// RegionLayout places one region of guest RAM: GPA range and its offset in
// the shared memfd.
type RegionLayout struct {
	GPA, Size, FileOffset uint64
}

// OneRegion is the q35 512 MiB-style layout scaled down: one region at GPA 0.
func OneRegion(size uint64) []RegionLayout {
	return []RegionLayout{{GPA: 0, Size: size}}
}

// TwoRegions mimics q35's RAM around the PCI hole: [0, a) and [hole, hole+b)
// in one memfd at offsets 0 and a.
func TwoRegions(a, hole, b uint64) []RegionLayout {
	return []RegionLayout{{GPA: 0, Size: a}, {GPA: hole, Size: b, FileOffset: a}}
}

// uvaBase is where the simulated QEMU "maps" guest RAM (ring addresses are UVAs).
const uvaBase = 0x7f5f00000000

// GuestMemory is simulated guest RAM: one memfd, mapped once here, exposed
// to the back-end as one or more regions.
type GuestMemory struct {
	fd      int
	mem     []byte
	Regions []RegionLayout
	next    []uint64 // bump allocator per region (offset inside the region)
}

// NewGuestMemory creates guest RAM with the given regions.
func NewGuestMemory(layout []RegionLayout) (*GuestMemory, error) {
	var total uint64
	for _, r := range layout {
		if end := r.FileOffset + r.Size; end > total {
			total = end
		}
	}
	fd, err := unix.MemfdCreate("guest-ram", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.Ftruncate(fd, int64(total)); err != nil {
		unix.Close(fd)
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	g := &GuestMemory{fd: fd, mem: mem, Regions: layout, next: make([]uint64, len(layout))}
	for i := range g.next {
		g.next[i] = 4096 // keep GPA 0 unused
	}
	return g, nil
}

// Close unmaps and closes guest RAM.
func (g *GuestMemory) Close() {
	unix.Munmap(g.mem)
	unix.Close(g.fd)
}

// UVA returns the simulated front-end virtual address of gpa.
func (g *GuestMemory) UVA(gpa uint64) uint64 {
	for _, r := range g.Regions {
		if gpa >= r.GPA && gpa < r.GPA+r.Size {
			return uvaBase + r.FileOffset + (gpa - r.GPA)
		}
	}
	panic(fmt.Sprintf("vhostusertest: gpa %#x outside guest RAM", gpa))
}

// Bytes returns guest RAM at gpa (test helper: panics outside RAM).
func (g *GuestMemory) Bytes(gpa, n uint64) []byte {
	for _, r := range g.Regions {
		if gpa >= r.GPA && gpa+n <= r.GPA+r.Size {
			off := r.FileOffset + gpa - r.GPA
			return g.mem[off : off+n : off+n]
		}
	}
	panic(fmt.Sprintf("vhostusertest: range %#x+%d outside guest RAM", gpa, n))
}

// Alloc returns n bytes (aligned to align) of guest RAM in region ri.
func (g *GuestMemory) Alloc(ri int, n, align uint64) uint64 {
	r := g.Regions[ri]
	off := (g.next[ri] + align - 1) &^ (align - 1)
	if off+n > r.Size {
		panic("vhostusertest: guest RAM exhausted")
	}
	g.next[ri] = off + n
	return r.GPA + off
}

// MemTablePayload encodes SET_MEM_TABLE and returns one dup'ed fd per region
// (the caller sends and then closes them).
func (g *GuestMemory) MemTablePayload() ([]byte, []int) {
	p := make([]byte, 8+32*len(g.Regions))
	binary.LittleEndian.PutUint32(p, uint32(len(g.Regions)))
	var fds []int
	for i, r := range g.Regions {
		putRegion(p[8+32*i:], r)
		fd, _ := unix.Dup(g.fd)
		fds = append(fds, fd)
	}
	return p, fds
}

// RegionPayload encodes ADD_MEM_REG/REM_MEM_REG for region i and a dup'ed fd.
func (g *GuestMemory) RegionPayload(i int) ([]byte, int) {
	p := make([]byte, 40)
	putRegion(p[8:], g.Regions[i])
	fd, _ := unix.Dup(g.fd)
	return p, fd
}

func putRegion(p []byte, r RegionLayout) {
	binary.LittleEndian.PutUint64(p[0:], r.GPA)
	binary.LittleEndian.PutUint64(p[8:], r.Size)
	binary.LittleEndian.PutUint64(p[16:], uvaBase+r.FileOffset)
	binary.LittleEndian.PutUint64(p[24:], r.FileOffset)
}

// Truncate shrinks the memfd behind guest RAM, as a hostile or buggy
// front-end could: the back-end's mappings beyond size then fault.
func (g *GuestMemory) Truncate(size int64) error { return unix.Ftruncate(g.fd, size) }
