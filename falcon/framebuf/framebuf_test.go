package framebuf

import (
	"testing"
	"unsafe"
)

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestTailEndsThePacketOnAPage(t *testing.T) {
	for _, size := range []int{Size, LargeSize} {
		b := Get(size - Page)
		if len(b.Mem()) != size || b.Room() != size-Page {
			t.Fatalf("Get(%d): a buffer of %d bytes, room %d", size-Page, len(b.Mem()), b.Room())
		}
		for _, n := range []int{8, 100, 4096 + 8, 4096 + 64 + 8, size - Page} {
			f, ok := b.Tail(n, 8)
			if !ok || len(f) != n || cap(f) != n || !b.Within(f) {
				t.Fatalf("Tail(%d): ok %v len %d cap %d", n, ok, len(f), cap(f))
			}
			if end := addr(f) + uintptr(n-8); end%Page != 0 {
				t.Fatalf("Tail(%d): packet ends at %#x", n, end)
			}
		}
		if _, ok := b.Tail(size-Page+1, 8); ok {
			t.Fatal("Tail took a frame larger than it can place")
		}
		if _, ok := b.Tail(4, 8); ok {
			t.Fatal("Tail took a frame shorter than its trailer")
		}
		b.Release()
	}
}

// Get picks the small buffer for every frame it can place, and a released
// buffer goes back to its own size's pool.
func TestGetPicksTheSmallestSizeThatPlacesTheFrame(t *testing.T) {
	for _, c := range []struct{ n, size int }{{0, Size}, {Size - Page, Size}, {Size - Page + 1, LargeSize}, {LargeSize, LargeSize}} {
		b := Get(c.n)
		if len(b.Mem()) != c.size {
			t.Errorf("Get(%d): %d bytes, want %d", c.n, len(b.Mem()), c.size)
		}
		b.Release()
		if b2 := Get(c.n); len(b2.Mem()) != c.size {
			t.Errorf("Get(%d) after a release: %d bytes", c.n, len(b2.Mem()))
		} else {
			b2.Release()
		}
	}
}

func TestHeadStartsThePayloadOnAPage(t *testing.T) {
	b := Get(0)
	defer b.Release()
	for _, pre := range []int{0, 1, 52, 100, Page - 1, Page} {
		f, ok := b.Head(pre)
		if !ok || len(f) != 0 || cap(f) <= b.Room() {
			t.Fatalf("Head(%d): ok %v len %d cap %d", pre, ok, len(f), cap(f))
		}
		f = f[:pre+Page]
		if !b.Within(f) || (addr(f)+uintptr(pre))%Page != 0 {
			t.Fatalf("Head(%d): payload at %#x", pre, addr(f)+uintptr(pre))
		}
	}
	if _, ok := b.Head(Page + 1); ok {
		t.Fatal("Head took more room than a page")
	}
}

func TestReferencesReturnTheBufferOnce(t *testing.T) {
	b := Get(0)
	b.Hold()
	if b.Refs() != 2 {
		t.Fatalf("refs %d after Hold", b.Refs())
	}
	b.Release()
	if b.Refs() != 1 {
		t.Fatalf("refs %d after one Release", b.Refs())
	}
	b.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("a second last Release did not panic")
		}
	}()
	b.Release()
}

func TestWithin(t *testing.T) {
	b := Get(LargeSize)
	defer b.Release()
	m := b.Mem()
	other := make([]byte, 16)
	switch {
	case !b.Within(m[:1]), !b.Within(m[LargeSize-1:]), !b.Within(m):
		t.Fatal("Within refused bytes of the buffer")
	case b.Within(other), b.Within(nil), b.Within(m[:0]):
		t.Fatal("Within took bytes outside the buffer (or none)")
	}
}
