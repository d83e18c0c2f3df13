// Package vhostusertest is a pure-Go vhost-user front-end simulator for
// tests: it plays QEMU 7.2's part so back-ends run without QEMU.
//
//   - GuestMemory: guest RAM in one memfd, exposed as one region or two
//     (the PCI-hole layout: two regions of one memfd at different offsets).
//   - DriverQueue: the guest driver's side of a split ring: post chains
//     (direct or indirect), publish, kick, read used elements, EVENT_IDX
//     words.
//   - Frontend: replays the message sequences recorded from QEMU 7.2
//     (net with 1 and 2 queue pairs, blk with
//     SeaBIOS first and Linux after a reset, reconnects with the used idx
//     as base) and keeps a one-line-per-message transcript.
package vhostusertest
