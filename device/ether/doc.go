// Package ether is a NIC's Ethernet function: virtio-net over vhost-user
// (package vhostuser), as QEMU 7.2 drives it. Queue 2k is the RX ring of
// pair k and 2k+1 its TX ring; the control queue stays in QEMU, which also
// emulates the config space (MAC, status), so the back-end offers no
// CONFIG. A function that rides on the NIC's netdev, as the RDMA function
// does, attaches as its Upper: it receives the control-channel frames and
// the guest's memory table.
//
// Features offered: VERSION_1, MRG_RXBUF, INDIRECT_DESC, EVENT_IDX, and MQ
// with more than one pair. No checksum or segmentation offloads, so the
// 12-byte virtio_net_hdr (10 bytes in legacy mode) is all zeros on RX
// except num_buffers, and ignored on TX.
//
// Data path, per NIC:
//
//	guest TX ring ──(TX goroutine: pop, strip hdr)──> uplink.Deliver (switch, or another NIC)
//	                                 └─ EtherType 0x88B5 to our MAC ──> control hook (the Upper: port work)
//	Deliver ──(copy into a pooled NIC buffer)──> per-pair RX queue (bounded) ──(RX goroutine)──> guest RX ring
//
// Each ring has exactly one goroutine (vhostuser runs Device.RunQueue);
// Deliver hands frames to it through a bounded channel and never blocks.
// Frames wait in the NIC while the guest has posted no RX buffers; beyond
// the bound they are dropped and counted (RxQueueFull) — except from a
// local NIC's TX path, which uses DeliverPatient: it waits (bounded by
// Config.RxWait, once per stall) for room, so the sending guest's TX ring
// fills and its TCP backs off instead of retransmitting. Buffers come from
// a fixed pool allocated at New, so steady-state traffic allocates
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
// Invariants: every drop has a counter (Counters, plus the back-end's
// vhostuser.Counters); frames and descriptors from a guest never reach
// another NIC's memory: what leaves the NIC is a copy of a frame.
//
// Its test peer is package ethertest: a guest virtio-net driver.
package ether
