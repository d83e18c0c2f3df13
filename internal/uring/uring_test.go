package uring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newRing returns a ring, or skips where the kernel has no io_uring
// (the daemon falls back to its worker threads there).
func newRing(t *testing.T, n uint32) *Ring {
	t.Helper()
	r, err := New(n)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		t.Skipf("no io_uring here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func iovecs(bufs ...[]byte) []unix.Iovec {
	iov := make([]unix.Iovec, len(bufs))
	for i, b := range bufs {
		iov[i].Base = unsafe.SliceData(b)
		iov[i].SetLen(len(b))
	}
	return iov
}

// TestReadvWritev writes two buffers as one run and reads them back into
// three, through the ring, and checks the eventfd was signalled.
func TestReadvWritev(t *testing.T) {
	r := newRing(t, 8)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := r.RegisterEventFD(efd); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, b := bytes.Repeat([]byte{'a'}, 3000), bytes.Repeat([]byte{'b'}, 5192)
	wiov := iovecs(a, b)
	if err := r.Prep(OpWritev, int(f.Fd()), wiov, 4096, RWFDSync, 7); err != nil {
		t.Fatal(err)
	}
	if err := r.Prep(OpNop, -1, nil, 0, 0, 8); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Submit(); err != nil || n != 2 {
		t.Fatalf("submit: %d %v", n, err)
	}
	got := reap(t, r, 2)
	if got[7] != 8192 || got[8] != 0 {
		t.Fatalf("write completions %v", got)
	}
	var ev [8]byte
	if n, err := unix.Read(efd, ev[:]); n != 8 || err != nil {
		t.Fatalf("eventfd not signalled: %d %v", n, err)
	}
	x, y, z := make([]byte, 100), make([]byte, 8000), make([]byte, 500)
	riov := iovecs(x, y, z)
	if err := r.Prep(OpReadv, int(f.Fd()), riov, 4096, 0, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	// The file ends 8192 bytes after 4096: a short read.
	if got := reap(t, r, 1); got[9] != 8192 {
		t.Fatalf("read completion %v", got)
	}
	if back := append(append(x, y...), z[:92]...); !bytes.Equal(back, append(a, b...)) {
		t.Error("data read back differs")
	}
}

// TestErrorsAndFull: a bad descriptor completes with -EBADF, and Prep
// refuses entries beyond the queue until a Submit makes room.
func TestErrorsAndFull(t *testing.T) {
	r := newRing(t, 4)
	buf := make([]byte, 512)
	iov := iovecs(buf)
	for i := range 4 {
		if err := r.Prep(OpReadv, 1<<20, iov, 0, 0, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Prep(OpNop, -1, nil, 0, 0, 99); err != ErrFull {
		t.Fatalf("fifth entry in a ring of 4: %v", err)
	}
	if n, err := r.Submit(); err != nil || n != 4 {
		t.Fatalf("submit: %d %v", n, err)
	}
	for u, res := range reap(t, r, 4) {
		if res != -int32(unix.EBADF) {
			t.Errorf("entry %d: res %d, want -EBADF", u, res)
		}
	}
	if r.Space() != 4 {
		t.Errorf("space %d after reaping all, want 4", r.Space())
	}
}

// reap waits for n completions and returns their results by user data.
func reap(t *testing.T, r *Ring, n int) map[uint64]int32 {
	t.Helper()
	got := map[uint64]int32{}
	for len(got) < n {
		if err := r.Wait(1); err != nil {
			t.Fatal(err)
		}
		r.Reap(func(c CQE) { got[c.UserData] = c.Res })
	}
	return got
}
