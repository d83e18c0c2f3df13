// Package rue defines the seam between Falcon's datapath and its congestion
// control: the Rate Update Engine (RUE, the paper's "programmable engine",
// also called FAE) of [S §10.6].
//
// The packet delivery layer measures (t1..t4 delay samples, rx-buffer level,
// acked packet counts, retransmissions, NACK codes) and enforces (fcwnd,
// ncwnd, inter-packet gap, RTO); the RUE only computes. They talk through
// records: the datapath posts an Event for a connection flow, the RUE answers
// with a Response. The RUE is stateless with respect to the datapath: all CC
// state (rtt_state, delay_state, time markers, cc_opaque) round-trips in the
// records, so the algorithm can be swapped at run time.
//
// An Engine may answer at once (Handle returns the response and true) or
// later, from another context, through the datapath's apply entry point (the
// falcon endpoint's ApplyRUE). The datapath keeps at most one outstanding
// event per connection flow (Isekai's rule, digest §6.9), accumulating the
// acked count meanwhile.
//
// Per-flow: every record names a flow (0..3, the low 2 bits of the flow
// label) so multipath can keep per-flow windows; a connection's fabric window
// is the sum over its flows.
package rue
