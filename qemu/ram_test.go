package qemu

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// memfd creates a memfd called name of size bytes in this process.
func memfd(t *testing.T, name string, size int64) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	f := os.NewFile(uintptr(fd), name)
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestOpenRAMFindsTheMemfdOfTheRightSize(t *testing.T) {
	memfd(t, "memory-backend-memfd", 1<<20) // another backend's
	want := memfd(t, "memory-backend-memfd", 4<<20)
	memfd(t, "something-else", 4<<20)
	if _, err := want.WriteAt([]byte("guest"), 3<<20); err != nil {
		t.Fatal(err)
	}
	f, err := OpenRAM(os.Getpid(), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 5)
	if _, err := f.ReadAt(b, 3<<20); err != nil || string(b) != "guest" {
		t.Fatalf("read %q, %v from the RAM file: not the right memfd", b, err)
	}
	if _, err := OpenRAM(os.Getpid(), 8<<20); !errors.Is(err, ErrNoRAM) {
		t.Fatalf("OpenRAM of a size no memfd has: %v, want ErrNoRAM", err)
	}
}
