// Package uring is the small part of Linux io_uring the daemon uses:
// vectored reads and writes (and no-ops, for tests) submitted in batches
// from one goroutine, their completions signalled on an eventfd.
//
// Layouts and constants are the kernel's (include/uapi/linux/io_uring.h).
// A Ring is not safe for concurrent use: one goroutine prepares, submits
// and reaps. Memory an entry points at (iovecs and the buffers they name)
// must stay reachable and unmoved until its completion is reaped: the
// caller keeps it referenced; Go's heap does not move objects.
package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Opcodes (enum io_uring_op).
const (
	OpNop    = 0
	OpReadv  = 1
	OpWritev = 2
)

// RWFDSync makes a write durable before it completes (RWF_DSYNC), as a
// write followed by fdatasync.
const RWFDSync = 0x2

const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	featSingleMmap = 1 << 0

	enterGetEvents = 1 << 0

	registerEventFD = 4

	sqeSize = 64
	cqeSize = 16
)

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// sqe is struct io_uring_sqe (64 bytes).
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	rwFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFDIn  int32
	addr3       uint64
	pad         uint64
}

// CQE is a completion: the entry's user data and its result (bytes
// done, or a negated errno).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

var (
	_ [sqeSize - unsafe.Sizeof(sqe{})]byte
	_ [unsafe.Sizeof(sqe{}) - sqeSize]byte
	_ [cqeSize - unsafe.Sizeof(CQE{})]byte
	_ [120 - unsafe.Sizeof(params{})]byte
	_ [unsafe.Sizeof(params{}) - 120]byte
)

// Ring is one io_uring instance.
type Ring struct {
	fd      int
	ringMem []byte // SQ and CQ rings (one mapping: IORING_FEAT_SINGLE_MMAP)
	sqeMem  []byte

	sqHead, sqTail *uint32
	sqMask         uint32
	sqEntries      uint32
	sqArray        []uint32
	sqes           []sqe
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []CQE

	pending uint32 // prepared, not yet submitted
}

// ErrFull is returned by Prep when the submission queue has no room.
var ErrFull = errors.New("uring: submission queue full")

// New sets up a ring with room for entries submissions (a power of two;
// the kernel gives twice as many completion slots). It fails where the
// kernel lacks io_uring or forbids it (ENOSYS, EPERM), or lacks the single
// mapping of both rings (before 5.4).
func New(entries uint32) (*Ring, error) {
	var p params
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd)}
	if p.features&featSingleMmap == 0 {
		r.Close()
		return nil, errors.New("io_uring: kernel without single-mmap rings")
	}
	ringSize := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*cqeSize)
	var err error
	r.ringMem, err = unix.Mmap(r.fd, offSQRing, int(ringSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring rings: %w", err)
	}
	r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries*sqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring entries: %w", err)
	}
	u32 := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&r.ringMem[off])) }
	r.sqHead, r.sqTail = u32(p.sqOff.head), u32(p.sqOff.tail)
	r.sqMask, r.sqEntries = *u32(p.sqOff.ringMask), *u32(p.sqOff.ringEntries)
	r.sqArray = unsafe.Slice(u32(p.sqOff.array), p.sqEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail = u32(p.cqOff.head), u32(p.cqOff.tail)
	r.cqMask = *u32(p.cqOff.ringMask)
	r.cqes = unsafe.Slice((*CQE)(unsafe.Pointer(&r.ringMem[p.cqOff.cqes])), p.cqEntries)
	return r, nil
}

// RegisterEventFD has the kernel signal efd on every completion.
func (r *Ring) RegisterEventFD(efd int) error {
	v := int32(efd)
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerEventFD, uintptr(unsafe.Pointer(&v)), 1, 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring_register eventfd: %w", errno)
	}
	return nil
}

// Space is how many more entries Prep takes before a Submit.
func (r *Ring) Space() int {
	return int(r.sqEntries - (*r.sqTail + r.pending - atomic.LoadUint32(r.sqHead)))
}

// Prep queues one operation: op on fd at off over the iovecs iov (len
// of them), with rwFlags (RWFDSync) and user data back in its CQE.
func (r *Ring) Prep(op uint8, fd int, iov []unix.Iovec, off int64, rwFlags uint32, userData uint64) error {
	if r.Space() <= 0 {
		return ErrFull
	}
	tail := *r.sqTail + r.pending
	i := tail & r.sqMask
	s := &r.sqes[i]
	*s = sqe{opcode: op, fd: int32(fd), off: uint64(off), rwFlags: rwFlags, userData: userData}
	if len(iov) > 0 {
		s.addr, s.len = uint64(uintptr(unsafe.Pointer(&iov[0]))), uint32(len(iov))
	}
	r.sqArray[i] = i
	r.pending++
	return nil
}

// Submit hands the prepared entries to the kernel (one io_uring_enter)
// and returns how many it took. Entries it did not take stay queued and go
// with the next Submit.
func (r *Ring) Submit() (int, error) {
	if r.pending > 0 {
		atomic.StoreUint32(r.sqTail, *r.sqTail+r.pending) // publishes the entries
		r.pending = 0
	}
	todo := *r.sqTail - atomic.LoadUint32(r.sqHead)
	if todo == 0 {
		return 0, nil
	}
	return r.enter(todo, 0, 0)
}

// Wait blocks until at least n completions are ready to reap.
func (r *Ring) Wait(n uint32) error {
	_, err := r.enter(0, n, enterGetEvents)
	return err
}

func (r *Ring) enter(submit, minComplete, flags uint32) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit), uintptr(minComplete), uintptr(flags), 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, fmt.Errorf("io_uring_enter: %w", errno)
	}
}

// Reap calls f for every ready completion, oldest first, and returns how
// many there were.
func (r *Ring) Reap(f func(CQE)) int {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		f(r.cqes[head&r.cqMask])
		n++
	}
	atomic.StoreUint32(r.cqHead, head) // frees the slots
	return n
}

// Close unmaps the rings and closes the ring. Operations still in the
// kernel are cancelled or run to their end asynchronously: callers reap
// every completion first, so no buffer is freed while the kernel uses it.
func (r *Ring) Close() error {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
		r.sqeMem = nil
	}
	if r.ringMem != nil {
		unix.Munmap(r.ringMem)
		r.ringMem = nil
	}
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}
