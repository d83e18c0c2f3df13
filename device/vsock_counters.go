package device

import "falconnic/internal/stats"

// VsockCounters counts every vsock event, drop and error by cause. They
// are free-running and survive vhost-user sessions.
type VsockCounters struct {
	PktsFromGuest stats.Counter
	PktsToGuest   stats.Counter
	BytesToHost   stats.Counter
	BytesToGuest  stats.Counter
	Conns         stats.Counter
	HostConnects  stats.Counter
	GuestConnects stats.Counter
	Established   stats.Counter
	Closed        stats.Counter
	RstSent       stats.Counter
	RstReceived   stats.Counter

	HdrShort     stats.Counter
	HdrType      stats.Counter
	HdrOp        stats.Counter
	HdrFlags     stats.Counter
	HdrLen       stats.Counter
	HdrTooBig    stats.Counter
	HdrSrcCID    stats.Counter
	HdrDstCID    stats.Counter
	HdrNoPayload stats.Counter

	TxChainWritable    stats.Counter
	TxChainTooBig      stats.Counter
	RxChainReadable    stats.Counter
	RxBufTooSmall      stats.Counter
	UnknownConn        stats.Counter
	RstUnknown         stats.Counter
	DupRequest         stats.Counter
	UnexpectedOp       stats.Counter
	DataAfterShutdown  stats.Counter
	GuestOverCredit    stats.Counter
	TxNoCredit         stats.Counter
	CtrlQueueFull      stats.Counter
	ConnLimit          stats.Counter
	ConnectTimeout     stats.Counter
	DialFailed         stats.Counter
	HostIOError        stats.Counter
	HostBadConnect     stats.Counter
	HostBytesDiscarded stats.Counter
	SessionResets      stats.Counter
	BadConfigAccess    stats.Counter
}

// Set lists the counters with their help text.
func (c *VsockCounters) Set() stats.Set {
	return stats.Set{
		{Name: "PktsFromGuest", Help: "valid packets from the guest's TX queue", Counter: &c.PktsFromGuest},
		{Name: "PktsToGuest", Help: "packets written to the guest's RX queue", Counter: &c.PktsToGuest},
		{Name: "BytesToHost", Help: "stream bytes from the guest to host sockets", Counter: &c.BytesToHost},
		{Name: "BytesToGuest", Help: "stream bytes from host sockets to the guest", Counter: &c.BytesToGuest},
		{Name: "Conns", Help: "connections created (either side)", Counter: &c.Conns},
		{Name: "HostConnects", Help: "host-initiated connections (CONNECT on the UDS)", Counter: &c.HostConnects},
		{Name: "GuestConnects", Help: "guest-initiated connections (REQUEST to CID 2)", Counter: &c.GuestConnects},
		{Name: "Established", Help: "host-initiated connections the guest accepted", Counter: &c.Established},
		{Name: "Closed", Help: "connections closed cleanly after shutdown", Counter: &c.Closed},
		{Name: "RstSent", Help: "RST packets sent to the guest", Counter: &c.RstSent},
		{Name: "RstReceived", Help: "RST packets from the guest for known connections", Counter: &c.RstReceived},
		{Name: "HdrShort", Help: "TX packets shorter than the 44-byte header", Counter: &c.HdrShort},
		{Name: "HdrType", Help: "TX packets whose type is not STREAM", Counter: &c.HdrType},
		{Name: "HdrOp", Help: "TX packets with an unknown op", Counter: &c.HdrOp},
		{Name: "HdrFlags", Help: "TX packets with flags the op does not allow", Counter: &c.HdrFlags},
		{Name: "HdrLen", Help: "TX packets whose len does not match the payload", Counter: &c.HdrLen},
		{Name: "HdrTooBig", Help: "TX packets with a payload over 64 KiB", Counter: &c.HdrTooBig},
		{Name: "HdrSrcCID", Help: "TX packets whose src_cid is not the guest's CID", Counter: &c.HdrSrcCID},
		{Name: "HdrDstCID", Help: "TX packets not addressed to the host (CID 2)", Counter: &c.HdrDstCID},
		{Name: "HdrNoPayload", Help: "RW packets without payload", Counter: &c.HdrNoPayload},
		{Name: "TxChainWritable", Help: "TX chains with device-writable buffers", Counter: &c.TxChainWritable},
		{Name: "TxChainTooBig", Help: "TX chains larger than header plus 64 KiB", Counter: &c.TxChainTooBig},
		{Name: "RxChainReadable", Help: "RX chains with device-readable buffers", Counter: &c.RxChainReadable},
		{Name: "RxBufTooSmall", Help: "RX chains too small for a header", Counter: &c.RxBufTooSmall},
		{Name: "UnknownConn", Help: "packets for no known connection (answered with RST)", Counter: &c.UnknownConn},
		{Name: "RstUnknown", Help: "RST packets for no known connection (ignored)", Counter: &c.RstUnknown},
		{Name: "DupRequest", Help: "REQUEST for a connection that exists (reset)", Counter: &c.DupRequest},
		{Name: "UnexpectedOp", Help: "ops not allowed in the connection's state (reset)", Counter: &c.UnexpectedOp},
		{Name: "DataAfterShutdown", Help: "RW after the guest shut its sending side (reset)", Counter: &c.DataAfterShutdown},
		{Name: "GuestOverCredit", Help: "RW beyond the credit we advertised (reset)", Counter: &c.GuestOverCredit},
		{Name: "TxNoCredit", Help: "host data held back for lack of guest credit", Counter: &c.TxNoCredit},
		{Name: "CtrlQueueFull", Help: "control packets dropped: queue full", Counter: &c.CtrlQueueFull},
		{Name: "ConnLimit", Help: "connections refused: too many", Counter: &c.ConnLimit},
		{Name: "ConnectTimeout", Help: "host-initiated REQUESTs the guest never answered", Counter: &c.ConnectTimeout},
		{Name: "DialFailed", Help: "guest connections to a UDS_<port> nobody listens on (RST)", Counter: &c.DialFailed},
		{Name: "HostIOError", Help: "host socket read/write errors (RST to the guest)", Counter: &c.HostIOError},
		{Name: "HostBadConnect", Help: "host clients with a malformed CONNECT line", Counter: &c.HostBadConnect},
		{Name: "HostBytesDiscarded", Help: "host bytes dropped: the guest shut its receiving side or the connection ended", Counter: &c.HostBytesDiscarded},
		{Name: "SessionResets", Help: "connections dropped by a vhost-user session loss", Counter: &c.SessionResets},
		{Name: "BadConfigAccess", Help: "config reads/writes outside guest_cid or writes (read-only)", Counter: &c.BadConfigAccess},
	}
}

// parseCounter maps a ParseVsockHdr error to its counter.
func (c *VsockCounters) parseCounter(err error) *stats.Counter {
	for _, r := range []struct {
		err error
		c   *stats.Counter
	}{
		{ErrVsockShort, &c.HdrShort}, {ErrVsockType, &c.HdrType}, {ErrVsockOp, &c.HdrOp},
		{ErrVsockFlags, &c.HdrFlags}, {ErrVsockLen, &c.HdrLen}, {ErrVsockTooBig, &c.HdrTooBig},
		{ErrVsockSrcCID, &c.HdrSrcCID}, {ErrVsockDstCID, &c.HdrDstCID}, {ErrVsockNoPayload, &c.HdrNoPayload},
	} {
		if r.err == err {
			return r.c
		}
	}
	return &c.HdrOp
}
