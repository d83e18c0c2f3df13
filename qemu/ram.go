package qemu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ramMemfdName is the name QEMU gives the memfd of a
// memory-backend-memfd object (backends/hostmem-memfd.c: the type name,
// TYPE_MEMORY_BACKEND_MEMFD); readlink of its /proc/PID/fd entry shows
// "/memfd:memory-backend-memfd (deleted)".
const ramMemfdName = "/memfd:memory-backend-memfd"

// ErrNoRAM is returned when QEMU has no memfd of guest RAM of the size
// asked for.
var ErrNoRAM = errors.New("no guest RAM memfd")

// OpenRAM opens, read-write, the memfd that holds the guest RAM of the
// QEMU with pid: the one memory-backend-memfd of size bytes among its open
// files (Machine.Args gives every guest one, shared, as "mem"). Reading
// another process's fd needs the right to ptrace it (QEMU is our child, or
// we are root).
func OpenRAM(pid int, size int64) (*os.File, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	es, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seen []string
	for _, e := range es {
		p := filepath.Join(dir, e.Name())
		target, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(target, ramMemfdName) {
			continue
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("opening QEMU's guest RAM %s: %w", p, err)
		}
		fi, err := f.Stat()
		if err == nil && fi.Size() == size {
			return f, nil
		}
		f.Close()
		if err == nil {
			seen = append(seen, fmt.Sprintf("%s: %d bytes", p, fi.Size()))
		}
	}
	return nil, fmt.Errorf("%w of %d bytes among QEMU %d's files (memfds seen: %v)", ErrNoRAM, size, pid, seen)
}
