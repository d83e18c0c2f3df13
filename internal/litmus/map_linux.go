package litmus

import (
	"fmt"
	"os"
	"syscall"
)

// MapAnon maps an anonymous page, populated and locked so that it stays
// at one physical address while the guest plays on it.
func MapAnon() (*Page, func() error, error) {
	b, err := syscall.Mmap(-1, 0, PageSize, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_POPULATE)
	if err != nil {
		return nil, nil, fmt.Errorf("litmus: mmap: %w", err)
	}
	if err := syscall.Mlock(b); err != nil {
		syscall.Munmap(b)
		return nil, nil, fmt.Errorf("litmus: mlock: %w", err)
	}
	p, err := NewPage(b)
	if err != nil {
		syscall.Munmap(b)
		return nil, nil, err
	}
	return p, func() error { return syscall.Munmap(b) }, nil
}

// MapFile maps the page at off (page-aligned) of f, shared and writable:
// the guest's page in its RAM file.
func MapFile(f *os.File, off int64) (*Page, func() error, error) {
	if off < 0 || off%PageSize != 0 {
		return nil, nil, fmt.Errorf("litmus: offset %#x is not page-aligned", off)
	}
	b, err := syscall.Mmap(int(f.Fd()), off, PageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("litmus: mmap of %s at %#x: %w", f.Name(), off, err)
	}
	p, err := NewPage(b)
	if err != nil {
		syscall.Munmap(b)
		return nil, nil, err
	}
	return p, func() error { return syscall.Munmap(b) }, nil
}
