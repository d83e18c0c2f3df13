package vsock

import "falconnic/internal/stats"

// Counters counts every vsock event, drop and error by cause. They
// are free-running and survive vhost-user sessions.
type Counters struct {
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
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "pkts_from_guest", Help: "valid packets from the guest's TX queue", Counter: &c.PktsFromGuest},
		{Name: "pkts_to_guest", Help: "packets written to the guest's RX queue", Counter: &c.PktsToGuest},
		{Name: "bytes_to_host", Help: "stream bytes from the guest to host sockets", Counter: &c.BytesToHost},
		{Name: "bytes_to_guest", Help: "stream bytes from host sockets to the guest", Counter: &c.BytesToGuest},
		{Name: "conns", Help: "connections created (either side)", Counter: &c.Conns},
		{Name: "host_connects", Help: "host-initiated connections (CONNECT on the UDS)", Counter: &c.HostConnects},
		{Name: "guest_connects", Help: "guest-initiated connections (REQUEST to CID 2)", Counter: &c.GuestConnects},
		{Name: "established", Help: "host-initiated connections the guest accepted", Counter: &c.Established},
		{Name: "closed", Help: "connections closed cleanly after shutdown", Counter: &c.Closed},
		{Name: "rst_sent", Help: "RST packets sent to the guest", Counter: &c.RstSent},
		{Name: "rst_received", Help: "RST packets from the guest for known connections", Counter: &c.RstReceived},
		{Name: "hdr_short", Help: "TX packets shorter than the 44-byte header", Counter: &c.HdrShort},
		{Name: "hdr_type", Help: "TX packets whose type is not STREAM", Counter: &c.HdrType},
		{Name: "hdr_op", Help: "TX packets with an unknown op", Counter: &c.HdrOp},
		{Name: "hdr_flags", Help: "TX packets with flags the op does not allow", Counter: &c.HdrFlags},
		{Name: "hdr_len", Help: "TX packets whose len does not match the payload", Counter: &c.HdrLen},
		{Name: "hdr_too_big", Help: "TX packets with a payload over 64 KiB", Counter: &c.HdrTooBig},
		{Name: "hdr_src_cid", Help: "TX packets whose src_cid is not the guest's CID", Counter: &c.HdrSrcCID},
		{Name: "hdr_dst_cid", Help: "TX packets not addressed to the host (CID 2)", Counter: &c.HdrDstCID},
		{Name: "hdr_no_payload", Help: "RW packets without payload", Counter: &c.HdrNoPayload},
		{Name: "tx_chain_writable", Help: "TX chains with device-writable buffers", Counter: &c.TxChainWritable},
		{Name: "tx_chain_too_big", Help: "TX chains larger than header plus 64 KiB", Counter: &c.TxChainTooBig},
		{Name: "rx_chain_readable", Help: "RX chains with device-readable buffers", Counter: &c.RxChainReadable},
		{Name: "rx_buf_too_small", Help: "RX chains too small for a header", Counter: &c.RxBufTooSmall},
		{Name: "unknown_conn", Help: "packets for no known connection (answered with RST)", Counter: &c.UnknownConn},
		{Name: "rst_unknown", Help: "RST packets for no known connection (ignored)", Counter: &c.RstUnknown},
		{Name: "dup_request", Help: "REQUEST for a connection that exists (reset)", Counter: &c.DupRequest},
		{Name: "unexpected_op", Help: "ops not allowed in the connection's state (reset)", Counter: &c.UnexpectedOp},
		{Name: "data_after_shutdown", Help: "RW after the guest shut its sending side (reset)", Counter: &c.DataAfterShutdown},
		{Name: "guest_over_credit", Help: "RW beyond the credit we advertised (reset)", Counter: &c.GuestOverCredit},
		{Name: "tx_no_credit", Help: "host data held back for lack of guest credit", Counter: &c.TxNoCredit},
		{Name: "ctrl_queue_full", Help: "control packets dropped: queue full", Counter: &c.CtrlQueueFull},
		{Name: "conn_limit", Help: "connections refused: too many", Counter: &c.ConnLimit},
		{Name: "connect_timeout", Help: "host-initiated REQUESTs the guest never answered", Counter: &c.ConnectTimeout},
		{Name: "dial_failed", Help: "guest connections to a UDS_<port> nobody listens on (RST)", Counter: &c.DialFailed},
		{Name: "host_io_error", Help: "host socket read/write errors (RST to the guest)", Counter: &c.HostIOError},
		{Name: "host_bad_connect", Help: "host clients with a malformed CONNECT line", Counter: &c.HostBadConnect},
		{Name: "host_bytes_discarded", Help: "host bytes dropped: the guest shut its receiving side or the connection ended", Counter: &c.HostBytesDiscarded},
		{Name: "session_resets", Help: "connections dropped by a vhost-user session loss", Counter: &c.SessionResets},
		{Name: "bad_config_access", Help: "config reads/writes outside guest_cid or writes (read-only)", Counter: &c.BadConfigAccess},
	}
}

// parseCounter maps a ParseHdr error to its counter.
func (c *Counters) parseCounter(err error) *stats.Counter {
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
