package storage

import "falconnic/nvme"

// NamespaceMemory is the Backing of a namespace kept in memory.
const NamespaceMemory = "memory"

// NamespaceSpec is one exported namespace.
type NamespaceSpec struct {
	NIC       string `json:"nic"`
	NSID      uint16 `json:"nsid"`
	Backing   string `json:"backing"`
	Size      int64  `json:"size,omitempty"`       // bytes; required for memory and new files
	BlockSize int    `json:"block_size,omitempty"` // 512 (default) .. 4096
	ReadOnly  bool   `json:"read_only,omitempty"`
	// Direct opens a regular file with O_DIRECT: its I/O bypasses the
	// host's page cache as QEMU's cache=none does (block devices always
	// do). A filesystem without O_DIRECT falls back to cached I/O.
	Direct bool `json:"direct,omitempty"`
	// AIO is how a file or block device's reads and writes reach the
	// kernel, as QEMU's aio= option: "io_uring" (the default: batches of
	// vectored IOs submitted from the port's goroutine, falling back to
	// threads where the kernel refuses io_uring) or "threads" (a pool of
	// worker goroutines, one blocking call per run of IOs).
	AIO string `json:"aio,omitempty"`
	// Allow lists the initiators that may use the namespace: NIC names of
	// this daemon, NIC MACs, host NQNs ("nqn.…"), or "*" alone for every
	// initiator. Absent: the NICs of this daemon only. The daemon's config
	// resolves it into ACL.
	Allow []string `json:"allow,omitempty"`
	// ACL is Allow resolved (nil: everyone).
	ACL *nvme.ACL `json:"-"`
}

// Namespace AIO modes (NamespaceSpec.AIO).
const (
	AIOUring   = "io_uring"
	AIOThreads = "threads"
)
