package falcon

import "falconnic/internal/stats"

// EndpointCounters count what the receive pipeline sees before a packet
// reaches a connection, one counter per drop cause [S §9.2.2].
type EndpointCounters struct {
	RxFrames, RxBytes, TxFrames, TxBytes stats.Counter

	RxBadICV         stats.Counter
	RxParseShort     stats.Counter
	RxParseVersion   stats.Counter
	RxParseType      stats.Counter
	RxParseLength    stats.Counter
	RxUnknownCID     stats.Counter
	TxInvalidCIDNack stats.Counter
	RxDeadConn       stats.Counter
}

// Set lists the endpoint counters with help text.
func (c *EndpointCounters) Set() stats.Set {
	return stats.Set{
		{Name: "rx_frames", Help: "frames handed to the endpoint", Counter: &c.RxFrames},
		{Name: "rx_bytes", Help: "bytes of frames handed to the endpoint", Counter: &c.RxBytes},
		{Name: "tx_frames", Help: "frames sent", Counter: &c.TxFrames},
		{Name: "tx_bytes", Help: "bytes of frames sent", Counter: &c.TxBytes},
		{Name: "rx_drop_bad_icv", Help: "integrity check failed (ICV stand-in for PSP)", Counter: &c.RxBadICV},
		{Name: "rx_drop_parse_short", Help: "shorter than its Falcon header", Counter: &c.RxParseShort},
		{Name: "rx_drop_parse_version", Help: "Falcon version is not 1", Counter: &c.RxParseVersion},
		{Name: "rx_drop_parse_type", Help: "reserved packet type", Counter: &c.RxParseType},
		{Name: "rx_drop_parse_length", Help: "length disagrees with the header", Counter: &c.RxParseLength},
		{Name: "rx_drop_unknown_cid", Help: "destination CID names no connection", Counter: &c.RxUnknownCID},
		{Name: "tx_nack_invalid_cid", Help: "invalid-CID NACKs sent for unknown CIDs", Counter: &c.TxInvalidCIDNack},
		{Name: "rx_drop_dead_conn", Help: "packet for a connection that failed", Counter: &c.RxDeadConn},
	}
}

// ConnCounters are one connection's counters.
type ConnCounters struct {
	// Receive drops and duplicates.
	RxReplay        stats.Counter
	RxIVAhead       stats.Counter
	RxDupOld        stats.Counter
	RxOutOfWindow   stats.Counter
	RxDupAcked      stats.Counter
	RxDupPending    stats.Counter
	RxDupNacked     stats.Counter
	RxDupResync     stats.Counter
	RxNoResource    stats.Counter
	RxBadRSN        stats.Counter
	RxLatePullData  stats.Counter
	RxPullTooLong   stats.Counter
	RxGBNOutOfOrder stats.Counter
	RxStaleAck      stats.Counter
	RxAckBeyondNext stats.Counter
	RxStaleNack     stats.Counter
	RxDupNack       stats.Counter
	RxNackBadCode   stats.Counter
	RxTooLong       stats.Counter

	// Traffic.
	RxTxnPackets, TxTxnPackets stats.Counter
	RxBACK, RxEACK, RxNACK     stats.Counter
	TxBACK, TxEACK, TxNACK     stats.Counter
	AckByTimeout, AckByAR      stats.Counter
	AckByCount, AckPiggyback   stats.Counter
	AckByHole, AckPerFlow      stats.Counter
	TxResync, RxResync         stats.Counter

	// Retransmissions by reason.
	RetxRTO, RetxEarly, RetxOWN, RetxRACK stats.Counter
	RetxTLP, RetxNack, RetxGBN            stats.Counter
	RetryExhausted, Fatal                 stats.Counter
	RetxDeferred, RetxULPPoke             stats.Counter
	TLPPaced                              stats.Counter
	RTOResumed, TLPResumed, DelayStalled  stats.Counter
	RTOSpurious, RTOGenuine               stats.Counter
	SharedCopied                          stats.Counter

	// Transactions.
	TxnSubmitted, Delivered, Completed, CompletedError stats.Counter
	RNRWaits, Xoff, Xon                                stats.Counter
	PullReclaimed                                      stats.Counter

	// Congestion control seam.
	RUEEvents, RUEResponses, RUESuppressed stats.Counter
	RUERetxEvents                          [4]stats.Counter // by rue.RetxReason
	Repath, Reroute, RepathHeld            stats.Counter
}

// Set lists the connection counters with help text.
func (c *ConnCounters) Set() stats.Set {
	return stats.Set{
		{Name: "rx_drop_replay", Help: "IV timestamp failed the replay check", Counter: &c.RxReplay},
		{Name: "rx_drop_iv_ahead", Help: "IV timestamp further ahead of the peer's projected clock than ReplayMaxLead", Counter: &c.RxIVAhead},
		{Name: "rx_drop_dup_old", Help: "PSN below the window base (old duplicate)", Counter: &c.RxDupOld},
		{Name: "rx_drop_out_of_window", Help: "PSN beyond the receive window (sets OWN)", Counter: &c.RxOutOfWindow},
		{Name: "rx_drop_dup_acked", Help: "duplicate of an acknowledged PSN", Counter: &c.RxDupAcked},
		{Name: "rx_drop_dup_pending", Help: "duplicate of a push awaiting its ULP ack", Counter: &c.RxDupPending},
		{Name: "rx_drop_dup_nacked", Help: "duplicate of a ULP-NACKed packet (NACK resent)", Counter: &c.RxDupNacked},
		{Name: "rx_drop_dup_resync", Help: "duplicate Resync", Counter: &c.RxDupResync},
		{Name: "rx_drop_no_resource", Help: "request refused for resources (NACK code 1 sent)", Counter: &c.RxNoResource},
		{Name: "rx_drop_bad_rsn", Help: "RSN outside the transaction table", Counter: &c.RxBadRSN},
		{Name: "rx_drop_late_pull_data", Help: "Pull Data for no outstanding pull (acked, discarded)", Counter: &c.RxLatePullData},
		{Name: "rx_pull_data_too_long", Help: "Pull Data longer than requested (op error)", Counter: &c.RxPullTooLong},
		{Name: "rx_drop_gbn_out_of_order", Help: "Go-Back-N receiver: not the next PSN", Counter: &c.RxGBNOutOfOrder},
		{Name: "rx_drop_stale_ack", Help: "ACK whose window base is behind ours", Counter: &c.RxStaleAck},
		{Name: "rx_drop_ack_beyond_next", Help: "ACK acknowledging PSNs never sent", Counter: &c.RxAckBeyondNext},
		{Name: "rx_drop_stale_nack", Help: "NACK for a PSN not outstanding", Counter: &c.RxStaleNack},
		{Name: "rx_drop_dup_nack", Help: "NACK repeated for a packet already resynced", Counter: &c.RxDupNack},
		{Name: "rx_drop_nack_bad_code", Help: "NACK with a reserved code", Counter: &c.RxNackBadCode},
		{Name: "rx_drop_too_long", Help: "Push Data or Pull Request headers longer than the connection MTU", Counter: &c.RxTooLong},
		{Name: "rx_txn_packets", Help: "transaction packets received", Counter: &c.RxTxnPackets},
		{Name: "tx_txn_packets", Help: "transaction packets sent (incl. retransmissions)", Counter: &c.TxTxnPackets},
		{Name: "rx_back", Help: "BACKs received", Counter: &c.RxBACK},
		{Name: "rx_eack", Help: "EACKs received", Counter: &c.RxEACK},
		{Name: "rx_nack", Help: "NACKs received", Counter: &c.RxNACK},
		{Name: "tx_back", Help: "BACKs sent", Counter: &c.TxBACK},
		{Name: "tx_eack", Help: "EACKs sent", Counter: &c.TxEACK},
		{Name: "tx_nack", Help: "NACKs sent", Counter: &c.TxNACK},
		{Name: "ack_by_timeout", Help: "ACKs sent when the coalescing timer expired", Counter: &c.AckByTimeout},
		{Name: "ack_by_ar", Help: "ACKs sent at once for an AR packet or a duplicate", Counter: &c.AckByAR},
		{Name: "ack_by_count", Help: "ACKs sent when the coalescing count was reached", Counter: &c.AckByCount},
		{Name: "ack_by_hole", Help: "ACKs asked for at once by a packet beyond a hole or filling one (AckHoles)", Counter: &c.AckByHole},
		{Name: "ack_per_flow", Help: "ACKs sent on another flow than the latest packet's, timed by that flow's own latest packet", Counter: &c.AckPerFlow},
		{Name: "ack_piggyback", Help: "pending ACK state carried by an outgoing packet", Counter: &c.AckPiggyback},
		{Name: "tx_resync", Help: "Resync packets sent (incl. retransmissions)", Counter: &c.TxResync},
		{Name: "rx_resync", Help: "Resync packets admitted", Counter: &c.RxResync},
		{Name: "retx_rto", Help: "retransmissions on RTO", Counter: &c.RetxRTO},
		{Name: "retx_early", Help: "early retransmissions by OOO distance", Counter: &c.RetxEarly},
		{Name: "retx_own", Help: "retransmissions after an EACK with OWN", Counter: &c.RetxOWN},
		{Name: "retx_rack", Help: "RACK retransmissions", Counter: &c.RetxRACK},
		{Name: "retx_tlp", Help: "TLP probes", Counter: &c.RetxTLP},
		{Name: "retx_nack", Help: "retransmissions prompted by a NACK", Counter: &c.RetxNack},
		{Name: "retx_gbn", Help: "Go-Back-N retransmissions", Counter: &c.RetxGBN},
		{Name: "retx_ulp_poke", Help: "resends on RTO of packets the peer reported received and holds for its ULP (not lost: the resend draws a fresh ACK)", Counter: &c.RetxULPPoke},
		{Name: "rto_resumed", Help: "packet RTO deadlines due when the host resumed a stalled endpoint (Resumed), restarted instead of fired", Counter: &c.RTOResumed},
		{Name: "tlp_resumed", Help: "tail-loss probes due when the host resumed a stalled endpoint (Resumed), restarted instead of sent", Counter: &c.TLPResumed},
		{Name: "delay_stalled", Help: "ACK/NACK delay samples kept from the RUE and the RTT estimate: the packet left before the host last resumed a stalled endpoint (Resumed), so its delay measured the host", Counter: &c.DelayStalled},
		{Name: "rto_spurious", Help: "RTO episodes found spurious (the ACK of the first resent packet answered the original: Eifel detection); the RUE was told (EventUndo)", Counter: &c.RTOSpurious},
		{Name: "rto_genuine", Help: "RTO episodes whose first resent packet was acknowledged only after the resend reached the peer", Counter: &c.RTOGenuine},
		{Name: "tlp_paced", Help: "tail-loss probes held for a paced connection's inter-packet gap", Counter: &c.TLPPaced},
		{Name: "retx_deferred", Help: "request resends held back by ORRC ≥ ncwnd", Counter: &c.RetxDeferred},
		{Name: "shared_copied", Help: "packets sent by reference (RefLink) copied for a resend or Resync; their buffer stays with the receiver", Counter: &c.SharedCopied},
		{Name: "retry_exhausted", Help: "packets that hit max retransmissions (Resync 0x3)", Counter: &c.RetryExhausted},
		{Name: "fatal", Help: "connection failed (Resync exhausted)", Counter: &c.Fatal},
		{Name: "txn_submitted", Help: "transactions accepted from the ULP", Counter: &c.TxnSubmitted},
		{Name: "txn_delivered", Help: "requests delivered to the target ULP", Counter: &c.Delivered},
		{Name: "txn_completed", Help: "completions to the initiator ULP", Counter: &c.Completed},
		{Name: "txn_completed_error", Help: "completions with a non-ok status", Counter: &c.CompletedError},
		{Name: "rnr_waits", Help: "RNR delays taken (push retransmit or pull redelivery)", Counter: &c.RNRWaits},
		{Name: "pull_reclaimed", Help: "delivered pulls reclaimed because the target ULP never answered", Counter: &c.PullReclaimed},
		{Name: "xoff", Help: "submissions refused (Xoff to the ULP)", Counter: &c.Xoff},
		{Name: "xon", Help: "Xon signals to the ULP", Counter: &c.Xon},
		{Name: "rue_events", Help: "events posted to the RUE", Counter: &c.RUEEvents},
		{Name: "rue_responses", Help: "RUE responses applied", Counter: &c.RUEResponses},
		{Name: "plb_repath", Help: "flow labels re-randomised on the RUE's request (PLB)", Counter: &c.Repath},
		{Name: "rue_suppressed", Help: "events folded into an outstanding one", Counter: &c.RUESuppressed},
		{Name: "rue_retx_rto", Help: "RETX events posted for RTO retransmissions", Counter: &c.RUERetxEvents[0]},
		{Name: "rue_retx_early", Help: "RETX events posted for early (OOO distance) retransmissions", Counter: &c.RUERetxEvents[1]},
		{Name: "rue_retx_rack", Help: "RETX events posted for RACK retransmissions", Counter: &c.RUERetxEvents[2]},
		{Name: "rue_retx_tlp", Help: "RETX events posted for TLP probes", Counter: &c.RUERetxEvents[3]},
		{Name: "reroute", Help: "flow labels re-randomised after an RTO on the flow (protective reroute)", Counter: &c.Reroute},
		{Name: "plb_repath_held", Help: "PLB repaths ignored while a protective reroute's hold lasts", Counter: &c.RepathHeld},
	}
}

// Snapshot returns the endpoint's counters plus every connection's, summed
// by name (for status displays). It walks the connection table, so call it
// on the endpoint's goroutine; the counters themselves may be read anywhere.
func (e *Endpoint) Snapshot() map[string]uint64 {
	m := e.Stats.Set().Snapshot()
	for _, c := range e.list {
		for _, d := range c.Stats.Set() {
			m[d.Name] += d.Counter.Load()
		}
	}
	return m
}
