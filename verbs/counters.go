package verbs

import "falconnic/internal/stats"

// Counters are one verbs engine's counters: work done and every error or
// drop by cause.
type Counters struct {
	SendWQEs, RecvCQEs, SendCQEs      stats.Counter
	TxPush, TxPull, TxBytes           stats.Counter
	RxWriteBytes, RxSendBytes         stats.Counter
	ReadResponses, AtomicsDone        stats.Counter
	PullXoff, PullLost                stats.Counter
	WQEBadOpcode, WQEBadSGE, WQERead  stats.Counter
	WQETooLong, LocalProtErr          stats.Counter
	WQEBadAV, RxUDBadAddr             stats.Counter
	WQEForeignSGID                    stats.Counter
	RxParseErr, RxNoQP, RxBadQPState  stats.Counter
	RxInvalidCID, RxRKeyErr, RxBounds stats.Counter
	RxNoRecvWQE, RxRNRExhausted       stats.Counter
	RxLenErr, RxUDQKeyDrop, RxUDDrop  stats.Counter
	RxBadPull                         stats.Counter
	CplStale, CplBadResponse          stats.Counter
	CplRetryExc, CplRemoteErr         stats.Counter
	CQOverflow, CQRingErr             stats.Counter
	QPErrors, Flushed, Xoff           stats.Counter
	Reclaimed                         stats.Counter
	FastReg, FastRegErr               stats.Counter
	LocalInv, LocalInvErr             stats.Counter
	RxRemoteInv, RxRemoteInvErr       stats.Counter
	CQArmWordContended                stats.Counter
	// Doorbell polling (poll.go).
	Polls, PollFound                       stats.Counter
	PollWindowsStarted, PollWindowsExpired stats.Counter
	PollWindowsExtended                    stats.Counter
	PollFlagSets, PollFlagClears           stats.Counter
	PollRecheckFound                       stats.Counter
	PollLate, PollStarvedOff, PollIdleOff  stats.Counter
	PollDoorbellFlagSet                    stats.Counter
	PollFlagForeign, PollRingErr           stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "send_wqes", Help: "send WQEs taken from SQ rings", Counter: &c.SendWQEs},
		{Name: "send_cqes", Help: "send-side CQEs written", Counter: &c.SendCQEs},
		{Name: "recv_cqes", Help: "receive-side CQEs written", Counter: &c.RecvCQEs},
		{Name: "tx_push", Help: "push transactions submitted", Counter: &c.TxPush},
		{Name: "tx_pull", Help: "pull transactions submitted", Counter: &c.TxPull},
		{Name: "tx_bytes", Help: "payload bytes submitted", Counter: &c.TxBytes},
		{Name: "rx_write_bytes", Help: "bytes placed by remote WRITEs", Counter: &c.RxWriteBytes},
		{Name: "rx_send_bytes", Help: "bytes placed by SENDs", Counter: &c.RxSendBytes},
		{Name: "read_responses", Help: "READ responses sent", Counter: &c.ReadResponses},
		{Name: "atomics_done", Help: "atomic operations executed as responder", Counter: &c.AtomicsDone},
		{Name: "pull_xoff", Help: "READ or atomic responses Falcon had no Tx data room for: held until it has (Xon)", Counter: &c.PullXoff},
		{Name: "pull_lost", Help: "held READ or atomic responses dropped: their connection closed or the pull was gone", Counter: &c.PullLost},
		{Name: "wqe_bad_opcode", Help: "send WQE with an unsupported opcode for the QP type", Counter: &c.WQEBadOpcode},
		{Name: "wqe_bad_sge", Help: "WQE with too many SGEs or a length disagreeing with its SGEs", Counter: &c.WQEBadSGE},
		{Name: "wqe_read_err", Help: "WQE could not be read from guest memory", Counter: &c.WQERead},
		{Name: "wqe_too_long", Help: "message longer than allowed (UD over the MTU, inline over the limit)", Counter: &c.WQETooLong},
		{Name: "wqe_bad_av", Help: "kernel UD WQE whose inline address vector names no RoCEv2 path", Counter: &c.WQEBadAV},
		{Name: "wqe_foreign_sgid", Help: "UD WQEs refused: the source GID is not one of the NIC's own (SetGIDs)", Counter: &c.WQEForeignSGID},
		{Name: "local_prot_err", Help: "SGE names memory outside its MR, a wrong PD or missing local access", Counter: &c.LocalProtErr},
		{Name: "rx_parse_err", Help: "RDMA headers failed to parse", Counter: &c.RxParseErr},
		{Name: "rx_no_qp", Help: "request for a QP that does not exist", Counter: &c.RxNoQP},
		{Name: "rx_bad_qp_state", Help: "request for a QP not in RTR/RTS or of another type", Counter: &c.RxBadQPState},
		{Name: "rx_invalid_cid", Help: "request on a connection other than the QP's", Counter: &c.RxInvalidCID},
		{Name: "rx_rkey_err", Help: "rkey unknown, wrong PD or access not granted", Counter: &c.RxRKeyErr},
		{Name: "rx_bounds", Help: "remote access outside the MR", Counter: &c.RxBounds},
		{Name: "rx_no_recv_wqe", Help: "SEND found no receive WQE (RNR NACK)", Counter: &c.RxNoRecvWQE},
		{Name: "rx_rnr_exhausted", Help: "RNR retries exhausted; SEND completed in error", Counter: &c.RxRNRExhausted},
		{Name: "rx_len_err", Help: "SEND longer than its receive WQE", Counter: &c.RxLenErr},
		{Name: "rx_ud_qkey_drop", Help: "UD SEND with a wrong Q_Key dropped", Counter: &c.RxUDQKeyDrop},
		{Name: "rx_ud_bad_addr", Help: "UD message with a short or malformed address header dropped", Counter: &c.RxUDBadAddr},
		{Name: "rx_ud_drop", Help: "UD SEND dropped (no receive WQE or too long)", Counter: &c.RxUDDrop},
		{Name: "rx_bad_pull", Help: "pull whose length cannot hold the response", Counter: &c.RxBadPull},
		{Name: "cpl_stale", Help: "transport completion for a finished op or a destroyed QP", Counter: &c.CplStale},
		{Name: "cpl_bad_response", Help: "response data malformed or of the wrong length", Counter: &c.CplBadResponse},
		{Name: "cpl_retry_exc", Help: "transport gave up (retries exhausted, dead connection)", Counter: &c.CplRetryExc},
		{Name: "cpl_remote_err", Help: "remote side completed an op in error", Counter: &c.CplRemoteErr},
		{Name: "cq_overflow", Help: "CQE dropped because the CQ was full (CQ error event)", Counter: &c.CQOverflow},
		{Name: "cq_ring_err", Help: "CQ ring not writable in guest memory", Counter: &c.CQRingErr},
		{Name: "qp_errors", Help: "QPs moved to the error state", Counter: &c.QPErrors},
		{Name: "flushed", Help: "WQEs completed with a flush error", Counter: &c.Flushed},
		{Name: "xoff", Help: "submissions refused by the transport (resumed on Xon)", Counter: &c.Xoff},
		{Name: "reclaimed", Help: "objects destroyed by a driver reset or guest death", Counter: &c.Reclaimed},
		{Name: "fast_reg", Help: "REG_MR work requests that made a fast-registration MR valid", Counter: &c.FastReg},
		{Name: "fast_reg_err", Help: "REG_MR work requests refused (MR not free, key, access, page list)", Counter: &c.FastRegErr},
		{Name: "local_inv", Help: "LOCAL_INV work requests executed", Counter: &c.LocalInv},
		{Name: "local_inv_err", Help: "LOCAL_INV work requests naming no fast-registration MR of the QP's PD", Counter: &c.LocalInvErr},
		{Name: "rx_remote_inv", Help: "MRs invalidated by a peer's SEND_WITH_INV", Counter: &c.RxRemoteInv},
		{Name: "rx_remote_inv_err", Help: "SEND_WITH_INV naming no fast-registration MR of the QP's PD", Counter: &c.RxRemoteInvErr},
		{Name: "cq_arm_word_contended", Help: "CQ arm word kept changing under the NIC; the event was sent anyway", Counter: &c.CQArmWordContended},
		{Name: "poll_polls", Help: "doorbell polling: reads of an SQ's producer index in a polling window", Counter: &c.Polls},
		{Name: "poll_found", Help: "doorbell polling: polls that found posted WQEs (each a DB_SQ frame the driver did not send)", Counter: &c.PollFound},
		{Name: "poll_windows_started", Help: "doorbell polling: windows opened when a drain found the SQ empty", Counter: &c.PollWindowsStarted},
		{Name: "poll_windows_expired", Help: "doorbell polling: windows that ended without a post (the window shrinks)", Counter: &c.PollWindowsExpired},
		{Name: "poll_windows_extended", Help: "doorbell polling: windows renewed by a post a poll found (the window grows)", Counter: &c.PollWindowsExtended},
		{Name: "poll_flag_sets", Help: "doorbell polling: stores of 1 to an SQ's polling flag before draining", Counter: &c.PollFlagSets},
		{Name: "poll_flag_clears", Help: "doorbell polling: stores of 0 to an SQ's polling flag, each followed by a re-read of the producer index", Counter: &c.PollFlagClears},
		{Name: "poll_recheck_found", Help: "doorbell polling: re-reads after clearing the flag that found a post (the race with the driver, caught)", Counter: &c.PollRecheckFound},
		{Name: "poll_late", Help: "doorbell polling: polls that ran more than the late threshold (50 µs) after they were due", Counter: &c.PollLate},
		{Name: "poll_starved_off", Help: "doorbell polling: switched off for a back-off after 3 late polls within 10 ms (the daemon is short of CPU)", Counter: &c.PollStarvedOff},
		{Name: "poll_idle_off", Help: "doorbell polling: SQ windows switched off after 16 windows in a row without a post", Counter: &c.PollIdleOff},
		{Name: "poll_doorbell_flag_set", Help: "doorbell polling: DB_SQ frames received while the SQ's flag was set (the driver raced the store, or ignores the flag)", Counter: &c.PollDoorbellFlagSet},
		{Name: "poll_flag_foreign", Help: "doorbell polling: flag word found holding another value than the NIC stored (the guest wrote it, or a NIC before a restart left it set: cleared at CREATE_QP)", Counter: &c.PollFlagForeign},
		{Name: "poll_ring_err", Help: "doorbell polling: flag word or producer index not accessible in guest memory", Counter: &c.PollRingErr},
	}
}
