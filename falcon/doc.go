// Package falcon is falconnic's emulated transport silicon: the Falcon
// reliable transport (OCP Falcon spec Rev 0.9; digest in
// notes/falcon-spec.md) as a sans-I/O engine.
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
// Congestion control is behind the RUE seam (package rue): the PDL posts
// events (ACK, NACK, retransmit) with its measurements and enforces the
// response's fcwnd, ncwnd, inter-packet gap and RTO.
//
// The envelope: every frame is the Falcon packet followed by a 4-byte IV
// timestamp and a 4-byte ICV, standing in for PSP (see envelope.go).
//
// Error paths follow [S §11]: retransmission exhaustion turns the packet into
// a Resync (code 0x3) and completes the transaction with kCmplLocalTO; a
// Resync that exhausts its attempts kills the connection (kCmplDeadConn for
// everything outstanding). CIE/NRE/invalid-CID NACKs make the initiator
// resync the PSN and complete in error once the Resync is acknowledged.
package falcon
