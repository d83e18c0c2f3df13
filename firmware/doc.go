// Package firmware is the software of the NIC's embedded CPU: the Rate
// Update Engine (RUE, the paper's FAE) algorithms that sit behind falcon's
// rue.Engine seam, and later the connection manager.
//
// Fixed keeps every connection's fabric and NIC windows at configured
// values and only tracks the smoothed RTT to set the retransmission timeout
// (RTO = max(scalar × smoothed RTT, min RTO), [S §10.3.4]). The daemon
// runs Swift by default; a NIC's config (or a run-time swap) may choose
// Fixed (device/port's FirmwareSpec, which also holds the daemon-scale
// targets).
//
// Swift is Falcon's congestion control [S §10.3]: per connection flow, a
// delay-based AIMD on the fabric window (additive increase below a target
// delay, a multiplicative decrease at most once per RTT above it, guarded by
// the 24-bit fabric marker), cuts on RTO retransmissions (max_mdf, the
// floor after RetxLimit RTOs; early, RACK and TLP repairs leave the window
// alone unless EarlyRetxCuts, as in Isekai, where only timeouts reach the
// RUE), pacing below one packet, and an AIMD on the NIC
// window from the receiver's rx-buffer level. When the datapath finds
// that the timeouts behind its RTO cuts were spurious (rue.EventUndo,
// Eifel), Swift restores the window they found. With PLB on, persistent
// congestion on a flow asks the datapath for a new path (RandomizePath).
// Swift keeps no per-connection state of its own: everything round-trips
// through the event and response records (see the state layout in
// swift.go), so it can replace another engine at run time.
//
// Targets. Isekai's defaults (25 µs base, 1 µs per hop, 100 µs of flow
// scaling) are a datacenter's. The emulated fabric of falcon/fabric has
// 100 Gb/s links, an unloaded fabric delay of ≈ 4 µs within a rack (one
// switch) and ≈ 11 µs across racks (three), so ≈ 3.5 µs per switch, and
// 512 KiB per port (≈ 42 µs of queue at line rate): Isekai's targets would
// let queues reach or pass the port limit and turn congestion into drops.
// SwiftConfig therefore defaults to a 7 µs base and 2 µs per hop (9 µs
// within a rack, 13 µs across racks: a few µs of queue over the unloaded
// delay on either path) and 20 µs of flow scaling, so even the smallest
// windows aim under the port limit. The benches found these settings
// sensitive: a 12 µs cross-rack target (9 µs + 3 × 1 µs) loses multipath's
// max-open advantage over round robin, 10 µs + 1 µs per hop misses
// incast 5×100 fairness by a hair (0.9896).
//
// Pacing convention. Below one packet of fcwnd the datapath keeps one
// packet in flight and sends the next no sooner than IPG after the
// previous send. Swift therefore returns IPG = srtt / fcwnd — the whole
// send interval — where Isekai (whose hardware counts the gap from the
// ACK) returns srtt / fcwnd − srtt. RTO = max(2 × srtt + IPG, min RTO).
//
// Async wraps any engine to answer later (as a firmware core with an event
// queue does): Handle queues a copy of the event and returns false; Drain
// computes the queued responses and hands them to the datapath.
package firmware
