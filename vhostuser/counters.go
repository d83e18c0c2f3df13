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
	WatchdogUsedNoCall  stats.Counter
}

// Set lists the counters with their help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "Sessions", Help: "vhost-user sessions started", Counter: &c.Sessions},
		{Name: "SessionResets", Help: "sessions ended by bad input or I/O error", Counter: &c.SessionResets},
		{Name: "ExtraConnections", Help: "connections refused because a session was active", Counter: &c.ExtraConnections},
		{Name: "Messages", Help: "front-end messages handled", Counter: &c.Messages},
		{Name: "BadVersion", Help: "messages with a bad header version", Counter: &c.BadVersion},
		{Name: "ReplyFlag", Help: "front-end messages carrying the REPLY flag", Counter: &c.ReplyFlag},
		{Name: "PayloadTooBig", Help: "messages with a payload over the cap", Counter: &c.PayloadTooBig},
		{Name: "FDTruncated", Help: "messages whose fds were truncated", Counter: &c.FDTruncated},
		{Name: "BadSize", Help: "messages with a wrong payload size", Counter: &c.BadSize},
		{Name: "BadFDCount", Help: "messages with a wrong fd count", Counter: &c.BadFDCount},
		{Name: "BadPayload", Help: "messages with malformed payload fields", Counter: &c.BadPayload},
		{Name: "UnknownRequest", Help: "unknown or unsupported requests", Counter: &c.UnknownRequest},
		{Name: "BadRingIndex", Help: "ring index out of range", Counter: &c.BadRingIndex},
		{Name: "BadRingSize", Help: "ring size not a power of two in 1..32768", Counter: &c.BadRingSize},
		{Name: "BadRingAddr", Help: "ring addresses unaligned or outside memory", Counter: &c.BadRingAddr},
		{Name: "BadMemRegion", Help: "memory regions rejected (overlap, mmap failure, size)", Counter: &c.BadMemRegion},
		{Name: "BadInflight", Help: "inflight requests rejected", Counter: &c.BadInflight},
		{Name: "RequestFailed", Help: "requests answered with a failure ack", Counter: &c.RequestFailed},
		{Name: "MemTables", Help: "memory tables installed", Counter: &c.MemTables},
		{Name: "DupMemRegions", Help: "ADD_MEM_REGs of a region already present (one per extra queue pair)", Counter: &c.DupMemRegions},
		{Name: "MemTablesFreed", Help: "memory tables unmapped after the last worker let go", Counter: &c.MemTablesFreed},
		{Name: "Kicks", Help: "kick eventfd wake-ups", Counter: &c.Kicks},
		{Name: "Calls", Help: "call eventfd signals", Counter: &c.Calls},
		{Name: "CallFDSwaps", Help: "call fds replaced while a ring ran", Counter: &c.CallFDSwaps},
		{Name: "ChainsPopped", Help: "valid descriptor chains popped", Counter: &c.ChainsPopped},
		{Name: "AvailIdxJump", Help: "avail idx moved by more than the ring size", Counter: &c.AvailIdxJump},
		{Name: "BadHead", Help: "avail ring head index out of range", Counter: &c.BadHead},
		{Name: "ChainLoop", Help: "descriptor chains longer than the table (loops)", Counter: &c.ChainLoop},
		{Name: "ChainTooLong", Help: "descriptor chains with too many bytes", Counter: &c.ChainTooLong},
		{Name: "ChainBadGPA", Help: "descriptors pointing outside the memory table", Counter: &c.ChainBadGPA},
		{Name: "ChainCrossing", Help: "descriptors crossing a region end", Counter: &c.ChainCrossing},
		{Name: "ChainBadNext", Help: "descriptor next index out of range", Counter: &c.ChainBadNext},
		{Name: "ChainDirection", Help: "readable descriptor after a writable one", Counter: &c.ChainDirection},
		{Name: "ChainBadIndir", Help: "malformed indirect descriptors", Counter: &c.ChainBadIndir},
		{Name: "ChainIndirNoNeg", Help: "indirect descriptors without INDIRECT_DESC", Counter: &c.ChainIndirNoNeg},
		{Name: "RingUnmapped", Help: "rings whose addresses left the memory table", Counter: &c.RingUnmapped},
		{Name: "MemoryFaults", Help: "ring workers stopped by a fault on guest memory", Counter: &c.MemoryFaults},
		{Name: "ResumedFromUsed", Help: "rings resumed from the used idx", Counter: &c.ResumedFromUsed},
		{Name: "InflightResub", Help: "inflight descriptors resubmitted after reconnect", Counter: &c.InflightResub},
		{Name: "CallNoFD", Help: "calls owed while the ring had no call fd (the next completion calls)", Counter: &c.CallNoFD},
		{Name: "CallFailed", Help: "call eventfd writes that failed (fd closed under the worker; the next completion calls)", Counter: &c.CallFailed},
		{Name: "WatchdogChecks", Help: "ring watchdog looks at a session's rings", Counter: &c.WatchdogChecks},
		{Name: "WatchdogAvailNoKick", Help: "watchdog: descriptors left in a ring with no kick, worker woken (a lost kick: a bug)", Counter: &c.WatchdogAvailNoKick},
		{Name: "WatchdogUsedNoCall", Help: "watchdog: completions the guest asked to hear of with no call, call sent (a lost call: a bug)", Counter: &c.WatchdogUsedNoCall},
	}
}
