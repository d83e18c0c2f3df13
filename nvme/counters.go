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
	TxnFailed                               stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "Submitted", Help: "host commands accepted by Submit", Counter: &c.Submitted},
		{Name: "SubmitInvalid", Help: "host commands refused by Submit as malformed", Counter: &c.SubmitInvalid},
		{Name: "Completed", Help: "host commands completed", Counter: &c.Completed},
		{Name: "CompletedInError", Help: "host commands completed with an error status", Counter: &c.CompletedInError},
		{Name: "Cancelled", Help: "host commands detached from their buffers (device stopped)", Counter: &c.Cancelled},
		{Name: "TimedOut", Help: "host commands failed by the command timeout", Counter: &c.TimedOut},
		{Name: "NCMDsSent", Help: "Read/Write Requests pushed (one per nCMD)", Counter: &c.NCMDsSent},
		{Name: "ReadResponses", Help: "Read Responses received", Counter: &c.ReadResponses},
		{Name: "WriteCompletions", Help: "Write Completions received", Counter: &c.WriteCompletions},
		{Name: "WriteDataSent", Help: "Write Data Responses sent with data", Counter: &c.WriteDataSent},
		{Name: "TableFull", Help: "times a command waited for initiator table room", Counter: &c.TableFull},
		{Name: "TxXoff", Help: "Falcon submissions refused (Xoff), retried on Xon", Counter: &c.TxXoff},
		{Name: "RxStaleTag", Help: "dropped: response or data for no live nCMD / target tag", Counter: &c.RxStaleTag},
		{Name: "RxWrongResponse", Help: "dropped: response type does not match the command", Counter: &c.RxWrongResponse},
		{Name: "RxPullUnknown", Help: "pulls naming no live write: answered with INV", Counter: &c.RxPullUnknown},
		{Name: "RxPullShort", Help: "pulls asking less than the nCMD's data: answered with INV", Counter: &c.RxPullShort},
		{Name: "Commands", Help: "Read/Write Requests received by the target", Counter: &c.Commands},
		{Name: "Responses", Help: "Read Responses / Write Completions pushed", Counter: &c.Responses},
		{Name: "ErrorResponses", Help: "responses with an error status", Counter: &c.ErrorResponses},
		{Name: "PullsSent", Help: "Write Data Requests (pulls) issued", Counter: &c.PullsSent},
		{Name: "BadOpcode", Help: "commands refused: unknown opcode", Counter: &c.BadOpcode},
		{Name: "BadField", Help: "commands refused: invalid field", Counter: &c.BadField},
		{Name: "BadNamespace", Help: "commands refused: namespace not exported", Counter: &c.BadNamespace},
		{Name: "TargetBusy", Help: "requests RNR-NACKed: target table full", Counter: &c.TargetBusy},
		{Name: "path_share_full", Help: "requests RNR-NACKed: the path holds its fair share of the target table", Counter: &c.PathShareFull},
		{Name: "write_fenced", Help: "writes RNR-NACKed: a write of the same initiator from a failed path is still in the backend", Counter: &c.WriteFenced},
		{Name: "path_owned", Help: "paths refused: the initiator MAC has a live path owned by another daemon", Counter: &c.PathOwned},
		{Name: "RxWriteDataInvalid", Help: "writes failed: initiator marked the data invalid (INV)", Counter: &c.RxWriteDataInvalid},
		{Name: "RxWriteDataMismatch", Help: "writes failed: Write Data Response names another nCMD", Counter: &c.RxWriteDataMismatch},
		{Name: "BackendBusy", Help: "backend IOs that waited: the asynchronous backend's queue was full", Counter: &c.BackendBusy},
		{Name: "IOStale", Help: "backend IOs handed back for no slot waiting for one (ignored)", Counter: &c.IOStale},
		{Name: "LentChunks", Help: "Read Responses pushed from the read's own buffer, not a copy (falcon PushFrame)", Counter: &c.LentChunks},
		{Name: "KeptFrames", Help: "writes done from the received frame, aligned, instead of a copy (Config.Frames)", Counter: &c.KeptFrames},
		{Name: "RxBadHeader", Help: "dropped: NBTH missing, malformed or of an unexpected type", Counter: &c.RxBadHeader},
		{Name: "RxBadLength", Help: "data of the wrong length", Counter: &c.RxBadLength},
		{Name: "RxUnknownConn", Help: "dropped: connection bound to no path", Counter: &c.RxUnknownConn},
		{Name: "TxnFailed", Help: "Falcon transactions that completed in error", Counter: &c.TxnFailed},
	}
}
