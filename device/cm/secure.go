package cm

import (
	"net/netip"
	"time"

	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
	"falconnic/psp"
	"falconnic/psp/cmauth"
)

// Security makes a Manager's work between daemons authenticated and
// encrypted [issue 18, build items 1 and 2]:
//
//   - every CM message to or from another daemon travels in a cmauth
//     envelope (fresh nonce, freshness window, replay cache) and its
//     source MAC must be one the sending daemon owns (cmauth.Owners: never
//     a NIC of this daemon);
//   - every REQ and REP between daemons offers the sender's SA for the
//     connection: the SPI its NIC gave it and the key derived from that
//     NIC's master key (psp.MasterKeys), which the far end seals with;
//   - every Falcon datagram of such a connection is a PSP datagram: sealed
//     by the connection's TxSA on the sending port's goroutine
//     (sealLink), opened by its RxSA on the receiving port's goroutine
//     (port.ReceiveSealed) before the endpoint sees a byte of it.
//
// Connections between two NICs of one daemon never leave the process and
// stay unsealed (falcon.InProcessLink).
type Security struct {
	Sealer *cmauth.Sealer
	Opener *cmauth.Opener
	Owners *cmauth.Owners
	// Version is the PSP version of the daemon's SAs (AES-GCM-128: 0).
	Version psp.Version
	// Wall is the wall clock the envelopes' freshness uses, Unix ns
	// (nil: time.Now).
	Wall func() int64
}

func (s *Security) wall() int64 {
	if s.Wall != nil {
		return s.Wall()
	}
	return time.Now().UnixNano()
}

// SetSecurity has the manager seal its work between daemons with s. Call
// before the ports run.
func (cm *Manager) SetSecurity(s *Security) { cm.sec = s }

// Secure reports whether the manager seals its work between daemons.
func (cm *Manager) Secure() bool { return cm.sec != nil }

// SetKeys gives the agent its NIC's master keys and the counters of its
// SAs (psp.Counters, one set per NIC). Call before the port runs.
func (a *Agent) SetKeys(keys *psp.MasterKeys, c *psp.Counters) { a.keys, a.pspStats = keys, c }

// Keys returns the agent's NIC's master keys (nil: none).
func (a *Agent) Keys() *psp.MasterKeys { return a.keys }

// toNet sends m to the daemon at dst (invalid: toward the daemon with
// NIC m.dst), sealed when the manager is secure.
func (cm *Manager) toNet(dst netip.AddrPort, m *cmMsg) {
	if cm.net == nil {
		return
	}
	b := m.append(nil)
	if s := cm.sec; s != nil {
		var sa *cmauth.SA
		if m.hasSA {
			sa = &m.sa
		}
		env, err := s.Sealer.Seal(make([]byte, 0, len(b)+cmauth.Overhead+cmauth.MaxIDLen), s.wall(), sa, b)
		if err != nil {
			cm.Stats.SealErr.Inc()
			return
		}
		b = env
	}
	if dst.IsValid() {
		_ = cm.net.Send(dst, b)
	} else {
		_ = cm.net.SendToMAC(m.dst, b)
	}
}

// openCM opens a CM message from the fabric: the envelope, then the
// message, then whether its sender may speak for its source MAC. ok false:
// refused and counted.
func (cm *Manager) openCM(payload []byte) (m cmMsg, ok bool) {
	s := cm.sec
	if s == nil {
		m, err := decodeCM(payload)
		if err != nil {
			cm.Stats.DecodeErr.Inc()
			return m, false
		}
		if cm.agent(m.src) != nil {
			cm.Stats.Spoofed.Inc()
			return m, false
		}
		return m, true
	}
	env, drop := s.Opener.Open(payload, s.wall())
	if drop != 0 {
		return m, false // counted by the opener (cm_auth_*)
	}
	m, err := decodeCM(env.Body)
	if err != nil {
		cm.Stats.DecodeErr.Inc()
		return m, false
	}
	if cm.agent(m.src) != nil {
		cm.Stats.Spoofed.Inc()
		return m, false
	}
	if err := s.Owners.Authorize(env.From, m.src); err != nil {
		cm.Stats.NotOwner.Inc()
		return m, false
	}
	if env.HasSA {
		if env.SA.Version != s.Version {
			cm.Stats.NoSA.Inc()
			return m, false
		}
		m.sa, m.hasSA = env.SA, true
	}
	return m, true
}

// connRx is one sealed connection's receive SA, and whether it ever
// opened a datagram (a connection that never did is half-open: aged out).
// Owned by the port's goroutine.
type connRx struct {
	*psp.RxSA
	seen bool
}

// Trailer implements port.PacketOpener: PSP's ICV follows the packet.
func (r *connRx) Trailer() int { return psp.ICVLen }

// OpenPacket implements port.PacketOpener.
func (r *connRx) OpenPacket(b []byte) ([]byte, uint32, bool) {
	pkt, iv, d := r.RxSA.Open(b)
	if d != 0 {
		return nil, 0, false
	}
	r.seen = true
	return pkt, iv.Timestamp(), true
}

// sealedRx is the fabric's Falcon receiver for one sealed connection: its
// port and receive SA.
type sealedRx struct {
	p  *port.Port
	sa *connRx
}

func (r sealedRx) ReceiveFalcon(pkt []byte, flow uint32) { r.p.ReceiveSealed(pkt, flow, r.sa) }

// receiveSealedFalcon is ReceiveFalcon of a secure manager: the datagram's
// clear word names the connection, whose port opens it.
func (cm *Manager) receiveSealedFalcon(flow uint32, payload []byte) {
	w0, ok := psp.PeekClear(payload)
	if !ok {
		cm.Stats.FalconShort.Inc()
		return
	}
	cid := wire.Packet(w0).CID()
	cm.mu.RLock()
	r := cm.cids[cid]
	cm.mu.RUnlock()
	s, ok := r.(sealedRx)
	switch {
	case r == nil:
		cm.Stats.FalconNoCID.Inc()
	case !ok:
		cm.Stats.FalconUnsealed.Inc()
	default:
		s.ReceiveFalcon(payload, flow)
	}
}

// remote reports whether a connection to NIC peer crosses the fabric
// sealed: the manager is secure and peer is no NIC of this daemon.
func (a *Agent) sealed(peer [6]byte) bool {
	return a.cm.sec != nil && a.keys != nil && a.cm.agent(peer) == nil
}

// newRx gives CID scid of this NIC a receive SA and routes the fabric's
// datagrams for scid through it; it returns the SA to offer the peer.
func (a *Agent) newRx(scid uint32) (*connRx, cmauth.SA, bool) {
	v := a.cm.sec.Version
	spi := a.keys.NewSPI(scid)
	sa0, err := psp.NewRxSA(a.keys, v, spi, a.pspStats)
	if err != nil {
		a.cm.Stats.SealErr.Inc()
		return nil, cmauth.SA{}, false
	}
	sa := cmauth.SA{Version: v, SPI: spi}
	if _, _, err := a.keys.Derive(sa.Key[:0], spi, v); err != nil {
		a.cm.Stats.SealErr.Inc()
		return nil, cmauth.SA{}, false
	}
	rx := &connRx{RxSA: sa0}
	a.logKey(KeyRx, &sa)
	a.cm.mu.Lock()
	if a.cm.cids[scid] != nil {
		a.cm.cids[scid] = sealedRx{a.port, rx}
	}
	a.cm.mu.Unlock()
	return rx, sa, true
}

// sealLink carries one sealed connection's Falcon frames to the daemon
// at its peer: each is sealed by the connection's TxSA (on the port's
// goroutine, the only sender) into a buffer of its own.
type sealLink struct {
	inner falcon.Link
	tx    *psp.TxSA
	sa    cmauth.SA // tx's SPI and key, for the key log (LogKeys)
	buf   []byte
}

// Seals implements falcon.SealingLink.
func (*sealLink) Seals() {}

// Send implements falcon.Link: frame's packet sealed with its envelope's
// IV timestamp (Falcon's T1/T3).
func (l *sealLink) Send(frame []byte, flow uint32) {
	pkt, iv, ok := falcon.SplitEnvelope(frame)
	if !ok {
		return
	}
	need := len(pkt) + psp.Overhead
	dst := l.buf
	if r, ok := l.inner.(reserver); ok {
		dst = r.Reserve(need) // sealed straight into the fabric's outbox
	}
	if cap(dst) < need {
		if cap(l.buf) < need {
			l.buf = make([]byte, 0, need+need/4)
		}
		dst = l.buf
	}
	out, err := l.tx.Seal(dst[:0], pkt, uint32(iv))
	if err != nil {
		return // counted by the SA
	}
	l.inner.Send(out, flow)
}

// reserver is a link that lends room for a payload built in place
// (fabric.Link.Reserve).
type reserver interface{ Reserve(n int) []byte }

// newSealLink returns the link of a sealed connection to the daemon at
// addr that seals with the SA the peer offered.
func (a *Agent) newSealLink(addr netip.AddrPort, sa *cmauth.SA) (*sealLink, error) {
	tx, err := psp.NewTxSA(sa.Version, sa.SPI, sa.KeyBytes(), a.pspStats)
	if err != nil {
		return nil, err
	}
	a.logKey(KeyTx, sa)
	return &sealLink{inner: a.falconLink(addr), tx: tx, sa: *sa}, nil
}

// REKEY retry policy: a REKEY unanswered by a REKEY_ACK is resent after
// cmRekeyRetryFirst, doubling up to cmRekeyRetryMax, cmRekeyMaxTries
// sends in all (≈ 21 s), after which it is reported failed. It can afford
// to wait longer than a REQ (cmRetryEvery × cmMaxTries = 5 s): until it
// is confirmed nothing is lost, the connection's previous SPI being still
// accepted.
const (
	cmRekeyRetryFirst = 200 * time.Millisecond
	cmRekeyRetryMax   = 5 * time.Second
	cmRekeyMaxTries   = 8
)

// rekeyState is one connection's REKEY of this NIC: the SA offered and
// its master-key generation while it awaits the peer's REKEY_ACK (spi
// non-zero), with the sends made and when the next is due; or, once
// over, whether it failed (every send unanswered).
type rekeyState struct {
	spi    psp.SPI
	gen    uint32
	sa     cmauth.SA
	tries  int
	at     clock.Time
	failed bool
}

func (r *rekeyState) pending() bool { return r.spi != 0 }

// rekeyBackoff is the wait after the n-th send of a REKEY.
func rekeyBackoff(n int) time.Duration {
	d := cmRekeyRetryFirst
	for i := 1; i < n && d < cmRekeyRetryMax; i++ {
		d *= 2
	}
	return min(d, cmRekeyRetryMax)
}

// Rekey moves every sealed connection of the NIC to an SPI of its master
// keys' current generation (after MasterKeys.Rotate): the connection's
// RxSA keeps accepting the SPI it had, and a REKEY offers the peer the
// new SA, which its TxSA seals with from then on [psp/doc.go, Rotation].
// The REKEY is resent with backoff until the peer's REKEY_ACK confirms it
// (PendingRekeys), at most cmRekeyMaxTries times; the previous SPI stays
// accepted meanwhile, and after a failed REKEY until the next rotation.
// The SPI before the previous one is dropped: it is two rotations old.
// On the port's goroutine; it returns the connections rekeyed.
func (a *Agent) Rekey() int {
	n := 0
	gen := a.keys.Generation()
	for key, c := range a.conns {
		if c.conn == nil || c.rx == nil || !c.addr.IsValid() {
			continue
		}
		c.rx.DropPrevious()
		spi := a.keys.NewSPI(c.conn.SCID())
		if c.rx.SPI() == spi {
			continue
		}
		if err := c.rx.Rekey(spi); err != nil {
			a.cm.Stats.SealErr.Inc()
			continue
		}
		sa := cmauth.SA{Version: a.cm.sec.Version, SPI: spi}
		if _, _, err := a.keys.Derive(sa.Key[:0], spi, sa.Version); err != nil {
			a.cm.Stats.SealErr.Inc()
			continue
		}
		c.rekey = rekeyState{spi: spi, gen: gen, sa: sa}
		a.logKey(KeyRx, &sa)
		a.cm.Stats.RekeySent.Inc()
		a.sendREKEY(key, c)
		n++
	}
	return n
}

// sendREKEY sends (again) c's pending REKEY and sets when it is resent.
func (a *Agent) sendREKEY(key cmKey, c *cmConn) {
	c.rekey.tries++
	c.rekey.at = a.port.Clock().Now() + rekeyBackoff(c.rekey.tries)
	a.setDue(c.rekey.at)
	m := cmMsg{typ: cmREKEY, proto: cmProtoByte(key.proto), src: a.mac, dst: key.peer, srcCID: c.conn.SCID(), dstCID: c.dcid,
		reqPSN: c.rekey.gen, sa: c.rekey.sa, hasSA: true}
	a.cm.toNet(c.addr, &m)
}

// retryRekeys resends the REKEYs whose REKEY_ACK is overdue, and gives up
// on those sent cmRekeyMaxTries times (the caller rearms).
func (a *Agent) retryRekeys(now clock.Time) {
	for key, c := range a.conns {
		switch {
		case !c.rekey.pending() || c.rekey.at > now:
		case c.conn == nil:
			c.rekey = rekeyState{}
		case c.rekey.tries < cmRekeyMaxTries:
			a.cm.Stats.RekeyResent.Inc()
			a.sendREKEY(key, c)
		default:
			a.cm.Stats.RekeyFailed.Inc()
			c.rekey = rekeyState{failed: true}
		}
	}
}

// PendingRekeys returns how many of the NIC's connections await the
// peer's REKEY_ACK, and how many had their last REKEY fail (on the port's
// goroutine). While any is pending the NIC must not rotate again: the
// rotation would stop accepting the SPI the peer still seals with.
func (a *Agent) PendingRekeys() (pending, failed int) {
	for _, c := range a.conns {
		switch {
		case c.conn == nil: // closed; its REKEY is dropped at the next timer
		case c.rekey.pending():
			pending++
		case c.rekey.failed:
			failed++
		}
	}
	return pending, failed
}

// onREKEY takes the peer's new SA for an up connection and confirms it
// with a REKEY_ACK — again for a resend of the SA it already took.
func (a *Agent) onREKEY(c *cmConn, m cmMsg) {
	a.cm.Stats.RekeyRecv.Inc()
	if c == nil || c.conn == nil || c.tx == nil || c.dcid != m.srcCID || c.conn.SCID() != m.dstCID || !m.hasSA {
		a.cm.Stats.Stale.Inc()
		return
	}
	gen := m.rekeyGen()
	switch {
	case gen < c.txGen:
		a.cm.Stats.RekeyOld.Inc()
		return
	case c.tx.tx.SPI() == m.sa.SPI:
		// A repeat: rekeying again would restart the sequence numbers
		// under the same key, which the peer's replay window refuses.
		a.cm.Stats.RepeatedRekey.Inc()
	default:
		if err := c.tx.tx.Rekey(m.sa.SPI, m.sa.KeyBytes()); err != nil {
			a.cm.Stats.SealErr.Inc()
			return
		}
		c.txGen = gen
		c.tx.sa = m.sa
		a.logKey(KeyTx, &m.sa)
	}
	ack := cmMsg{typ: cmREKEYACK, proto: m.proto, src: a.mac, dst: m.src, srcCID: c.conn.SCID(), dstCID: c.dcid,
		reqPSN: uint32(c.tx.tx.SPI()), dataPSN: gen}
	a.cm.Stats.RekeyAckSent.Inc()
	a.cm.toNet(c.addr, &ack)
}

// onREKEYACK ends the REKEY the peer confirms.
func (a *Agent) onREKEYACK(c *cmConn, m cmMsg) {
	if c == nil || c.conn == nil || c.dcid != m.srcCID || c.conn.SCID() != m.dstCID ||
		!c.rekey.pending() || m.ackSPI() != c.rekey.spi || m.ackGen() != c.rekey.gen {
		a.cm.Stats.RekeyAckStale.Inc()
		return
	}
	a.cm.Stats.RekeyConfirmed.Inc()
	c.rekey = rekeyState{}
	a.rearm()
}

// PeerOwner names who speaks for NIC peer, for a protocol's Up (on the
// port's goroutine): "" for a NIC of this daemon, the authenticated
// daemon ID bound to peer on a secure fabric, else the peer daemon's
// fabric address. A protocol lets only the same owner replace a path it
// holds (nvme.Engine.AddPathFrom).
func (a *Agent) PeerOwner(peer [6]byte) string {
	switch {
	case a.cm.agent(peer) != nil:
		return ""
	case a.cm.sec != nil:
		id, _ := a.cm.sec.Owners.Owner(peer)
		return "daemon " + string(id)
	case a.upAddr.IsValid():
		return a.upAddr.String()
	}
	if c := a.connTo(peer); c != nil && c.addr.IsValid() {
		return c.addr.String()
	}
	return "?"
}

// connTo returns any connection entry of the NIC with peer.
func (a *Agent) connTo(peer [6]byte) *cmConn {
	for k, c := range a.conns {
		if k.peer == peer {
			return c
		}
	}
	return nil
}

// SealedCIDs returns the CIDs of this daemon whose fabric datagrams are
// opened by a receive SA (status and tests).
func (cm *Manager) SealedCIDs() []uint32 {
	cm.mu.RLock()
	defer cm.mu.RUnlock()
	var out []uint32
	for cid, r := range cm.cids {
		if _, ok := r.(sealedRx); ok {
			out = append(out, cid)
		}
	}
	return out
}
