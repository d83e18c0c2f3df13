// Package storage is a NIC's NVMe function and its disks: the nvme.Engine
// attached to the NIC's Falcon port (package port) as the ULP of protocol
// 3 (NVMeFunc), target of the namespaces the NIC exports (NamespaceSpec:
// memory, a file or a block device) and initiator of its disks: a
// vhost-user-blk device (Blk) whose blocks live on a namespace of another
// NIC, maps the guest's virtio-blk requests to NVMe commands over an
// nvme.Path. The connection manager (package cm)
// sets up the paths to NICs of other daemons; a remote disk resubmits
// what a broken path failed on the path that replaces it (DiskPaths).
// A command that fails on a path that is still up (timed out) retires
// that path: nothing more goes on it, and the commands wait for the
// replacement, whose set-up has the target fence the old path's writes
// still in its backend (path.go; nvme WriteFenced), so a retried copy is
// never acknowledged before the write it replaces has landed or been
// dropped.
//
// Namespace IO: a file or block device namespace's nCMD IOs are cut at
// the end of each burst of port work into runs of adjacent reads or
// writes, one vectored call each (pool.go). By default ("aio":
// "io_uring") the port's goroutine submits a burst's runs in one
// io_uring_enter and reaps the completions when the ring's eventfd wakes
// it (internal/uring); with "threads", or where the kernel refuses
// io_uring, a pool of worker goroutines makes blocking preadv/pwritev
// calls (BenchmarkBlkSeq128KQD32AIO compares the two).
//
// Everything the disk's guest writes in a request is checked before use
// (header, segment layout, sizes, sectors against the namespace); a bad
// request fails with a virtio-blk status and a counter, never touches
// another disk's state.
//
// Its test peer is package blktest: a guest virtio-blk driver.
package storage
