package vhostuser

import "falconnic/internal/stats"

// Counters counts every error and drop cause of one back-end (one socket).
// They are free-running and survive sessions.
type Counters struct {
	Sessions         stats.Counter
	SessionResets    stats.Counter
	ExtraConnections stats.Counter
	Messages         stats.Counter

	BadVersion     stats.Counter
	ReplyFlag      stats.Counter
	PayloadTooBig  stats.Counter
	FDTruncated    stats.Counter
	BadSize        stats.Counter
	BadFDCount     stats.Counter
	BadPayload     stats.Counter
	UnknownRequest stats.Counter
	BadRingIndex   stats.Counter
	BadRingSize    stats.Counter
	BadRingAddr    stats.Counter
	BadMemRegion   stats.Counter
	BadInflight    stats.Counter
	RequestFailed  stats.Counter

	MemTables       stats.Counter
	DupMemRegions   stats.Counter
	MemTablesFreed  stats.Counter
	Kicks           stats.Counter
	Calls           stats.Counter
	CallFDSwaps     stats.Counter
	ChainsPopped    stats.Counter
	AvailIdxJump    stats.Counter
	BadHead         stats.Counter
	ChainLoop       stats.Counter
	ChainTooLong    stats.Counter
	ChainBadGPA     stats.Counter
	ChainCrossing   stats.Counter
	ChainBadNext    stats.Counter
	ChainDirection  stats.Counter
	ChainBadIndir   stats.Counter
	ChainIndirNoNeg stats.Counter
	RingUnmapped    stats.Counter
	MemoryFaults    stats.Counter
	ResumedFromUsed stats.Counter
	InflightResub   stats.Counter

	CallNoFD            stats.Counter
	CallFailed          stats.Counter
	WatchdogChecks      stats.Counter
	WatchdogAvailNoKick stats.Counter
	WatchdogAvailHeld   stats.Counter
	WatchdogUsedNoCall  stats.Counter
	WatchdogNotTaken    stats.Counter
}

// Set lists the counters with their help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "sessions", Help: "vhost-user sessions started", Counter: &c.Sessions},
		{Name: "session_resets", Help: "sessions ended by bad input or I/O error", Counter: &c.SessionResets},
		{Name: "extra_connections", Help: "connections refused because a session was active", Counter: &c.ExtraConnections},
		{Name: "messages", Help: "front-end messages handled", Counter: &c.Messages},
		{Name: "bad_version", Help: "messages with a bad header version", Counter: &c.BadVersion},
		{Name: "reply_flag", Help: "front-end messages carrying the REPLY flag", Counter: &c.ReplyFlag},
		{Name: "payload_too_big", Help: "messages with a payload over the cap", Counter: &c.PayloadTooBig},
		{Name: "fd_truncated", Help: "messages whose fds were truncated", Counter: &c.FDTruncated},
		{Name: "bad_size", Help: "messages with a wrong payload size", Counter: &c.BadSize},
		{Name: "bad_fd_count", Help: "messages with a wrong fd count", Counter: &c.BadFDCount},
		{Name: "bad_payload", Help: "messages with malformed payload fields", Counter: &c.BadPayload},
		{Name: "unknown_request", Help: "unknown or unsupported requests", Counter: &c.UnknownRequest},
		{Name: "bad_ring_index", Help: "ring index out of range", Counter: &c.BadRingIndex},
		{Name: "bad_ring_size", Help: "ring size not a power of two in 1..32768", Counter: &c.BadRingSize},
		{Name: "bad_ring_addr", Help: "ring addresses unaligned or outside memory", Counter: &c.BadRingAddr},
		{Name: "bad_mem_region", Help: "memory regions rejected (overlap, mmap failure, size)", Counter: &c.BadMemRegion},
		{Name: "bad_inflight", Help: "inflight requests rejected", Counter: &c.BadInflight},
		{Name: "request_failed", Help: "requests answered with a failure ack", Counter: &c.RequestFailed},
		{Name: "mem_tables", Help: "memory tables installed", Counter: &c.MemTables},
		{Name: "dup_mem_regions", Help: "ADD_MEM_REGs of a region already present (one per extra queue pair)", Counter: &c.DupMemRegions},
		{Name: "mem_tables_freed", Help: "memory tables unmapped after the last worker let go", Counter: &c.MemTablesFreed},
		{Name: "kicks", Help: "kick eventfd wake-ups", Counter: &c.Kicks},
		{Name: "calls", Help: "call eventfd signals", Counter: &c.Calls},
		{Name: "call_fd_swaps", Help: "call fds replaced while a ring ran", Counter: &c.CallFDSwaps},
		{Name: "chains_popped", Help: "valid descriptor chains popped", Counter: &c.ChainsPopped},
		{Name: "avail_idx_jump", Help: "avail idx moved by more than the ring size", Counter: &c.AvailIdxJump},
		{Name: "bad_head", Help: "avail ring head index out of range", Counter: &c.BadHead},
		{Name: "chain_loop", Help: "descriptor chains longer than the table (loops)", Counter: &c.ChainLoop},
		{Name: "chain_too_long", Help: "descriptor chains with too many bytes", Counter: &c.ChainTooLong},
		{Name: "chain_bad_gpa", Help: "descriptors pointing outside the memory table", Counter: &c.ChainBadGPA},
		{Name: "chain_crossing", Help: "descriptors crossing a region end", Counter: &c.ChainCrossing},
		{Name: "chain_bad_next", Help: "descriptor next index out of range", Counter: &c.ChainBadNext},
		{Name: "chain_direction", Help: "readable descriptor after a writable one", Counter: &c.ChainDirection},
		{Name: "chain_bad_indir", Help: "malformed indirect descriptors", Counter: &c.ChainBadIndir},
		{Name: "chain_indir_no_neg", Help: "indirect descriptors without INDIRECT_DESC", Counter: &c.ChainIndirNoNeg},
		{Name: "ring_unmapped", Help: "rings whose addresses left the memory table", Counter: &c.RingUnmapped},
		{Name: "memory_faults", Help: "ring workers stopped by a fault on guest memory", Counter: &c.MemoryFaults},
		{Name: "resumed_from_used", Help: "rings resumed from the used idx", Counter: &c.ResumedFromUsed},
		{Name: "inflight_resub", Help: "inflight descriptors resubmitted after reconnect", Counter: &c.InflightResub},
		{Name: "call_no_fd", Help: "calls owed while the ring had no call fd (the next completion calls)", Counter: &c.CallNoFD},
		{Name: "call_failed", Help: "call eventfd writes that failed (fd closed under the worker; the next completion calls)", Counter: &c.CallFailed},
		{Name: "watchdog_checks", Help: "ring watchdog looks at a session's rings", Counter: &c.WatchdogChecks},
		{Name: "watchdog_avail_no_kick", Help: "watchdog: descriptors left in a ring with no kick, worker woken (a lost kick: a bug)", Counter: &c.WatchdogAvailNoKick},
		{Name: "watchdog_avail_held", Help: "watchdog: descriptors the worker held back without a kick (HoldKicks) and no completion came to take them for two looks, worker woken (a slow target, not a lost kick)", Counter: &c.WatchdogAvailHeld},
		{Name: "watchdog_used_no_call", Help: "watchdog: completions the guest asked to hear of with no call, call sent (a lost call: a bug)", Counter: &c.WatchdogUsedNoCall},
		{Name: "watchdog_not_taken", Help: "watchdog: completions called for that the guest did not take, call sent again (an interrupt lost after our call, in QEMU or the guest)", Counter: &c.WatchdogNotTaken},
	}
}
