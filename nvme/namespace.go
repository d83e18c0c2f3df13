package nvme

import (
	"errors"
	"sync"

	"falconnic/internal/stats"
)

// Backend stores a namespace's blocks: a file, a block device or memory.
// Offsets and lengths are in bytes and block-aligned; the target has
// checked them against the namespace's size.
type Backend interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	// Flush makes completed writes durable.
	Flush() error
	// Discard deallocates a range (its contents become unspecified; this
	// package's backends read zeroes there).
	Discard(off, n int64) error
	// WriteZeroes zeroes a range; deallocate allows unmapping it.
	WriteZeroes(off, n int64, deallocate bool) error
}

// NamespaceConfig describes one exported namespace.
type NamespaceConfig struct {
	NSID      uint16 // 1..65535 (16 bits on the wire)
	BlockSize int    // 512 or 4096 (a power of two in 512..4096)
	Blocks    uint64
	ReadOnly  bool
	Backend   Backend
	// Allow lists the initiators that may use the namespace (acl.go);
	// others get Access Denied. Nil allows every path: the daemon's
	// config gives every exported namespace a list unless it runs
	// insecure.
	Allow *ACL
}

// Namespace is one exported namespace with its counters.
type Namespace struct {
	cfg   NamespaceConfig
	Stats NamespaceCounters
}

// Namespace errors.
var (
	ErrNSID      = errors.New("nvme: namespace id must be 1..65535")
	ErrBlockSize = errors.New("nvme: block size must be a power of two from 512 to 4096")
	ErrNSSize    = errors.New("nvme: namespace needs at least one block")
	ErrNSExists  = errors.New("nvme: namespace id already exported")
	ErrNoBackend = errors.New("nvme: namespace has no backend")
)

// NewNamespace validates cfg.
func NewNamespace(cfg NamespaceConfig) (*Namespace, error) {
	switch {
	case cfg.NSID == 0:
		return nil, ErrNSID
	case cfg.BlockSize < 512 || cfg.BlockSize > 4096 || cfg.BlockSize&(cfg.BlockSize-1) != 0:
		return nil, ErrBlockSize
	case cfg.Blocks == 0 || cfg.Blocks > 1<<48:
		return nil, ErrNSSize
	case cfg.Backend == nil:
		return nil, ErrNoBackend
	}
	return &Namespace{cfg: cfg}, nil
}

// Config returns the namespace's configuration.
func (ns *Namespace) Config() NamespaceConfig { return ns.cfg }

// Info returns what Identify reports.
func (ns *Namespace) Info() NamespaceInfo {
	return NamespaceInfo{Blocks: ns.cfg.Blocks, BlockSize: ns.cfg.BlockSize, ReadOnly: ns.cfg.ReadOnly, Discard: true}
}

// NamespaceCounters count a namespace's commands and failures.
type NamespaceCounters struct {
	Reads, Writes, Flushes, WriteZeroes, Discards, Identifies stats.Counter
	ReadBytes, WriteBytes, FUAWrites                          stats.Counter
	OutOfRange, WriteProtected, BackendErrors                 stats.Counter
	AccessDenied                                              stats.Counter
}

// Set lists the counters with help text.
func (c *NamespaceCounters) Set() stats.Set {
	return stats.Set{
		{Name: "reads", Help: "read nCMDs executed", Counter: &c.Reads},
		{Name: "writes", Help: "write nCMDs executed", Counter: &c.Writes},
		{Name: "flushes", Help: "flush commands executed", Counter: &c.Flushes},
		{Name: "write_zeroes", Help: "write-zeroes commands executed", Counter: &c.WriteZeroes},
		{Name: "discards", Help: "deallocate (DSM) commands executed", Counter: &c.Discards},
		{Name: "identifies", Help: "identify commands answered", Counter: &c.Identifies},
		{Name: "read_bytes", Help: "bytes read", Counter: &c.ReadBytes},
		{Name: "write_bytes", Help: "bytes written", Counter: &c.WriteBytes},
		{Name: "fua_writes", Help: "write nCMDs made durable before completing (FUA)", Counter: &c.FUAWrites},
		{Name: "out_of_range", Help: "commands refused: LBA range beyond the namespace", Counter: &c.OutOfRange},
		{Name: "write_protected", Help: "commands refused: write to a read-only namespace", Counter: &c.WriteProtected},
		{Name: "backend_errors", Help: "backend I/O errors", Counter: &c.BackendErrors},
		{Name: "access_denied", Help: "commands refused: the initiator is not on the namespace's access list", Counter: &c.AccessDenied},
	}
}

// MemBackend is a Backend in memory, safe for concurrent use.
type MemBackend struct {
	mu  sync.RWMutex
	buf []byte
}

// NewMemBackend returns a zeroed in-memory backend of size bytes.
func NewMemBackend(size int64) *MemBackend { return &MemBackend{buf: make([]byte, size)} }

// Bytes returns the backing memory (tests).
func (m *MemBackend) Bytes() []byte { return m.buf }

var errRange = errors.New("nvme: backend range out of bounds")

func (m *MemBackend) span(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > int64(len(m.buf)) || n > int64(len(m.buf))-off {
		return nil, errRange
	}
	return m.buf[off : off+n], nil
}

// ReadAt implements Backend.
func (m *MemBackend) ReadAt(p []byte, off int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, err := m.span(off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	return copy(p, s), nil
}

// WriteAt implements Backend.
func (m *MemBackend) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.span(off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	return copy(s, p), nil
}

// Flush implements Backend (memory is always "durable").
func (m *MemBackend) Flush() error { return nil }

// Discard implements Backend: discarded blocks read as zeroes.
func (m *MemBackend) Discard(off, n int64) error { return m.WriteZeroes(off, n, true) }

// WriteZeroes implements Backend.
func (m *MemBackend) WriteZeroes(off, n int64, _ bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.span(off, n)
	if err != nil {
		return err
	}
	clear(s)
	return nil
}
