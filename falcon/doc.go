// Package falcon is falconnic's emulated transport silicon: the Falcon
// reliable transport (OCP Falcon spec Rev 0.9) as a sans-I/O engine.
//
// An Endpoint is one NIC's Falcon engine. Its connection table is keyed by
// the local CID (the DCID peers put on the wire); the connection manager
// installs connections with Connect (CIDs, ordering, initial PSNs and RSNs,
// window and retry limits). Events come in through three doors — Receive (a
// frame from the link), the ULP calls on a Conn (Push, Pull, AckPush,
// NackPush, PullData, NackPull) and OnTimer (at NextDeadline) — and actions go
// out as frames to the Link and callbacks to the ULP. Time comes from the
// injected clock; nothing here starts goroutines, sleeps or allocates per
// packet in steady state (transmit slots keep their buffers, transaction
// tables are rings).
//
// Layers inside a Conn:
//
//	ULP ─Push/Pull─▶ TL initiator table (tl.Initiator, RSN order)
//	                  │ pump: gating by fcwnd/ncwnd/pacing
//	                  ▼
//	             PDL TX windows (pdl.TxWindow ×2) ──frame──▶ Link
//	Link ─frame─▶ receive pipeline: ICV → parse → CID → replay → window
//	             PDL RX windows (pdl.RxWindow ×2) + ACK coalescer
//	                  │ admission (resources, RSN table)
//	                  ▼
//	             TL target table (tl.Target) ─OnRequest─▶ ULP
//
// The API in short: New(Config) an Endpoint; Connect(ConnConfig) per
// connection (Close tears it down); feed frames to Receive (it matches
// link.Receiver; ReceiveMarked takes the fabric's hop count and ECN mark,
// which the connection echoes in its ACKs); call OnTimer(now) at
// NextDeadline (connections with timers sit in a deadline heap, so an
// endpoint with thousands of them costs per due timer); submit with Conn.Push
// and Conn.Pull (ErrXoff until ULP.OnXon); answer ULP.OnRequest with
// AckPush/NackPush or PullData/NackPull; completions arrive in
// ULP.OnCompletion with a tl.Status. Counters: Endpoint.Stats, Conn.Stats,
// Endpoint.Snapshot; a driver that hands over frames in bursts brackets
// each with BeginBurst/EndBurst, and the per-packet counters of the burst
// are published at EndBurst (hot.go). Each event reads the clock once
// (event.go): the packets it sends and the deadlines it arms share that
// reading. The package does no I/O and links none: its test
// peer (two endpoints over an in-memory link) and the experiments are in
// falcon/sim, the links in falcon/link, and internal/archtest keeps it so.
//
// Congestion control is behind the RUE seam (package rue): the PDL posts
// events (ACK, NACK, retransmit) with its measurements and enforces the
// response's fcwnd, ncwnd, inter-packet gap and RTO.
//
// The envelope: every frame is the Falcon packet followed by a 4-byte IV
// timestamp and a 4-byte ICV, standing in for PSP (see envelope.go). A link
// that never leaves the process (InProcessLink: two NICs of one daemon)
// carries the same layout with the ICV left zero and unchecked
// (ReceiveInProcess).
//
// Payloads are copied once: Push/PullData (and their Gather forms, which
// take a ULP header plus a scatter-list range) copy into a frame with room
// for the Falcon header, which is written in place when the packet is
// first sent; the frame then belongs to the PDL slot for retransmission.
// Their Fill forms (PushFill, PullDataFill) have the ULP write the payload
// into that frame itself, so data read from guest memory is copied only
// there. PushFrame copies nothing: the ULP builds the packet in its own
// buffer, which the PDL slot sends (and resends) from and gives back with
// the push's completion once the slot is acknowledged; over a RefLink its
// first transmission goes by reference, so the receiver reads the ULP's
// buffer in place. A push or Pull Data of 512 bytes or more over a RefLink
// is built in a shared frame buffer (falcon/framebuf: pooled,
// reference-counted, the payload placed on a page) that the receiver
// takes over (SendShared) and may keep past the acknowledgement, as the
// NVMe target keeps a write's data for its O_DIRECT write; the slot holds
// its own reference, never writes the buffer again and lets it go when
// the packet is acknowledged (a resend goes from a copy).
//
// Error paths follow [S §11]: retransmission exhaustion turns the packet into
// a Resync (code 0x3) and completes the transaction with kCmplLocalTO; a
// Resync that exhausts its attempts kills the connection (kCmplDeadConn for
// everything outstanding). CIE/NRE/invalid-CID NACKs make the initiator
// resync the PSN and complete in error once the Resync is acknowledged.
//
// Design decisions where the spec is silent or ambiguous (see the digest's
// §C for the open questions):
//
//   - Receiver window check uses PSN < base + size (§C.6). The transmitter
//     never sends beyond min(fcwnd, receiver window); OWN and EACK-OWN cover
//     misbehaving or misconfigured peers.
//   - An ACK is an EACK whenever any receive state lies beyond the bases
//     (EACK is always legal; the spec requires it only for holes): the
//     transmitter then learns which pushes wait for their ULP ack and resends
//     those at the ULP-RTO pace without spending attempts.
//   - ACK coalescing counts as Isekai does (admitted 2, push awaiting its
//     ULP ack 1, duplicate or out-of-window 2; threshold 10, timeout 8 µs).
//     A NACK or an outgoing packet that carries all receive state resets
//     the coalescer. Duplicates arm the timer (the spec's "drop and ACK");
//     a duplicate with AR is acknowledged at once.
//   - A resend asked for by a resource or RNR NACK is not an attempt: it
//     neither backs off nor counts toward MaxRetries, and the NACK resets
//     the packet's backoff (the receiver is reachable).
//   - Retransmissions carry AR (the ACK that stops them should come soon).
//     Request resends are gated by ORRC < ncwnd; fcwnd does not hold them
//     back (their PSNs are below base + fcwnd unless the window shrank).
//   - Max retransmissions follow [S §11]: Resync 0x3, then a fatal error if
//     the Resync exhausts too (§C.12). RTO backs off exponentially, capped.
//   - An out-of-window NACK (code 5, Isekai's window drop) resends that
//     packet; in Go-Back-N mode it is the "sequence error" that resends
//     everything from the NACKed PSN.
//   - Pull Data longer than requested completes with kCmplOpErr; shorter is
//     normal (§C.13). Pull Data for no outstanding pull is acked and dropped.
//   - A Resync for a request-window packet consumes the original window's
//     PSN (§C.21); the target marks the RSN void so ordered delivery skips it.
//   - RNR on an ordered connection (§C.18): only the refused RSN is NACKed;
//     delivery rewinds to it and requests after it wait in the reorder
//     buffer. The ULP keeps its own ordering promise by refusing later
//     requests while an earlier one is RNR-pending.
//   - Ordered connections send new transactions strictly in RSN order (one
//     FIFO over both windows) and resend timed-out requests in RSN order
//     across both windows (UR rule); unordered ones use the same FIFO.
//   - There is no CM time exchange yet: a connection adopts the peer's IV
//     time from its first frame for the replay check. An IV further ahead
//     of the peer's projected clock than Config.ReplayMaxLead is dropped
//     (rx_drop_iv_ahead) and does not move that clock, so one datagram
//     cannot make every later one a replay.
//   - Without an RUE windows stay at their initial values and the RTO at
//     its initial value; firmware.Fixed is the default RUE to plug in.
//   - Multipath: new packets pick a flow by ConnConfig.PathPolicy (round
//     robin, fcwnd-weighted, or max-open over per-flow in-flight counts);
//     retransmissions keep their flow. PLB repaths come from the RUE
//     (RandomizePath); protective reroute repaths a flow on its RTO (and,
//     with RerouteOnProbe, on RACK/TLP) and holds PLB off it for a while.
//     Per-flow state is the CC state, the in-flight count and the label;
//     RACK/TLP and ACK coalescing are still per connection, not per
//     (connection, flow).
//   - Go-Back-N is a baseline only: with small resource pools it can
//     deadlock (both ends' pools full of pulls whose Pull Data waits behind a
//     refused push that only a selective receiver would get past), which is
//     exactly what Falcon's selective acceptance and CR#2 avoid.
//   - NextDeadline is O(1) (a cached minimum every entry point lowers);
//     OnTimer scans the connection list when a deadline is due. A deadline
//     heap is the next step for NICs with very many connections.
package falcon
