// Package framebuf is the packet memory the NICs of one daemon share:
// pooled, reference-counted frame buffers. A frame one port builds in a
// Buf can go to another port of the daemon without a copy: the sender
// keeps its reference while it may resend the packet (reading it, never
// writing it again), the receiver holds its own while it uses the frame
// (the NVMe target's write from a Write Data Response), and the buffer
// returns to the pool when the last reference goes.
//
// Buffers are Size or LargeSize bytes; frames are placed in them page-aligned the way a
// NIC's DMA engine fills receive buffers, so that a payload of whole 4 KiB
// pages starts on a page and can go to an O_DIRECT write where it lies:
// Tail places a received frame so its packet ends on a page, Head places a
// frame under construction so its payload starts on one.
package framebuf

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Page is the alignment frames are placed at.
const Page = 4096

// The two sizes of buffer: up to a page is given up to alignment, which
// leaves at least two pages for the frame of a small one (a 4 KiB payload
// with its headers) and nine for a large one (a 32 KiB RDMA segment
// between two NICs of one daemon with its headers, device/rdma.LocalMTU).
const (
	Size      = 3 * Page
	LargeSize = 10 * Page
)

// Buf is one pooled buffer with its reference count.
type Buf struct {
	refs atomic.Int32
	mem  []byte // Size or LargeSize bytes: its length names its pool
}

var (
	small = sync.Pool{New: func() any { return &Buf{mem: make([]byte, Size)} }}
	large = sync.Pool{New: func() any { return &Buf{mem: make([]byte, LargeSize)} }}
)

// Get returns a buffer for a frame of n bytes, holding one reference, the
// caller's: a small one if it can place the frame, else a large one
// (whose Tail and Head still refuse a frame larger than it can place).
func Get(n int) *Buf {
	p := &small
	if n > Size-Page {
		p = &large
	}
	b := p.Get().(*Buf)
	b.refs.Store(1)
	return b
}

// Hold takes one more reference (for another holder); b must be held.
func (b *Buf) Hold() {
	if b.refs.Add(1) <= 1 {
		panic("framebuf: Hold on a released buffer")
	}
}

// Release drops one reference; the last one returns b to the pool, and b
// must not be used after it by that holder.
func (b *Buf) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0 && len(b.mem) == Size:
		small.Put(b)
	case n == 0:
		large.Put(b)
	case n < 0:
		panic("framebuf: Release of a released buffer")
	}
}

// Refs is the number of references held (for tests and assertions).
func (b *Buf) Refs() int { return int(b.refs.Load()) }

// Mem is the whole buffer.
func (b *Buf) Mem() []byte { return b.mem }

// Room is the largest frame Tail places in b, and less than Head's
// capacity: the buffer less a page.
func (b *Buf) Room() int { return len(b.mem) - Page }

// Tail places an n-byte frame whose last trailer bytes follow its packet
// so that the packet ends on a page: the returned slice has length n and
// no spare capacity. ok is false if the frame does not fit (n > Room).
func (b *Buf) Tail(n, trailer int) (frame []byte, ok bool) {
	if n < trailer || n > b.Room() {
		return nil, false
	}
	end := uintptr(unsafe.Pointer(&b.mem[0])) + uintptr(n-trailer)
	off := int(-end & (Page - 1))
	return b.mem[off : off+n : off+n], true
}

// Head places a frame that will hold pre bytes and then a payload starting
// on a page: the returned slice is empty, starts pre bytes before that
// page (less than a page into the buffer) and has the rest of the buffer,
// more than Room bytes, as capacity. ok is false if pre > Page.
func (b *Buf) Head(pre int) (frame []byte, ok bool) {
	if pre < 0 || pre > Page {
		return nil, false
	}
	base := uintptr(unsafe.Pointer(&b.mem[0]))
	data := int(-base&(Page-1)) + Page // a page boundary at least a page in, so pre fits before it
	if data-Page >= pre {
		data -= Page
	}
	return b.mem[data-pre : data-pre : len(b.mem)], true
}

// Within reports whether the bytes of data lie in b.
func (b *Buf) Within(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&b.mem[0]))
	d := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	return d >= lo && d-lo+uintptr(len(data)) <= uintptr(len(b.mem))
}
