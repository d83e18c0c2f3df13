// Package device is falconnic's emulated SmartNIC: one NIC per guest with
// its functions, the switch between a daemon's NICs, the fabric port to
// other daemons, and the daemon that builds them from a config.
//
// Rooms: each NIC's Falcon port is package device/port, the connection
// manager of every protocol package device/cm, the RDMA control channel's
// wire format package device/rdmauapi; the daemon (daemon*.go) assembles
// each NIC (daemonNIC) with the functions it owns.
//
// The Ethernet function (nic.go, net*.go, frame.go) is virtio-net over
// vhost-user (package vhostuser), as QEMU 7.2 drives it. Queue 2k is the RX ring of pair k and 2k+1
// its TX ring; the control queue stays in QEMU, which also emulates the
// config space (MAC, status), so the back-end offers no CONFIG.
//
// Features offered: VERSION_1, MRG_RXBUF, INDIRECT_DESC, EVENT_IDX, and MQ
// with more than one pair. No checksum or segmentation offloads, so the
// 12-byte virtio_net_hdr (10 bytes in legacy mode) is all zeros on RX
// except num_buffers, and ignored on TX.
//
// Data path, per NIC:
//
//	guest TX ring ──(TX goroutine: pop, strip hdr)──> uplink.Deliver (switch, or another NIC)
//	                                 └─ EtherType 0x88B5 to our MAC ──> control hook (RDMA function: port work)
//	Deliver ──(copy into a pooled NIC buffer)──> per-pair RX queue (bounded) ──(RX goroutine)──> guest RX ring
//
// Each ring has exactly one goroutine (vhostuser runs Device.RunQueue);
// Deliver hands frames to it through a bounded channel and never blocks.
// Frames wait in the NIC while the guest has posted no RX buffers; beyond
// the bound they are dropped and counted (RxQueueFull) — except from a
// local NIC's TX path, which uses DeliverPatient: it waits (bounded by
// NICConfig.RxWait, once per stall) for room, so the sending guest's TX
// ring fills and its TCP backs off instead of retransmitting. Buffers come from
// a fixed pool allocated at NewNIC, so steady-state traffic allocates
// nothing.
//
// Lifetime: a NIC outlives vhost-user sessions. When QEMU reconnects it
// replays init and start with SET_VRING_BASE = the used idx, and traffic
// resumes; frames in flight during the outage are lost or counted drops.
//
// QEMU 7.2 quirk: if the guest driver negotiates while no back-end is
// connected, the reconnect's SET_FEATURES carries only PROTOCOL_FEATURES
// (reproduced with a real guest). A legacy Linux guest always sends the
// 10-byte header in its own descriptor, so a TX chain that does not is
// proof of a modern guest: the NIC switches to the 12-byte header with
// num_buffers (counted as HdrFixups), and vhostuser keeps avail_event
// armed so such a guest keeps kicking.
//
// Falcon port (package device/port): each NIC has one FalconPort, its one
// Falcon endpoint driven by one goroutine, carrying every Falcon ULP of the
// NIC: the RDMA function's verbs engine (protocol 2) and the NVMe
// function's engine (protocol 3) attach to it by protocol, so the NIC has
// one CID space, one set of resource pools and one RUE, and the RDMA
// function's control frames are work items of the port. Connections
// between two NICs of the daemon hand each burst of frames straight to the
// other port (FalconPort.LinkTo). The ports of the NICs with NVMe functions share
// "nvme.cores" goroutines (default one; FalconPort.Host); every other
// NIC's port has a goroutine of its own.
//
// NVMe function (nvme_*.go, daemon_nvme.go; the disks are blk*.go): a
// file or block device namespace's nCMD IOs are cut at the end of each
// burst into runs of adjacent reads or writes, one vectored call each
// (nvme_pool.go). By default ("aio": "io_uring") the
// port's goroutine submits a burst's runs in one io_uring_enter and reaps
// the completions when the ring's eventfd wakes it (internal/uring); with
// "threads", or where the kernel refuses io_uring, a pool of worker
// goroutines makes blocking preadv/pwritev calls
// (BenchmarkBlkSeq128KQD32AIO compares the two).
//
// Observability (daemon_metrics.go, daemon_capture.go): CounterTables
// lists every counter table of the daemon with its labels, the one source
// of the Prometheus endpoint (internal/metrics) and `falconnic top`; the
// capture hub (package device/capture) gets every fabric datagram
// (Fabric.SetTap) and every frame on a link between two ports of the
// daemon (FalconPort.WrapLink), and the daemon tells the NIC of each.
//
// Invariants: every drop has a counter (NetCounters, plus the back-end's
// vhostuser.Counters); frames and descriptors from a guest never reach
// another NIC's memory: the only thing crossing NICs is a frame — copied,
// or in the daemon's packet memory (falcon/framebuf: Pull Data handed over
// with a reference; a Read Response lent for reading), never a guest's.
package device
