// Package vhostuser is falconnic's vhost-user device back-end, in pure Go
// (golang.org/x/sys/unix, no cgo). It serves virtio devices (net now, blk
// and vsock later) to QEMU 7.2 front-ends over a unix socket.
//
// Layers:
//
//   - message.go, transport.go: the codec. Header and payload byte views, a
//     table of every request with its payload size bounds, fd counts and
//     whether it is always answered (Validate), and a Conn that reads the
//     12-byte header alone (fds ride on it) and then exactly the payload.
//   - session.go: one front-end connection. A table of handlers, one per
//     request, tolerant of QEMU 7.2's real orderings: rings enabled before
//     they exist, SET_OWNER late, repeated SET_FEATURES (latest wins) and
//     SET_VRING_ENABLE, call fds swapped while a ring runs. A ring starts
//     once it has a size, addresses, a kick fd, a memory table and (with
//     PROTOCOL_FEATURES) an enable, in whatever order they arrive.
//     GET_VRING_BASE stops it and answers last_avail.
//   - memory.go: guest memory. Regions are mmapped one by one (several may
//     share one memfd at different offsets) and must lie inside their file.
//     A MemTable is immutable and reference counted: workers move to a new
//     table at their next Pop or Refresh, and a mapping is unmapped only
//     when no table that a worker might still hold lists it. With
//     CONFIGURE_MEM_SLOTS every queue pair's vhost_dev adds the same
//     regions (QEMU 7.2, queues=2): an identical ADD_MEM_REG only counts
//     one more user, and the region goes with its last REM_MEM_REG.
//   - virtqueue.go, inflight.go: split rings (indirect descriptors,
//     EVENT_IDX) with validated descriptor chains and the INFLIGHT_SHMFD
//     layout for crash recovery.
//   - server.go: listen or dial, one session at a time, re-accept or
//     re-dial after a disconnect. The Device outlives sessions.
//
// Session states: connected ⇄ running (while at least one ring runs) →
// disconnected; the server reports idle before its first session.
//
// Threading: one control goroutine per session and its watchdog; one goroutine per started
// ring runs Device.RunQueue and is the only one that touches that ring;
// one small goroutine per kick eventfd turns kicks into coalesced wakes (a
// capacity-1 channel). Ring words shared with the guest (avail idx, used
// idx, used_event, avail_event) are accessed with 32-bit atomics on the
// aligned word that holds them; the host is assumed little-endian (x86-64,
// arm64), like the rings.
//
// Calls: a call that cannot go out (no call fd yet, or the fd closed under
// the worker) is counted (CallNoFD, CallFailed) and leaves the guest
// untold, so the next completion calls whatever used_event says. A
// SET_VRING_CALL on a running ring calls the new fd once: QEMU looks at
// the notifier it replaces once, right after the message, and a worker may
// still signal the old one after that.
//
// The ring watchdog (watchdog.go; one goroutine per session, once a
// second) is defence in depth against lost notifications: descriptors left
// in a request ring (Queue.Watch) with no kick wake its worker, and
// completions the guest asked to hear of with no call get the call, and
// (request rings, EVENT_IDX) completions called for that the guest has not
// taken get the call again (an interrupt lost after ours), each
// after three looks at an unchanged ring (2 s), counted and logged with the ring's
// state (Server.Log). A non-zero count is a bug to explain.
//
// A fault on guest memory in a ring goroutine (the front-end shrank the
// file behind a region) stops that ring and is counted (MemoryFaults);
// it does not crash the daemon.
//
// Invariants: bytes from QEMU and from guest memory are hostile. Every bad
// message or chain is counted by cause (Counters); a bad message fails that
// request (a failure ack) or, if the stream can no longer be trusted,
// resets the session. Nothing here panics on input, and nothing reaches
// another socket's state.
package vhostuser
