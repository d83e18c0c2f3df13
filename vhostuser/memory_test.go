package vhostuser

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func memfd(t *testing.T, size int64) int {
	t.Helper()
	fd, err := unix.MemfdCreate("t", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestTranslateRejectsOutsideAndCrossing(t *testing.T) {
	fd := memfd(t, 0x3000)
	r0, _ := MapRegion(fd, 0x0, 0x1000, 0x7000_0000, 0)
	r1, _ := MapRegion(fd, 0x10000, 0x2000, 0x7000_1000, 0x1000)
	mt, err := NewMemTable([]*Region{r1, r0})
	if err != nil {
		t.Fatal(err)
	}
	defer mt.Release()
	r0.Data[0x10] = 0x42
	r1.Data[0x1ff0] = 0x43
	cases := []struct {
		gpa, n uint64
		err    error
		first  byte
	}{
		{0x10, 1, nil, 0x42},
		{0x11ff0, 16, nil, 0x43},
		{0x0ff8, 16, ErrCrossesRegion, 0},
		{0x1000, 1, ErrBadGPA, 0},               // the hole
		{0x12000, 1, ErrBadGPA, 0},              // past the end
		{0x11fff, 1 << 63, ErrCrossesRegion, 0}, // overflow attempt
	}
	for _, c := range cases {
		b, err := mt.Translate(c.gpa, c.n)
		if !errors.Is(err, c.err) {
			t.Errorf("Translate(%#x,%d) err %v, want %v", c.gpa, c.n, err, c.err)
			continue
		}
		if err == nil && (uint64(len(b)) != c.n || b[0] != c.first) {
			t.Errorf("Translate(%#x,%d) = %d bytes starting %#x", c.gpa, c.n, len(b), b[0])
		}
	}
	// Both regions share one memfd: the same file byte is seen through both UVAs' mappings.
	if b, _ := mt.TranslateUVA(0x7000_1000+0x1ff0, 1); b[0] != 0x43 {
		t.Fatal("UVA translation")
	}
	if _, err := NewMemTable([]*Region{r0, {GPA: 0x800, Size: 0x1000, m: r0.m}}); !errors.Is(err, ErrRegionOverlap) {
		t.Fatalf("overlap accepted: %v", err)
	}
}

func TestTableReplacementWaitsForTheLastWorker(t *testing.T) {
	fd := memfd(t, 0x2000)
	r0, _ := MapRegion(fd, 0x0, 0x1000, 0x7000_0000, 0)
	r1, _ := MapRegion(fd, 0x4000, 0x1000, 0x7000_4000, 0x1000)
	freed := 0
	t1, _ := NewMemTable([]*Region{r0})
	t1.onFree = func() { freed++ }
	if !t1.TryAcquire() { // a worker holds t1
		t.Fatal("acquire")
	}
	t2, err := t1.With(r1) // ADD_MEM_REG: t2 shares r0's mapping
	if err != nil {
		t.Fatal(err)
	}
	t1.Release() // the session lets go of t1
	if freed != 0 || r0.m.refs.Load() != 2 {
		t.Fatalf("t1 freed while a worker holds it (freed=%d refs=%d)", freed, r0.m.refs.Load())
	}
	t1.Release() // the worker moves on
	if freed != 1 || r0.m.refs.Load() != 1 {
		t.Fatalf("after last release: freed=%d r0 refs=%d", freed, r0.m.refs.Load())
	}
	if t1.TryAcquire() {
		t.Fatal("acquired a freed table")
	}
	r0.Data[0] = 1 // still mapped: t2 holds it
	t3, err := t2.Without(0x0, 0x1000)
	if err != nil {
		t.Fatal(err)
	}
	t2.Release()
	if r0.m.refs.Load() != 0 || r1.m.refs.Load() != 1 {
		t.Fatalf("REM_MEM_REG: r0 refs %d r1 refs %d", r0.m.refs.Load(), r1.m.refs.Load())
	}
	if _, err := t3.Translate(0x0, 1); !errors.Is(err, ErrBadGPA) {
		t.Fatal("removed region still translates")
	}
	if _, err := t3.Without(0x0, 0x1000); !errors.Is(err, ErrNoRegion) {
		t.Fatal("removing a missing region")
	}
	t3.Release()
}
