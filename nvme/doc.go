// Package nvme is falconnic's NVMe upper-layer protocol over Falcon
// (OCP Falcon spec Rev 0.9 §9.3): the target that exports namespaces
// and the initiator that turns host block commands into NVMe-over-Falcon
// transactions. Like package falcon it is sans-I/O: an Engine is the
// falcon.ULP of its connections and runs on the goroutine that owns the
// endpoint; namespaces are served through the Backend interface (memory
// here; files and block devices in package device/storage).
//
// Command model: Read, Write, Flush, Write Zeroes, Dataset Management
// (deallocate) and Identify Namespace, with NVMe completion statuses end
// to end (Status, KnownStatuses).
//
// Mapping [N]: every path to a peer is one unordered connection. A host
// command (iCMD, ≤ 1 MiB) is split into 4 KiB nCMDs, one Falcon
// transaction each, carrying the NBTH with the initiator's nCMD tag, the
// iCMD id and NCNT total/offset:
//
//	read:  initiator ─push Read Request (NBTH+cmd)──────────▶ target
//	       initiator ◀─push Read Response (NBTH+status+data)── target
//	write: initiator ─push Write Request (NBTH+cmd)─────────▶ target
//	       initiator ◀─pull Write Data Request──────────────── target
//	       initiator ─pull data: Write Data Response (NBTH+data)▶ target
//	       initiator ◀─push Write Completion (NBTH+status)──── target
//
// Flush, Write Zeroes and Dataset Management travel as Write Requests that
// pull nothing; Identify as a Read Request answered with 4096 bytes. The
// command's SLBA/NLB describe the whole iCMD; NCNT Offset picks the nCMD.
// Statuses are the NVMe ones: a write beyond the namespace fails with LBA
// Out of Range, one to a read-only export with Namespace Is Write
// Protected, and neither touches the backend.
//
// Wire extensions (ext.go): the spec defines only reads and writes, so
// the opcode of other commands rides in the command's reserved C7 bits;
// Read and Write keep 0 there.
//
// One connection per path. The Write Data Request is a Pull Request
// whose ULP header is the NBTH (falcon.Conn.PullHeader; the initiator
// reads it as Request.Payload): it carries the Initiator Tag, iCMD id and
// NCNT Offset of the Write Request, so the initiator finds the nCMD by
// tag, as it does for responses, and answers with its data. A pull naming
// no live write nCMD is answered with an NBTH marked INV (no data), which
// fails that write at the target. A write the target refuses is never
// pulled: its Write Completion carries the error. Pushes and pulls in
// both directions share the path's one unordered connection [N].
//
// Lifetimes: a command completes exactly once — with the target's
// status, with an internal path error when its connection dies, or with a
// transient transport error after Config.CommandTimeout (OnTimer and
// NextDeadline, driven beside the endpoint's timers). Cancel detaches a
// command from its buffers for a device whose guest memory goes away.
// Late responses and pulls for a finished nCMD find no live tag.
//
// Invariants: every delivered push is acknowledged or NACKed exactly
// once; a response is checked against a live nCMD (tag with generation,
// iCMD id, offset, type, length) before it touches host memory; every
// drop has its counter (Counters, NamespaceCounters).
//
// Access control (acl.go): a namespace may list the initiators allowed
// to use it (NIC MACs, host NQNs); a command from any other path — or
// from a path added without an identity — fails with Access Denied before
// the backend is touched. AddPathFrom binds a path to its initiator, as
// the connection manager authenticated it; while a path of an initiator
// MAC is live, only the daemon that owns it may add another. Target
// slots are split evenly between live paths (a path beyond its share is
// RNR-NACKed), and a path's initiator tables come with its first command,
// so a path that never initiates costs a few hundred bytes. While a
// write of a failed path is still in an AsyncBackend, writes of the same
// initiator on any path are RNR-NACKed (WriteFenced): a retried copy
// never lands before the write it replaces.
//
// Backends (aio.go): a plain Backend (memory) is called on the endpoint's
// goroutine. An AsyncBackend (files and block devices in package device/storage:
// io_uring submitted from the port's goroutine, or a worker pool) gets each nCMD's IO through Submit — data in a 4 KiB
// aligned buffer the target slot keeps, so O_DIRECT needs no bounce — and
// hands it back through Engine.IODone on the endpoint's goroutine; the
// slot then responds. A full backend queue holds IOs in order in the
// engine (bounded by the target table, counted as BackendBusy); a path
// that fails with IO in flight frees those slots when the IO returns. A
// write with FUA is flushed before its completion; Flush makes every
// completed write durable (the backend's Flush: fdatasync for files).
package nvme
