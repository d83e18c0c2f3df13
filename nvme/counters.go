package nvme

import "falconnic/internal/stats"

// Counters are an engine's counters: traffic, and every drop or refusal
// by cause.
type Counters struct {
	// initiator
	Submitted, SubmitInvalid, Completed, CompletedInError, Cancelled, TimedOut stats.Counter
	NCMDsSent, ReadResponses, WriteCompletions                                 stats.Counter
	WriteDataSent                                                              stats.Counter
	TableFull, TxXoff                                                          stats.Counter
	RxStaleTag, RxWrongResponse, RxPullUnknown                                 stats.Counter
	RxPullShort                                                                stats.Counter
	// target
	Commands, Responses, ErrorResponses, PullsSent stats.Counter
	BadOpcode, BadField, BadNamespace, TargetBusy  stats.Counter
	PathOwned, PathShareFull, WriteFenced          stats.Counter
	RxWriteDataInvalid, RxWriteDataMismatch        stats.Counter
	BackendBusy, IOStale                           stats.Counter
	KeptFrames, LentChunks                         stats.Counter
	// both
	RxBadHeader, RxBadLength, RxUnknownConn stats.Counter
	TxnFailed, RefuseLost                   stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "submitted", Help: "host commands accepted by Submit", Counter: &c.Submitted},
		{Name: "submit_invalid", Help: "host commands refused by Submit as malformed", Counter: &c.SubmitInvalid},
		{Name: "completed", Help: "host commands completed", Counter: &c.Completed},
		{Name: "completed_in_error", Help: "host commands completed with an error status", Counter: &c.CompletedInError},
		{Name: "cancelled", Help: "host commands detached from their buffers (device stopped)", Counter: &c.Cancelled},
		{Name: "timed_out", Help: "host commands failed by the command timeout", Counter: &c.TimedOut},
		{Name: "ncmds_sent", Help: "Read/Write Requests pushed (one per nCMD)", Counter: &c.NCMDsSent},
		{Name: "read_responses", Help: "Read Responses received", Counter: &c.ReadResponses},
		{Name: "write_completions", Help: "Write Completions received", Counter: &c.WriteCompletions},
		{Name: "write_data_sent", Help: "Write Data Responses sent with data", Counter: &c.WriteDataSent},
		{Name: "table_full", Help: "times a command waited for initiator table room", Counter: &c.TableFull},
		{Name: "tx_xoff", Help: "Falcon submissions refused (Xoff), retried on Xon", Counter: &c.TxXoff},
		{Name: "rx_stale_tag", Help: "dropped: response or data for no live nCMD / target tag", Counter: &c.RxStaleTag},
		{Name: "rx_wrong_response", Help: "dropped: response type does not match the command", Counter: &c.RxWrongResponse},
		{Name: "rx_pull_unknown", Help: "pulls naming no live write: answered with INV", Counter: &c.RxPullUnknown},
		{Name: "rx_pull_short", Help: "pulls asking less than the nCMD's data: answered with INV", Counter: &c.RxPullShort},
		{Name: "commands", Help: "Read/Write Requests received by the target", Counter: &c.Commands},
		{Name: "responses", Help: "Read Responses / Write Completions pushed", Counter: &c.Responses},
		{Name: "error_responses", Help: "responses with an error status", Counter: &c.ErrorResponses},
		{Name: "pulls_sent", Help: "Write Data Requests (pulls) issued", Counter: &c.PullsSent},
		{Name: "bad_opcode", Help: "commands refused: unknown opcode", Counter: &c.BadOpcode},
		{Name: "bad_field", Help: "commands refused: invalid field", Counter: &c.BadField},
		{Name: "bad_namespace", Help: "commands refused: namespace not exported", Counter: &c.BadNamespace},
		{Name: "target_busy", Help: "requests RNR-NACKed: target table full", Counter: &c.TargetBusy},
		{Name: "path_share_full", Help: "requests RNR-NACKed: the path holds its fair share of the target table", Counter: &c.PathShareFull},
		{Name: "write_fenced", Help: "writes RNR-NACKed: a write of the same initiator from a failed path is still in the backend", Counter: &c.WriteFenced},
		{Name: "path_owned", Help: "paths refused: the initiator MAC has a live path owned by another daemon", Counter: &c.PathOwned},
		{Name: "rx_write_data_invalid", Help: "writes failed: initiator marked the data invalid (INV)", Counter: &c.RxWriteDataInvalid},
		{Name: "rx_write_data_mismatch", Help: "writes failed: Write Data Response names another nCMD", Counter: &c.RxWriteDataMismatch},
		{Name: "backend_busy", Help: "backend IOs that waited: the asynchronous backend's queue was full", Counter: &c.BackendBusy},
		{Name: "io_stale", Help: "backend IOs handed back for no slot waiting for one (ignored)", Counter: &c.IOStale},
		{Name: "lent_chunks", Help: "Read Responses pushed from the read's own buffer, not a copy (falcon PushFrame)", Counter: &c.LentChunks},
		{Name: "kept_frames", Help: "writes done from the received frame, aligned, instead of a copy (Config.Frames)", Counter: &c.KeptFrames},
		{Name: "rx_bad_header", Help: "dropped: NBTH missing, malformed or of an unexpected type", Counter: &c.RxBadHeader},
		{Name: "rx_bad_length", Help: "data of the wrong length", Counter: &c.RxBadLength},
		{Name: "rx_unknown_conn", Help: "dropped: connection bound to no path", Counter: &c.RxUnknownConn},
		{Name: "txn_failed", Help: "Falcon transactions that completed in error", Counter: &c.TxnFailed},
		{Name: "refuse_lost", Help: "answers to unusable requests that Falcon refused (Xoff or closed connection): a refused pull times out at the peer", Counter: &c.RefuseLost},
	}
}
