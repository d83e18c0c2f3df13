// Package litmus is a store→load ordering litmus test between a guest vCPU
// and a host thread that share one page of guest RAM.
//
// Two tests (Test), both of which a store→load reordering breaks:
//
//   - Peterson: the two sides run Peterson's mutual-exclusion lock against
//     each other (Play).
//   - StoreBuffering: the classic SB litmus, one round at a time, the host
//     starting each round and aiming its store at the guest's (PlaySB).
//
// Peterson's lock is correct only if each side's store of its own flag is
// visible to the other side before its own load of the other side's flag:
// it needs store→load order, the one reordering x86 (TSO) allows, which a
// full barrier (a LOCK-prefixed instruction or XCHG) forbids. Go's
// atomic.Store on amd64 is XCHG, so both sides' entry protocol is correct on
// real hardware. QEMU 7.2's TCG, translating for a machine with one possible
// vCPU, runs the guest's XCHG as a plain load and store (see qemu.smpArg):
// then the guest's flag store can still sit in the host CPU's store buffer
// when the guest reads the host's flag, both sides enter the critical
// section together, and the checks inside it count the violation; in the
// store-buffering test both sides load the other's old value.
//
// Roles: the guest program (guest/litmus) maps an anonymous page, writes
// the header (Init) and plays Guest; the host (falconnic vm litmus) finds
// the page in the guest's RAM file by its magic (Scan), maps it, marks it
// attached and plays Host until the guest is done, reads both sides'
// results and marks the page collected. The guest keeps the page until then:
// a page the guest process freed could be reused by the guest kernel, and
// the host must never write to it. Only the page is shared.
//
// Page layout (little-endian 64-bit words; the lock's words each on their
// own 64-byte cache line):
//
//	0    magic           random, from the guest's command line
//	8    ^magic          so a stray copy of the magic alone does not match
//	16   version         Version
//	24   rounds          the guest's round count
//	32   state           StateReady (guest) → StateAttached → StateCollected (host)
//	40   test            Peterson or StoreBuffering
//	64   flag[Guest]     1 while the guest wants or holds the lock
//	128  flag[Host]
//	192  turn            the side that yields when both want the lock
//	256  occupant        0, or 1+side of the side inside the critical section
//	320  counter         bumped with a plain load and store inside it
//	384  done[Guest]     set when a side has finished its rounds
//	392  done[Host]
//	400  rounds[Guest]   each side's rounds and violations, written when done
//	408  rounds[Host]
//	416  violations[Guest]
//	424  violations[Host]
//	432  old[Guest]      sb: rounds in which a side loaded an old value
//	440  old[Host]
//	512  go              sb: the round the host has started
//	576  x[Guest]        sb: the round of each side's latest store
//	640  x[Host]
//	704  ack             sb: 2×round + (the guest loaded an old x[Host])
//
// In Peterson, a violation is a round in which a side found the other
// inside the critical section (occupant not 0 on entry, or not its own on
// exit). The counter ends below the sum of both sides' rounds by the
// increments that overlapping critical sections lost. In StoreBuffering, a
// violation is a round in which both sides loaded the other's old value;
// the host counts them.
//
// Everything the host reads from the page is the guest's and untrusted: it
// only ever compares and reports those words.
package litmus
