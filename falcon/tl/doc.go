// Package tl holds the state of Falcon's transaction layer [S §8]: the
// initiator's and target's transaction tables keyed by RSN, completion
// status codes, and the NIC's resource pools with their head-of-line reserve.
// The falcon package drives it; nothing here does I/O or reads a clock.
//
// Transactions are Push (initiator sends ≤ 1 MTU of data, the target ULP acks
// it) and Pull (initiator asks, the target ULP answers with Pull Data ≤ 1 MTU).
// RSNs are assigned by the initiator, per connection and direction.
//
// Initiator slot states (Initiator, ring indexed by RSN):
//
//	queued ──sent──▶ sent ──(push acked | pull data in | error)──▶ done ──▶ completed ──base passes──▶ free
//
// On an ordered connection a done slot is completed to the ULP only when all
// earlier RSNs completed; on an unordered one at once.
//
// Target slot states (Target, ring indexed by the peer's RSN):
//
//	received ──▶ delivered ──(push: ULP ack → finished; RNR → rnr-wait)
//	                        ──(pull: ULP data → responding → data acked → finished)
//	void (Resync for a lost transaction) ──▶ finished
//
// On an ordered connection requests are delivered in RSN order (void RSNs
// are skipped); on an unordered one as they arrive.
//
// Resources [S §8.2]: four pools (Tx packet, Tx buffer, Rx packet, Rx buffer)
// carved into regions: ULP requests (initiator Tx, and Rx pre-allocated for
// Pull Data), ULP data (target Pull Data Tx) and network requests (target
// Rx), the latter with a reserve only the head-of-line request of an ordered
// connection may use (deadlock rule CR#3). A request the target cannot admit
// is dropped with a resource NACK (code 1) and retransmitted later.
package tl
