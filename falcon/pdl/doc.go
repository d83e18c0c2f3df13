// Package pdl holds the state machines of Falcon's packet delivery layer
// [S §9]: the transmitter's and receiver's sliding windows, ACK coalescing and
// the RTT estimator. The falcon package drives them per connection and per
// direction; nothing here does I/O, reads a clock or allocates after setup.
//
// Every connection end has two windows per direction, each with its own
// 32-bit PSN space [S §3]: the request window (Pull Requests, receiver size
// 64) and the data window (Push Data, Pull Data, Resync of data packets,
// receiver size 128).
//
// Transmitter window (TxWindow): PSNs in [Base, Next) are outstanding. Each
// has a slot in a power-of-two ring holding its retransmission state
// (deadline, attempts, received-by-peer bit, packet bytes):
//
//	free ──Alloc──▶ inflight ──ack (cumulative W2/W3 or EACK bit)──▶ acked
//	                  │  ▲                                            │
//	                  └──┘ RTO / early / RACK / TLP retransmit        ▼
//	                                         base passes it ──▶ free (reused)
//
// Receiver window (RxWindow): PSN < Base is an old duplicate; PSN ≥ Base+Size
// is beyond the window (OWN); otherwise the ack and rx bitmaps say whether it
// is new, a duplicate of an acked packet, or a duplicate of one received but
// not yet acknowledged (Push Data awaits its ULP ack) [S §9.2.2.4]. Base
// advances over the run of acked bits at its start; both bitmaps shift.
//
// Invariants: Base ≤ Next (serially); Next−Base ≤ ring size; the ack bitmap
// bit 0 is always clear (an acked base would have advanced); rx ⊇ ack.
package pdl
