package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"falconnic/nvme"
)

// Block-device ioctls (linux/fs.h).
const (
	ioctlBLKGETSIZE64 = 0x80081272
	ioctlBLKDISCARD   = 0x1277
	ioctlBLKZEROOUT   = 0x127f
	directAlign       = 4096
)

// FileBackend is a namespace backed by a regular file or a block device.
// A block device is opened with O_DIRECT where the kernel allows it; its
// I/O then goes through an aligned bounce buffer.
type FileBackend struct {
	f      *os.File
	block  bool
	direct bool
	size   int64

	mu     sync.Mutex // the bounce buffer
	bounce []byte
}

// OpenFileBackend opens path read-write (or read-only). A regular file is
// created or extended to size bytes (size 0 keeps the file's size); a
// block device keeps its own size. A block device always, and a regular
// file when direct is set, is opened with O_DIRECT (the host's page cache
// bypassed, as QEMU's cache=none does), falling back to cached I/O where
// the kernel refuses it (Direct tells which). It returns the backend.
func OpenFileBackend(path string, size int64, readOnly, direct bool) (*FileBackend, error) {
	flags := os.O_RDWR
	if readOnly {
		flags = os.O_RDONLY
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.Mode()&os.ModeDevice != 0:
		f, direct, err := openDirect(path, flags, 0, true)
		if err != nil {
			return nil, err
		}
		b := newFileBackend(f, direct)
		b.block = true
		var sz uint64
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), ioctlBLKGETSIZE64, uintptr(unsafe.Pointer(&sz))); e != 0 {
			f.Close()
			return nil, fmt.Errorf("%s: BLKGETSIZE64: %w", path, e)
		}
		b.size = int64(sz)
		return b, nil
	case err == nil && !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s: not a regular file or block device", path)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	if !readOnly {
		flags |= os.O_CREATE
	}
	f, direct, err := openDirect(path, flags, 0o644, direct)
	if err != nil {
		return nil, err
	}
	st, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	b := newFileBackend(f, direct)
	b.size = st.Size()
	if size > 0 && size != st.Size() {
		if readOnly || size < st.Size() {
			f.Close()
			return nil, fmt.Errorf("%s: file has %d bytes, config says %d", path, st.Size(), size)
		}
		if err := f.Truncate(size); err != nil {
			f.Close()
			return nil, err
		}
		b.size = size
	}
	return b, nil
}

// openDirect opens path with O_DIRECT when direct is set, and without it
// when that is not asked for or the kernel refuses it (EINVAL: tmpfs
// before 6.6, some filesystems); it reports which.
func openDirect(path string, flags int, perm os.FileMode, direct bool) (*os.File, bool, error) {
	if direct {
		f, err := os.OpenFile(path, flags|unix.O_DIRECT, perm)
		if err == nil || !errors.Is(err, unix.EINVAL) {
			return f, err == nil, err
		}
	}
	f, err := os.OpenFile(path, flags, perm)
	return f, false, err
}

// newFileBackend wraps f; an O_DIRECT one gets its bounce buffer.
func newFileBackend(f *os.File, direct bool) *FileBackend {
	b := &FileBackend{f: f, direct: direct}
	if direct {
		b.bounce = alignedBuf(nvme.ChunkSize + directAlign)
	}
	return b
}

func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	if off != 0 {
		off = directAlign - off
	}
	return b[off : off+n]
}

// Size returns the backend's size in bytes.
func (b *FileBackend) Size() int64 { return b.size }

// Direct reports whether I/O bypasses the page cache (O_DIRECT).
func (b *FileBackend) Direct() bool { return b.direct }

// Close closes the file.
func (b *FileBackend) Close() error { return b.f.Close() }

// directOK reports whether p at off can go to an O_DIRECT fd as is.
func directOK(p []byte, off int64) bool {
	return len(p)%512 == 0 && off%512 == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(p)))%directAlign == 0
}

// ReadAt implements nvme.Backend. With O_DIRECT, a buffer the kernel
// would refuse goes through the bounce buffer, a piece at a time.
func (b *FileBackend) ReadAt(p []byte, off int64) (int, error) {
	if !b.direct || directOK(p, off) {
		return b.f.ReadAt(p, off)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	done := 0
	for done < len(p) {
		n, err := b.f.ReadAt(b.bounce[:min(len(p)-done, len(b.bounce))], off+int64(done))
		done += copy(p[done:], b.bounce[:n])
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// WriteAt implements nvme.Backend (through the bounce buffer as ReadAt).
func (b *FileBackend) WriteAt(p []byte, off int64) (int, error) {
	if !b.direct || directOK(p, off) {
		return b.f.WriteAt(p, off)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	done := 0
	for done < len(p) {
		k := copy(b.bounce, p[done:])
		n, err := b.f.WriteAt(b.bounce[:k], off+int64(done))
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// ReadvAt reads contiguous bytes from off into bufs, in one preadv where
// the kernel does it all (with O_DIRECT, every buffer must be aligned:
// vectorOK). It returns the bytes read; a short read past the end is
// io.ErrUnexpectedEOF.
func (b *FileBackend) ReadvAt(bufs [][]byte, off int64) (int64, error) {
	return b.vector(unix.Preadv, bufs, off)
}

// WritevAt writes bufs as contiguous bytes at off (pwritev) and returns
// the bytes written.
func (b *FileBackend) WritevAt(bufs [][]byte, off int64) (int64, error) {
	return b.vector(unix.Pwritev, bufs, off)
}

// vectorOK reports whether bufs at off may go to ReadvAt/WritevAt as is.
func (b *FileBackend) vectorOK(bufs [][]byte, off int64) bool {
	if !b.direct {
		return true
	}
	for _, p := range bufs {
		if !directOK(p, off) {
			return false
		}
		off += int64(len(p))
	}
	return true
}

func (b *FileBackend) vector(op func(int, [][]byte, int64) (int, error), bufs [][]byte, off int64) (int64, error) {
	fd := int(b.f.Fd())
	start := off
	for len(bufs) > 0 {
		n, err := op(fd, bufs, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return off - start, err
		case n == 0:
			return off - start, io.ErrUnexpectedEOF
		}
		off += int64(n)
		for n > 0 {
			k := min(n, len(bufs[0]))
			n -= k
			if bufs[0] = bufs[0][k:]; len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
	return off - start, nil
}

// Flush implements nvme.Backend (fdatasync).
func (b *FileBackend) Flush() error { return unix.Fdatasync(int(b.f.Fd())) }

// Discard implements nvme.Backend: BLKDISCARD on a device, a punched hole
// in a file (falling back to writing zeroes).
func (b *FileBackend) Discard(off, n int64) error {
	if b.block {
		r := [2]uint64{uint64(off), uint64(n)}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, b.f.Fd(), ioctlBLKDISCARD, uintptr(unsafe.Pointer(&r))); e == 0 {
			return nil
		}
		return b.zero(off, n)
	}
	if err := unix.Fallocate(int(b.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err == nil {
		return nil
	}
	return b.zero(off, n)
}

// WriteZeroes implements nvme.Backend: BLKZEROOUT on a device, a zeroed
// range (or punched hole when deallocation is allowed) in a file.
func (b *FileBackend) WriteZeroes(off, n int64, deallocate bool) error {
	if b.block {
		r := [2]uint64{uint64(off), uint64(n)}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, b.f.Fd(), ioctlBLKZEROOUT, uintptr(unsafe.Pointer(&r))); e == 0 {
			return nil
		}
		return b.zero(off, n)
	}
	mode := uint32(unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE)
	if deallocate {
		mode = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	}
	if err := unix.Fallocate(int(b.f.Fd()), mode, off, n); err == nil {
		return nil
	}
	return b.zero(off, n)
}

// zero writes zeroes over a range, a chunk at a time.
func (b *FileBackend) zero(off, n int64) error {
	z := alignedBuf(64 << 10)
	for n > 0 {
		k := min(n, int64(len(z)))
		if _, err := b.f.WriteAt(z[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

var _ nvme.Backend = (*FileBackend)(nil)
