// Package cm is the daemon's connection manager [ARCHITECTURE §5 CM]: one
// for every Falcon protocol (RDMA, NVMe), each NIC's part of it owned by
// the NIC's port goroutine. See Manager.
package cm

import (
	"net/netip"
	"sync"
	"time"

	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
	"falconnic/internal/stats"
	"falconnic/psp"
	"falconnic/psp/cmauth"
)

// Manager is the daemon's connection manager: it
// sets up one Falcon connection per protocol and pair of NICs, for RDMA
// (ordered) and NVMe (unordered) alike, with REQ/REP/REJ messages
// (wire.go) — over the fabric to another daemon's NIC, or
// handed to the peer NIC's port when it is in this daemon. It also gives
// out the daemon's CIDs (random, unique in the daemon) and is the fabric's
// Falcon demux: a packet from the fabric goes to the port owning its
// destination CID.
//
// Each NIC has a Agent owned by the NIC's port goroutine: all set-up
// state of the NIC's connections lives there, messages for it arrive as
// port work, its REQ retries are deadlines the port drives on its clock,
// and it opens and closes connections on its own endpoint. The manager
// itself only holds what every goroutine reads: the agents by MAC (fixed
// once the daemon is built) and the CID table.
//
//	dialer A (port goroutine)                 acceptor B (port goroutine)
//	Dial ─ REQ(A's CID, PSNs) ───────────────▶ onREQ: Connect, Up ─┐
//	     ◀─────────────────────────── REP(B's CID, PSNs) ──────────┘
//	onREP: Connect, Up
//
// Races and restarts: a REQ that crosses ours is ignored by the NIC with
// the lower MAC and accepted by the other (which drops its own set-up); a
// repeated REQ (our REP was lost) gets the same REP again; a new REQ for a
// connection that is up (the peer restarted, or found ours dead) replaces
// it: the protocol gets the new connection, then the old one is closed.
//
// Security (secure.go): on a secure fabric every message between daemons
// is a cmauth envelope whose sender must own the source MAC, REQ and REP
// offer each end's PSP SA, and the connection's datagrams are sealed and
// opened per connection; REKEY moves a connection to a new master-key
// generation, resent with backoff until the peer's REKEY_ACK. Bounds:
// maxPeersPerNIC connections per NIC, MaxConnsPerPeer of them with one
// other daemon, and an accepted sealed connection that hears nothing
// authentic within halfOpenAge is closed.
type Manager struct {
	net Net       // nil: no fabric
	sec *Security // nil: plaintext between daemons (insecure)

	mu     sync.RWMutex
	agents map[[6]byte]*Agent
	cids   map[uint32]FalconReceiver
	rand   interface{ Uint32() uint32 }

	// LinkHook, when set (before the ports run), sees the link of every
	// connection set up, from NIC from to NIC to, and returns the link the
	// connection uses (the daemon's capture taps it).
	LinkHook func(from, to [6]byte, l falcon.Link) falcon.Link
	// KeyHook, when set (before the ports run), is told every PSP key a
	// NIC of the daemon seals or opens with, as the SA is made or rekeyed
	// (keylog.go: the capture's key log). It runs on the NIC's port
	// goroutine and must not block.
	KeyHook func(KeyEvent)

	Stats Counters
}

// Net is what the connection manager needs of the fabric to other
// daemons; the daemon hands it the fabric's CM messages (ReceiveCM) and
// Falcon packets (ReceiveFalcon).
type Net interface {
	// SendToMAC sends a CM message toward the daemon that has NIC mac
	// (every peer daemon when that is not known yet).
	SendToMAC(mac [6]byte, msg []byte) error
	// Send sends a CM message to the daemon at dst.
	Send(dst netip.AddrPort, msg []byte) error
	// FalconLink is the link carrying Falcon packets to the daemon at peer.
	FalconLink(peer netip.AddrPort) falcon.Link
}

// BatchNet is a Net that can carry a port's Falcon packets a burst at a
// time: each NIC's agent takes one FalconBatch for its port and flushes it
// at the end of each burst of the port's work (port.OnIdle).
type BatchNet interface {
	Net
	// FalconBatch returns a batch owned by one port's goroutine.
	FalconBatch() FalconBatch
}

// FalconBatch gathers the Falcon packets its links send until Flush.
type FalconBatch interface {
	// Link is the link carrying Falcon packets to the daemon at peer
	// through the batch.
	Link(peer netip.AddrPort) falcon.Link
	// Flush sends what the batch holds.
	Flush()
}

// Counters count the connection manager's work and drops, for every
// protocol.
type Counters struct {
	Dials, REQSent, REQRecv, REPSent, REPRecv, REJSent, REJRecv   stats.Counter
	ConnsUp, Replaced, RepeatedREQ, RaceWon, GaveUp               stats.Counter
	DecodeErr, NoNIC, NoULP, Stale, TooMany, Spoofed              stats.Counter
	QueueFull, ConnErr, FalconNoCID, FalconShort                  stats.Counter
	NotOwner, NoSA, SealErr, FalconUnsealed, RekeySent, RekeyRecv stats.Counter
	TooManyFromPeer, AgedHalfOpen, RepeatedRekey                  stats.Counter
	RekeyResent, RekeyConfirmed, RekeyFailed, RekeyAckSent        stats.Counter
	RekeyAckStale, RekeyOld                                       stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "cm_dials", Help: "connection set-ups started by this daemon's NICs", Counter: &c.Dials},
		{Name: "cm_req_sent", Help: "REQs sent (retries included)", Counter: &c.REQSent},
		{Name: "cm_req_recv", Help: "REQs received", Counter: &c.REQRecv},
		{Name: "cm_rep_sent", Help: "REPs sent (repeats included)", Counter: &c.REPSent},
		{Name: "cm_rep_recv", Help: "REPs received", Counter: &c.REPRecv},
		{Name: "cm_rej_sent", Help: "REJs sent", Counter: &c.REJSent},
		{Name: "cm_rej_recv", Help: "REJs received (a REQ sent to every peer draws them from the daemons without the NIC)", Counter: &c.REJRecv},
		{Name: "cm_conns_up", Help: "connections set up", Counter: &c.ConnsUp},
		{Name: "cm_replaced", Help: "connections replaced by a new one (the peer restarted, or one end found the old one dead or broken)", Counter: &c.Replaced},
		{Name: "cm_repeated_req", Help: "REQs for a connection already up from that REQ, answered with the same REP", Counter: &c.RepeatedREQ},
		{Name: "cm_race_won", Help: "REQs ignored: they crossed ours and the lower MAC's REQ wins", Counter: &c.RaceWon},
		{Name: "cm_gave_up", Help: "set-ups abandoned after every REQ retry", Counter: &c.GaveUp},
		{Name: "cm_decode_err", Help: "CM messages that failed to decode", Counter: &c.DecodeErr},
		{Name: "cm_no_nic", Help: "CM messages for a MAC no NIC of this daemon has (a REQ is answered with a REJ)", Counter: &c.NoNIC},
		{Name: "cm_no_ulp", Help: "CM messages for a protocol the NIC has no function for (a REQ is answered with a REJ)", Counter: &c.NoULP},
		{Name: "cm_stale", Help: "REPs and REJs for no pending set-up", Counter: &c.Stale},
		{Name: "cm_too_many", Help: "REQs refused: the NIC has maxPeersPerNIC connections", Counter: &c.TooMany},
		{Name: "cm_too_many_from_peer", Help: "REQs refused: the sending daemon has MaxConnsPerPeer connections with the NIC", Counter: &c.TooManyFromPeer},
		{Name: "cm_aged_half_open", Help: "accepted sealed connections closed: no authentic datagram from the peer within halfOpenAge", Counter: &c.AgedHalfOpen},
		{Name: "cm_spoofed", Help: "CM messages from the fabric claiming a NIC of this daemon as their source", Counter: &c.Spoofed},
		{Name: "cm_queue_full", Help: "CM messages dropped: the NIC's port queue was full (the REQ is retried)", Counter: &c.QueueFull},
		{Name: "cm_conn_err", Help: "connections the endpoint or the protocol refused to set up", Counter: &c.ConnErr},
		{Name: "cm_falcon_no_cid", Help: "Falcon packets from the fabric for a CID no NIC owns", Counter: &c.FalconNoCID},
		{Name: "cm_falcon_short", Help: "Falcon datagrams from the fabric too short for a header", Counter: &c.FalconShort},
		{Name: "cm_not_owner", Help: "authenticated CM messages refused: the sending daemon may not speak for their source MAC (cmauth.Owners)", Counter: &c.NotOwner},
		{Name: "cm_no_sa", Help: "REQs and REPs from the fabric refused: no SA offered, or one of another PSP version", Counter: &c.NoSA},
		{Name: "cm_seal_err", Help: "CM messages or SAs that could not be sealed, derived or installed", Counter: &c.SealErr},
		{Name: "cm_falcon_unsealed", Help: "Falcon datagrams from the fabric for a CID with no receive SA (the fabric is secure: every one must be sealed)", Counter: &c.FalconUnsealed},
		{Name: "cm_rekey_sent", Help: "REKEYs sent: a connection moved to an SPI of a new master-key generation", Counter: &c.RekeySent},
		{Name: "cm_rekey_recv", Help: "REKEYs received", Counter: &c.RekeyRecv},
		{Name: "cm_repeated_rekey", Help: "REKEYs for the SPI the connection already seals with (a resend: its REKEY_ACK was lost), answered again and not applied", Counter: &c.RepeatedRekey},
		{Name: "cm_rekey_resent", Help: "REKEYs resent: no REKEY_ACK within the backoff (cmRekeyRetryFirst, doubling)", Counter: &c.RekeyResent},
		{Name: "cm_rekey_confirmed", Help: "REKEYs confirmed by the peer's REKEY_ACK: it seals with the new SPI", Counter: &c.RekeyConfirmed},
		{Name: "cm_rekey_failed", Help: "REKEYs abandoned after cmRekeyMaxTries unanswered sends: the connection stays on its previous SPI, still accepted until the next rotation", Counter: &c.RekeyFailed},
		{Name: "cm_rekey_ack_sent", Help: "REKEY_ACKs sent (a repeated REKEY is answered again)", Counter: &c.RekeyAckSent},
		{Name: "cm_rekey_ack_stale", Help: "REKEY_ACKs ignored: for no connection, or for no REKEY awaiting one (a late answer to a resend)", Counter: &c.RekeyAckStale},
		{Name: "cm_rekey_old", Help: "REKEYs ignored: they offered an older master-key generation than the connection seals with (a delayed resend)", Counter: &c.RekeyOld},
	}
}

// CM retry policy.
const (
	cmRetryEvery = 200 * time.Millisecond
	cmMaxTries   = 25
)

// maxPeersPerNIC bounds the connections (all protocols) a NIC has or is
// setting up; each costs a Falcon connection's state.
const maxPeersPerNIC = 1024

// MaxConnsPerPeer bounds the connections one other daemon may set up
// with a NIC (all protocols, all its NICs): one daemon cannot take every
// slot of a NIC (maxPeersPerNIC) from the others.
const MaxConnsPerPeer = 64

// halfOpenAge is how long a sealed connection this NIC accepted may stay
// without one authentic datagram from its peer before the CM closes it: a
// forged or abandoned set-up does not hold a slot and a Falcon
// connection's state for ever. (A dialer whose connection was aged finds
// it dead on first use and sets up a new one.)
const halfOpenAge = 30 * time.Second

// New returns a daemon's connection manager whose messages to other
// daemons go over n (nil: NICs of this daemon only).
func New(n Net) *Manager {
	return &Manager{net: n, agents: map[[6]byte]*Agent{}, cids: map[uint32]FalconReceiver{}, rand: port.CryptoRand{}}
}

// Attach gives the NIC with MAC mac, whose Falcon port is port, its agent.
// Call before the port runs; the protocols then register (Register).
func (cm *Manager) Attach(mac [6]byte, port *port.Port) *Agent {
	a := &Agent{cm: cm, mac: mac, port: port, conns: map[cmKey]*cmConn{}}
	port.AddTimers(a)
	cm.mu.Lock()
	cm.agents[mac] = a
	cm.mu.Unlock()
	return a
}

func (cm *Manager) agent(mac [6]byte) *Agent {
	cm.mu.RLock()
	defer cm.mu.RUnlock()
	return cm.agents[mac]
}

// AllocCID reserves a random CID (24 bits, non-zero) unique in the daemon
// for owner: Falcon packets from the fabric with that DCID go to it.
func (cm *Manager) AllocCID(owner FalconReceiver) uint32 {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	for {
		c := cm.rand.Uint32() & (1<<24 - 1)
		if c != 0 && cm.cids[c] == nil {
			cm.cids[c] = owner
			return c
		}
	}
}

// ReleaseCID frees a CID from AllocCID.
func (cm *Manager) ReleaseCID(cid uint32) {
	cm.mu.Lock()
	delete(cm.cids, cid)
	cm.mu.Unlock()
}

// CIDOwner returns the receiver of Falcon packets for CID cid, or nil.
func (cm *Manager) CIDOwner(cid uint32) FalconReceiver {
	cm.mu.RLock()
	defer cm.mu.RUnlock()
	return cm.cids[cid]
}

// CIDPort returns the port owning CID cid, its connection sealed or not,
// or nil.
func (cm *Manager) CIDPort(cid uint32) *port.Port {
	switch r := cm.CIDOwner(cid).(type) {
	case *port.Port:
		return r
	case sealedRx:
		return r.p
	}
	return nil
}

// FalconReceiver takes Falcon packets from the fabric for the CIDs it owns
// (a NIC's port).
type FalconReceiver interface {
	ReceiveFalcon(pkt []byte, flow uint32)
}

// ReceiveFalcon hands a Falcon packet from the fabric to the port owning
// its destination CID (on the fabric's goroutine).
func (cm *Manager) ReceiveFalcon(from netip.AddrPort, flow uint32, payload []byte) {
	if cm.sec != nil {
		cm.receiveSealedFalcon(flow, payload)
		return
	}
	if len(payload) < 4 {
		cm.Stats.FalconShort.Inc()
		return
	}
	cid := wire.Packet(payload).CID()
	cm.mu.RLock()
	r := cm.cids[cid]
	cm.mu.RUnlock()
	if r == nil {
		cm.Stats.FalconNoCID.Inc()
		return
	}
	r.ReceiveFalcon(payload, flow)
}

// ReceiveCM takes a CM message from the fabric (on the fabric's
// goroutine): it is checked here and handed to the destination NIC's
// agent as port work.
func (cm *Manager) ReceiveCM(from netip.AddrPort, flow uint32, payload []byte) {
	m, ok := cm.openCM(payload)
	if !ok {
		return
	}
	cm.deliver(m, cmRoute{addr: from})
}

// deliver hands m to the agent of NIC m.dst as work for its port; a REQ
// that no agent can take is answered with a REJ along r.
func (cm *Manager) deliver(m cmMsg, r cmRoute) {
	cm.mu.RLock()
	a := cm.agents[m.dst]
	served := a != nil && a.proto(m.protocol()) != nil
	cm.mu.RUnlock()
	switch {
	case a == nil:
		cm.Stats.NoNIC.Inc()
		cm.reject(m, r)
	case !served:
		cm.Stats.NoULP.Inc()
		cm.reject(m, r)
	case !a.port.TryDo(func(*falcon.Endpoint) { a.receive(m, r) }):
		cm.Stats.QueueFull.Inc()
	}
}

// reject answers a REQ with a REJ (other messages get none).
func (cm *Manager) reject(m cmMsg, r cmRoute) {
	if m.typ != cmREQ {
		return
	}
	rej := cmMsg{typ: cmREJ, proto: m.proto, src: m.dst, dst: m.src, dstCID: m.srcCID}
	cm.Stats.REJSent.Inc()
	cm.send(rej, r)
}

// send sends m along r: to a NIC of this daemon (as work for its port),
// to the daemon at r.addr, or, r zero, toward the daemon that has m.dst.
func (cm *Manager) send(m cmMsg, r cmRoute) {
	switch {
	case r.local != nil:
		cm.deliver(m, cmRoute{local: cm.agent(m.src)})
	case r.addr.IsValid():
		cm.toNet(r.addr, &m)
	case cm.agent(m.dst) != nil:
		cm.deliver(m, cmRoute{local: cm.agent(m.src)})
	default:
		cm.toNet(netip.AddrPort{}, &m)
	}
}

// cmRoute is where a CM message came from, and where answers go: the
// agent of a NIC of this daemon, or another daemon's fabric address.
type cmRoute struct {
	local *Agent
	addr  netip.AddrPort
}

// Proto is a protocol's part in its connections' set-up; its functions
// run on the port's goroutine.
type Proto struct {
	// Config sets the protocol's connection options (ordering, windows,
	// timeouts) on a new connection's config.
	Config func(c *falcon.ConnConfig)
	// Up takes a new connection to peer; any older one is then Down. An
	// error refuses it (the connection is closed, counted).
	Up func(peer [6]byte, c *falcon.Conn) error
	// Down says connection c to peer is closed (replaced or dead): the
	// protocol forgets it.
	Down func(peer [6]byte, c *falcon.Conn)
	// Failed says a set-up to peer was abandoned after every REQ retry
	// (nil: nothing to do).
	Failed func(peer [6]byte)
	// Local sets the protocol's options for a connection to a NIC of this
	// daemon, after Config (nil: as any other). Their port link has no
	// wire, so a larger MTU moves a message in fewer transactions. Both
	// ends apply it, each seeing the other as local.
	Local func(c *falcon.ConnConfig)
}

// Agent is one NIC's part of the connection manager, owned by the NIC's
// port goroutine (every method but Register runs there).
type Agent struct {
	cm     *Manager
	mac    [6]byte
	port   *port.Port
	protos [16]*Proto
	conns  map[cmKey]*cmConn
	// keys are the NIC's master keys, pspStats its SAs' counters
	// (SetKeys; nil: connections are not sealed).
	keys     *psp.MasterKeys
	pspStats *psp.Counters
	// upAddr is the daemon a connection being handed to its protocol
	// (Proto.Up) comes from (PeerOwner).
	upAddr netip.AddrPort
	// due is the earliest REQ retry (NextDeadline), has whether any.
	due clock.Time
	has bool
	// batch carries the port's Falcon packets to other daemons when the
	// Net batches (BatchNet); made on the port's goroutine at first use.
	batch FalconBatch
}

// cmKey names one connection of a NIC: its protocol and peer NIC.
type cmKey struct {
	proto wire.ProtocolType
	peer  [6]byte
}

// cmConn is one connection's set-up state.
type cmConn struct {
	cfg     falcon.ConnConfig // ours: pending while dialing, else conn's
	conn    *falcon.Conn      // up, or nil
	dialing bool              // our REQ (cfg.SCID) is out
	tries   int
	retryAt clock.Time
	dcid    uint32 // the peer's CID of conn
	rep     *cmMsg // the REP we sent for conn (a repeated REQ gets it again)
	// Sealed connections (Security): rx opens conn's datagrams, tx seals
	// them toward the daemon at addr; pend and offer are the receive SA
	// and its offer of the set-up under way.
	rx    *connRx
	tx    *sealLink
	addr  netip.AddrPort
	pend  *connRx
	offer cmauth.SA
	// ageAt is when a connection this NIC accepted is closed if its
	// receive SA has opened nothing by then (half-open: halfOpenAge).
	ageAt    clock.Time
	halfOpen bool
	// rekey is this NIC's REKEY of the connection awaiting its
	// REKEY_ACK, or the last one's outcome (secure.go); txGen is the
	// generation of the peer's REKEY the connection last took.
	rekey rekeyState
	txGen uint32
}

// Register has the agent set up connections of protocol proto for p
// (before the port runs).
func (a *Agent) Register(proto wire.ProtocolType, p Proto) {
	a.cm.mu.Lock() // the fabric's goroutine may look already (deliver)
	a.protos[proto] = &p
	a.cm.mu.Unlock()
}

// proto returns the part of protocol t, nil if none is registered (any
// value: t may come from a message).
func (a *Agent) proto(t wire.ProtocolType) *Proto {
	if int(t) >= len(a.protos) {
		return nil
	}
	return a.protos[t]
}

// MAC returns the agent's NIC's MAC.
func (a *Agent) MAC() [6]byte { return a.mac }

// Dial makes sure a connection of proto to NIC peer is up or being set
// up: a dead one is closed and replaced.
func (a *Agent) Dial(proto wire.ProtocolType, peer [6]byte) {
	c := a.conns[cmKey{proto, peer}]
	if c != nil && c.conn != nil && c.conn.Dead() {
		a.down(cmKey{proto, peer}, c)
		c.conn = nil
	}
	if c != nil && (c.conn != nil || c.dialing) {
		return
	}
	a.dial(proto, peer, c)
}

// Redial starts setting up a new connection of proto to peer replacing
// conn (a protocol found it broken), unless one is already under way or
// conn is not the current one.
func (a *Agent) Redial(proto wire.ProtocolType, peer [6]byte, conn *falcon.Conn) {
	c := a.conns[cmKey{proto, peer}]
	if c == nil || c.dialing || c.conn != conn {
		return
	}
	a.dial(proto, peer, c)
}

// dial starts a set-up: a new CID and sequence numbers, then REQs until a
// REP.
func (a *Agent) dial(proto wire.ProtocolType, peer [6]byte, c *cmConn) {
	p := a.proto(proto)
	if p == nil || peer == a.mac {
		return
	}
	key := cmKey{proto, peer}
	if c == nil {
		if len(a.conns) >= maxPeersPerNIC {
			a.cm.Stats.TooMany.Inc()
			return
		}
		c = &cmConn{}
		a.conns[key] = c
	}
	a.cm.Stats.Dials.Inc()
	cfg := falcon.ConnConfig{SCID: a.cm.AllocCID(a.port), Protocol: proto}
	p.Config(&cfg)
	a.port.RandomPSNs(&cfg)
	c.pend = nil
	if a.sealed(peer) {
		rx, sa, ok := a.newRx(cfg.SCID)
		if !ok {
			a.cm.ReleaseCID(cfg.SCID)
			if c.conn == nil {
				delete(a.conns, key)
			}
			return
		}
		c.pend, c.offer = rx, sa
	}
	c.cfg, c.dialing, c.tries = cfg, true, 0
	a.sendREQ(key, c)
}

func (a *Agent) sendREQ(key cmKey, c *cmConn) {
	c.tries++
	c.retryAt = a.port.Clock().Now() + cmRetryEvery
	a.setDue(c.retryAt)
	a.cm.Stats.REQSent.Inc()
	m := cmMsg{typ: cmREQ, proto: cmProtoByte(key.proto), src: a.mac, dst: key.peer, srcCID: c.cfg.SCID,
		reqPSN: uint32(c.cfg.TxReqPSN), dataPSN: uint32(c.cfg.TxDataPSN), rsn: uint32(c.cfg.TxRSN)}
	if c.pend != nil {
		m.sa, m.hasSA = c.offer, true
	}
	a.cm.send(m, cmRoute{})
}

// receive handles a CM message for this NIC (on the port's goroutine).
func (a *Agent) receive(m cmMsg, r cmRoute) {
	key := cmKey{m.protocol(), m.src}
	c := a.conns[key]
	switch m.typ {
	case cmREQ:
		a.cm.Stats.REQRecv.Inc()
		a.onREQ(key, c, m, r)
	case cmREP:
		a.cm.Stats.REPRecv.Inc()
		if c == nil || !c.dialing || c.cfg.SCID != m.dstCID {
			a.cm.Stats.Stale.Inc()
			return
		}
		if c.pend != nil && (!m.hasSA || r.local != nil) {
			a.cm.Stats.NoSA.Inc()
			return
		}
		cfg := c.cfg
		cfg.DCID = m.srcCID
		cfg.RxReqPSN, cfg.RxDataPSN, cfg.RxRSN = wire.PSN(m.reqPSN), wire.PSN(m.dataPSN), wire.RSN(m.rsn)
		c.dialing, c.rep = false, nil
		a.rearm()
		rx := c.pend
		c.pend = nil
		a.install(key, c, cfg, r, rx, &m)
	case cmREJ:
		a.cm.Stats.REJRecv.Inc()
		if c == nil || !c.dialing || c.cfg.SCID != m.dstCID {
			a.cm.Stats.Stale.Inc()
		}
		// Another daemon has no such NIC: a REQ sent to every peer draws
		// REJs from all but the right one. Keep retrying.
	case cmREKEY:
		a.onREKEY(c, m)
	case cmREKEYACK:
		a.onREKEYACK(c, m)
	}
}

// onREQ answers a REQ from NIC key.peer.
func (a *Agent) onREQ(key cmKey, c *cmConn, m cmMsg, r cmRoute) {
	sealed := r.local == nil && a.sealed(key.peer)
	if sealed && !m.hasSA {
		a.cm.Stats.NoSA.Inc()
		return
	}
	switch {
	case c == nil && len(a.conns) >= maxPeersPerNIC:
		a.cm.Stats.TooMany.Inc()
		a.cm.reject(m, r)
		return
	case c == nil && r.addr.IsValid() && a.peerConns(r.addr) >= MaxConnsPerPeer:
		a.cm.Stats.TooManyFromPeer.Inc()
		a.cm.reject(m, r)
		return
	case c == nil:
		c = &cmConn{}
		a.conns[key] = c
	case c.conn != nil && !c.dialing && c.dcid == m.srcCID:
		a.cm.Stats.RepeatedREQ.Inc()
		if c.rep != nil {
			a.sendREP(c.rep, r)
		}
		return
	case c.dialing && lessMAC(a.mac, key.peer):
		a.cm.Stats.RaceWon.Inc()
		return // simultaneous set-up: the lower MAC's REQ wins
	}
	if c.dialing { // our REQ lost the race
		a.cm.ReleaseCID(c.cfg.SCID)
		c.dialing, c.pend = false, nil
		a.rearm()
	}
	cfg := falcon.ConnConfig{SCID: a.cm.AllocCID(a.port), DCID: m.srcCID, Protocol: key.proto}
	a.proto(key.proto).Config(&cfg)
	a.port.RandomPSNs(&cfg)
	cfg.RxReqPSN, cfg.RxDataPSN, cfg.RxRSN = wire.PSN(m.reqPSN), wire.PSN(m.dataPSN), wire.RSN(m.rsn)
	rep := cmMsg{typ: cmREP, proto: m.proto, src: a.mac, dst: key.peer, srcCID: cfg.SCID, dstCID: m.srcCID,
		reqPSN: uint32(cfg.TxReqPSN), dataPSN: uint32(cfg.TxDataPSN), rsn: uint32(cfg.TxRSN)}
	var rx *connRx
	if sealed {
		var ok bool
		if rx, rep.sa, ok = a.newRx(cfg.SCID); !ok {
			a.cm.ReleaseCID(cfg.SCID)
			if c.conn == nil {
				delete(a.conns, key)
			}
			return
		}
		rep.hasSA = true
	}
	if !a.install(key, c, cfg, r, rx, &m) {
		return
	}
	if rx != nil {
		c.halfOpen, c.ageAt = true, a.port.Clock().Now()+halfOpenAge
		a.setDue(c.ageAt)
	}
	c.rep = &rep
	a.sendREP(c.rep, r)
}

func (a *Agent) sendREP(m *cmMsg, r cmRoute) {
	a.cm.Stats.REPSent.Inc()
	if r.local != nil || r.addr.IsValid() {
		a.cm.send(*m, r)
	}
}

// install connects cfg toward the peer along r, hands the connection to
// its protocol and then closes the one it replaces. It reports whether the
// connection is up.
//
// rx is the connection's receive SA when it is sealed (nil: not), and m
// the peer's message offering the SA to seal with.
func (a *Agent) install(key cmKey, c *cmConn, cfg falcon.ConnConfig, r cmRoute, rx *connRx, m *cmMsg) bool {
	var tx *sealLink
	switch {
	case r.local != nil:
		cfg.Peer = a.port.LinkTo(r.local.port)
		if f := a.proto(key.proto).Local; f != nil {
			f(&cfg)
		}
	case rx != nil:
		var err error
		if tx, err = a.newSealLink(r.addr, &m.sa); err != nil {
			a.cm.Stats.SealErr.Inc()
			a.cm.ReleaseCID(cfg.SCID)
			if c.conn == nil {
				delete(a.conns, key)
			}
			return false
		}
		cfg.Peer = tx
	case a.cm.net != nil:
		cfg.Peer = a.falconLink(r.addr)
	}
	if h := a.cm.LinkHook; h != nil && cfg.Peer != nil {
		if s, ok := cfg.Peer.(*sealLink); ok {
			s.inner = h(a.mac, key.peer, s.inner) // the hook sees the wire's link, under the sealing
		} else {
			cfg.Peer = h(a.mac, key.peer, cfg.Peer)
		}
	}
	p := a.proto(key.proto)
	conn, err := a.port.Connect(cfg)
	if err == nil {
		a.upAddr = r.addr
		err = p.Up(key.peer, conn)
		a.upAddr = netip.AddrPort{}
		if err != nil {
			_ = a.port.CloseConn(conn.SCID())
		}
	}
	if err != nil {
		a.cm.Stats.ConnErr.Inc()
		a.cm.ReleaseCID(cfg.SCID)
		if c.conn == nil {
			delete(a.conns, key)
		}
		return false
	}
	a.cm.Stats.ConnsUp.Inc()
	if c.conn != nil {
		a.cm.Stats.Replaced.Inc()
		a.down(key, c)
	}
	c.conn, c.cfg, c.dcid = conn, cfg, cfg.DCID
	c.rx, c.tx, c.addr, c.halfOpen = rx, tx, r.addr, false
	c.rekey, c.txGen = rekeyState{}, 0
	return true
}

// falconLink is the link for a connection's Falcon packets to the daemon
// at addr: through the port's batch if the Net batches (on the port's
// goroutine).
func (a *Agent) falconLink(addr netip.AddrPort) falcon.Link {
	bn, ok := a.cm.net.(BatchNet)
	if !ok {
		return a.cm.net.FalconLink(addr)
	}
	if a.batch == nil {
		a.batch = bn.FalconBatch()
		a.port.OnIdle(a.batch.Flush)
	}
	return a.batch.Link(addr)
}

// down closes c's connection after telling its protocol.
func (a *Agent) down(key cmKey, c *cmConn) {
	old := c.conn
	a.proto(key.proto).Down(key.peer, old)
	_ = a.port.CloseConn(old.SCID())
	a.cm.ReleaseCID(old.SCID())
}

// setDue moves the agent's next deadline to at if that is earlier.
func (a *Agent) setDue(at clock.Time) {
	if !a.has || at < a.due {
		a.due, a.has = at, true
	}
}

// rearm recomputes the next deadline from the set-ups under way.
func (a *Agent) rearm() {
	a.has = false
	for _, c := range a.conns {
		if c.dialing {
			a.setDue(c.retryAt)
		}
		if c.halfOpen {
			a.setDue(c.ageAt)
		}
		if c.rekey.pending() {
			a.setDue(c.rekey.at)
		}
	}
}

// NextDeadline implements the port's ULP timers: the next REQ retry,
// half-open age or REKEY resend.
func (a *Agent) NextDeadline() (time.Duration, bool) { return a.due, a.has }

// OnTimer resends the REQs and REKEYs that are due, and gives up on
// set-ups and REKEYs that have had every retry.
func (a *Agent) OnTimer(now time.Duration) {
	a.age(now)
	a.retryRekeys(now)
	for key, c := range a.conns {
		if !c.dialing || c.retryAt > now {
			continue
		}
		if c.tries < cmMaxTries {
			a.sendREQ(key, c)
			continue
		}
		a.cm.Stats.GaveUp.Inc()
		a.cm.ReleaseCID(c.cfg.SCID)
		c.dialing, c.pend = false, nil
		if c.conn == nil {
			delete(a.conns, key)
		}
		if p := a.proto(key.proto); p.Failed != nil {
			p.Failed(key.peer)
		}
	}
	a.rearm()
}

func lessMAC(a, b [6]byte) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// peerConns counts the NIC's connections with the daemon at addr.
func (a *Agent) peerConns(addr netip.AddrPort) int {
	n := 0
	for _, c := range a.conns {
		if c.addr == addr {
			n++
		}
	}
	return n
}

// age closes the half-open connections whose time is up, and ends the
// half-open state of those that heard from their peer.
func (a *Agent) age(now time.Duration) {
	for key, c := range a.conns {
		if !c.halfOpen || c.ageAt > now {
			continue
		}
		c.halfOpen = false
		if c.rx != nil && c.rx.seen || c.conn == nil || c.dialing {
			continue
		}
		a.cm.Stats.AgedHalfOpen.Inc()
		a.down(key, c)
		delete(a.conns, key)
	}
}
