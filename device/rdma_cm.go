package device

import (
	"net/netip"
	"sync"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/wire"
	"falconnic/internal/stats"
	"falconnic/verbs"
)

// RDMAHub is the daemon's connection manager for RDMA: it knows the RDMA
// functions of the daemon's NICs by MAC, gives out CIDs unique in the
// daemon (so a Falcon packet from the fabric finds its NIC by DCID), and
// sets up one ordered Falcon connection per pair of NICs — directly for two
// NICs of this daemon, with REQ/REP messages over the fabric (KindCM)
// otherwise.
type RDMAHub struct {
	fabric *Fabric

	mu      sync.Mutex
	funcs   map[verbs.MAC]*RDMAFunc
	cids    map[uint32]FalconReceiver
	nextCID uint32
	pairs   map[[2]verbs.MAC]*cmPair // key: (local, remote)
	ulpCM   map[uint8]func(from netip.AddrPort, m cmMsg)

	Stats RDMAHubCounters
}

// cmPair is the set-up state of one local NIC's connection to a peer.
type cmPair struct {
	r      *RDMAFunc
	peer   verbs.MAC
	cfg    falcon.ConnConfig
	up     bool
	rep    []byte // REP we sent (answering a repeated REQ)
	tries  int
	remote bool
}

// RDMAHubCounters count the connection manager's work and drops.
type RDMAHubCounters struct {
	LocalConns, REQSent, REQRecv, REPRecv, REJRecv stats.Counter
	CMDecodeErr, CMNoNIC, CMStale, CMGaveUp        stats.Counter
	Replaced, CMTooMany, CMNoULP                   stats.Counter
	FalconNoCID, FalconShort                       stats.Counter
}

// Set lists the counters with help text.
func (c *RDMAHubCounters) Set() stats.Set {
	return stats.Set{
		{Name: "cm_local_conns", Help: "connections set up between two NICs of this daemon", Counter: &c.LocalConns},
		{Name: "cm_req_sent", Help: "REQs sent over the fabric (retries included)", Counter: &c.REQSent},
		{Name: "cm_req_recv", Help: "REQs received", Counter: &c.REQRecv},
		{Name: "cm_rep_recv", Help: "REPs received", Counter: &c.REPRecv},
		{Name: "cm_rej_recv", Help: "REJs received", Counter: &c.REJRecv},
		{Name: "cm_decode_err", Help: "CM messages that failed to decode", Counter: &c.CMDecodeErr},
		{Name: "cm_no_nic", Help: "REQs for a MAC no NIC of this daemon has", Counter: &c.CMNoNIC},
		{Name: "cm_stale", Help: "REP/REJ for no pending set-up", Counter: &c.CMStale},
		{Name: "cm_gave_up", Help: "set-ups abandoned after every REQ retry", Counter: &c.CMGaveUp},
		{Name: "cm_too_many", Help: "REQs refused: the NIC has maxPeersPerNIC connections", Counter: &c.CMTooMany},
		{Name: "cm_no_ulp", Help: "CM messages for a ULP no CM handles", Counter: &c.CMNoULP},
		{Name: "cm_replaced", Help: "connections replaced by a peer's new REQ (peer restarted or found ours dead)", Counter: &c.Replaced},
		{Name: "falcon_no_cid", Help: "Falcon packets from the fabric for a CID no NIC owns", Counter: &c.FalconNoCID},
		{Name: "falcon_short", Help: "Falcon datagrams too short for a header", Counter: &c.FalconShort},
	}
}

// CM retry policy.
const (
	cmRetryEvery = 200 * time.Millisecond
	cmMaxTries   = 25
)

// NewRDMAHub returns a hub; with a fabric it handles KindFalcon and KindCM.
func NewRDMAHub(f *Fabric) *RDMAHub {
	h := &RDMAHub{fabric: f, funcs: map[verbs.MAC]*RDMAFunc{}, cids: map[uint32]FalconReceiver{},
		nextCID: 1, pairs: map[[2]verbs.MAC]*cmPair{}}
	if f != nil {
		_ = f.Handle(KindFalcon, FabricReceiverFunc(h.receiveFalcon))
		_ = f.Handle(KindCM, FabricReceiverFunc(h.receiveCM))
	}
	return h
}

func (h *RDMAHub) add(r *RDMAFunc) {
	h.mu.Lock()
	h.funcs[r.mac] = r
	h.mu.Unlock()
}

// FalconReceiver takes Falcon packets from the fabric for the CIDs it owns
// (a NIC's FalconPort).
type FalconReceiver interface {
	ReceiveFalcon(pkt []byte, flow uint32)
}

// AllocCID reserves a CID unique in the daemon for owner: Falcon packets
// from the fabric with that DCID go to it. Other ULPs sharing the fabric
// use this so one KindFalcon receiver serves every endpoint.
func (h *RDMAHub) AllocCID(owner FalconReceiver) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.allocCID(owner)
}

// ReleaseCID frees a CID from AllocCID.
func (h *RDMAHub) ReleaseCID(cid uint32) {
	h.mu.Lock()
	delete(h.cids, cid)
	h.mu.Unlock()
}

// allocCID returns a CID unique in the daemon, owned by r (h.mu held).
func (h *RDMAHub) allocCID(r FalconReceiver) uint32 {
	for {
		c := h.nextCID
		h.nextCID = (h.nextCID + 1) & (1<<24 - 1)
		if c != 0 && h.cids[c] == nil {
			h.cids[c] = r
			return c
		}
	}
}

// connect starts setting up r's connection to the NIC with MAC peer. It is
// called on r's goroutine and never blocks on another NIC's.
func (h *RDMAHub) connect(r *RDMAFunc, peer verbs.MAC) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := [2]verbs.MAC{r.mac, peer}
	if h.pairs[key] != nil {
		return // set-up under way (maybe started by the peer)
	}
	cfg := falcon.ConnConfig{Ordered: true}
	r.port.ep.RandomPSNs(&cfg)
	if p := h.funcs[peer]; p != nil {
		var mirror falcon.ConnConfig
		r.port.ep.RandomPSNs(&mirror) // crypto/rand: safe from any goroutine
		cfg.SCID, cfg.DCID = h.allocCID(r.port), h.allocCID(p.port)
		cfg.RxReqPSN, cfg.RxDataPSN, cfg.RxRSN = mirror.TxReqPSN, mirror.TxDataPSN, mirror.TxRSN
		pc := falcon.Mirror(cfg)
		h.pairs[key] = &cmPair{r: r, peer: peer, cfg: cfg, up: true}
		h.pairs[[2]verbs.MAC{peer, r.mac}] = &cmPair{r: p, peer: r.mac, cfg: pc, up: true}
		h.Stats.LocalConns.Inc()
		// The peer connects first, so nothing we send finds no connection.
		// Each end's packets go straight to the other's port (linkTo).
		go p.Do(func(p *RDMAFunc) {
			pc.Peer = p.port.linkTo(r.port)
			cp, _ := p.port.Connect(pc)
			p.connected(r.mac, cp)
			go r.Do(func(r *RDMAFunc) {
				cfg.Peer = r.port.linkTo(p.port)
				c, _ := r.port.Connect(cfg)
				r.connected(peer, c)
			})
		})
		return
	}
	if h.fabric == nil {
		go r.Do(func(r *RDMAFunc) { r.connected(peer, nil) })
		return
	}
	cfg.SCID = h.allocCID(r.port)
	pr := &cmPair{r: r, peer: peer, cfg: cfg, remote: true}
	h.pairs[key] = pr
	h.sendREQ(pr)
}

// sendREQ sends (or resends) a REQ: to the peer daemon that last showed
// the MAC, or to every peer (h.mu held).
func (h *RDMAHub) sendREQ(pr *cmPair) {
	pr.tries++
	m := cmMsg{typ: cmREQ, src: pr.r.mac, dst: pr.peer, srcCID: pr.cfg.SCID,
		reqPSN: uint32(pr.cfg.TxReqPSN), dataPSN: uint32(pr.cfg.TxDataPSN), rsn: uint32(pr.cfg.TxRSN)}
	b := m.append(nil)
	f := h.fabric
	if p := f.macs.lookup(ethAddr(pr.peer), f.opts.Clock.Now()); p != nil {
		_ = f.sendPeer(p, KindCM, 0, b)
	} else {
		for _, p := range f.peers.Load().list {
			_ = f.sendPeer(p, KindCM, 0, b)
		}
	}
	h.Stats.REQSent.Inc()
	key := [2]verbs.MAC{pr.r.mac, pr.peer}
	time.AfterFunc(cmRetryEvery, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.pairs[key] != pr || pr.up {
			return
		}
		if pr.tries >= cmMaxTries {
			h.Stats.CMGaveUp.Inc()
			delete(h.pairs, key)
			delete(h.cids, pr.cfg.SCID)
			r, peer := pr.r, pr.peer
			go r.Do(func(r *RDMAFunc) { r.connected(peer, nil) })
			return
		}
		h.sendREQ(pr)
	})
}

// HandleCM hands CM messages naming ULP proto (byte 6, non-zero) to fn,
// called on the fabric's goroutine without the hub's lock.
func (h *RDMAHub) HandleCM(proto uint8, fn func(from netip.AddrPort, m cmMsg)) {
	h.mu.Lock()
	if h.ulpCM == nil {
		h.ulpCM = map[uint8]func(netip.AddrPort, cmMsg){}
	}
	h.ulpCM[proto] = fn
	h.mu.Unlock()
}

// receiveCM handles a CM message from the fabric.
func (h *RDMAHub) receiveCM(from netip.AddrPort, flow uint32, payload []byte) {
	m, err := decodeCM(payload)
	if err != nil {
		h.Stats.CMDecodeErr.Inc()
		return
	}
	if m.proto != 0 {
		h.mu.Lock()
		fn := h.ulpCM[m.proto]
		h.mu.Unlock()
		if fn == nil {
			h.Stats.CMNoULP.Inc()
			return
		}
		fn(from, m)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch m.typ {
	case cmREQ:
		h.Stats.REQRecv.Inc()
		h.onREQ(from, m)
	case cmREP:
		h.Stats.REPRecv.Inc()
		pr := h.pairs[[2]verbs.MAC{m.dst, m.src}]
		if pr == nil || !pr.remote || pr.up || pr.cfg.SCID != m.dstCID {
			h.Stats.CMStale.Inc()
			return
		}
		pr.up = true
		cfg := pr.cfg
		cfg.DCID = m.srcCID
		cfg.RxReqPSN, cfg.RxDataPSN, cfg.RxRSN = wire.PSN(m.reqPSN), wire.PSN(m.dataPSN), wire.RSN(m.rsn)
		cfg.Peer = h.fabric.Link(from, KindFalcon)
		pr.cfg = cfg
		r, peer := pr.r, pr.peer
		go r.Do(func(r *RDMAFunc) {
			c, _ := r.port.Connect(cfg)
			r.connected(peer, c)
		})
	case cmREJ:
		h.Stats.REJRecv.Inc()
		pr := h.pairs[[2]verbs.MAC{m.dst, m.src}]
		if pr == nil || pr.up || pr.cfg.SCID != m.dstCID {
			h.Stats.CMStale.Inc()
			return
		}
		// Another daemon has no such NIC; keep waiting for the right one
		// (a REQ sent to every peer draws REJs from the others).
	}
}

// onREQ answers a REQ for one of our NICs (h.mu held).
func (h *RDMAHub) onREQ(from netip.AddrPort, m cmMsg) {
	r := h.funcs[m.dst]
	if r == nil {
		h.Stats.CMNoNIC.Inc()
		rej := cmMsg{typ: cmREJ, src: m.dst, dst: m.src, dstCID: m.srcCID}
		_ = h.fabric.Send(KindCM, from, 0, rej.append(nil))
		return
	}
	key := [2]verbs.MAC{m.dst, m.src}
	old := uint32(0)
	if pr := h.pairs[key]; pr != nil {
		switch {
		case pr.up && pr.rep != nil && pr.cfg.DCID == m.srcCID:
			_ = h.fabric.Send(KindCM, from, 0, pr.rep) // our REP was lost
			return
		case !pr.up && pr.remote && lessMAC(m.dst, m.src):
			return // simultaneous set-up: the lower MAC's REQ wins
		case pr.up && !pr.remote:
			h.Stats.CMStale.Inc()
			return // the MAC is a NIC of this daemon: a spoof
		case pr.up:
			// The peer set up a new connection (its daemon restarted, or
			// it found ours dead): ours is replaced.
			h.Stats.Replaced.Inc()
			old = pr.cfg.SCID
		}
		delete(h.cids, pr.cfg.SCID) // our REQ lost the race, or replaced
	}
	if old == 0 && h.pairsOf(r) >= maxPeersPerNIC {
		h.Stats.CMTooMany.Inc()
		rej := cmMsg{typ: cmREJ, src: m.dst, dst: m.src, dstCID: m.srcCID}
		_ = h.fabric.Send(KindCM, from, 0, rej.append(nil))
		return
	}
	cfg := falcon.ConnConfig{Ordered: true}
	r.port.ep.RandomPSNs(&cfg) // crypto/rand: safe on the fabric's goroutine
	cfg.SCID, cfg.DCID = h.allocCID(r.port), m.srcCID
	cfg.RxReqPSN, cfg.RxDataPSN, cfg.RxRSN = wire.PSN(m.reqPSN), wire.PSN(m.dataPSN), wire.RSN(m.rsn)
	cfg.Peer = h.fabric.Link(from, KindFalcon)
	rep := cmMsg{typ: cmREP, src: m.dst, dst: m.src, srcCID: cfg.SCID, dstCID: m.srcCID,
		reqPSN: uint32(cfg.TxReqPSN), dataPSN: uint32(cfg.TxDataPSN), rsn: uint32(cfg.TxRSN)}
	pr := &cmPair{r: r, peer: m.src, cfg: cfg, up: true, remote: true, rep: rep.append(nil)}
	h.pairs[key] = pr
	peer := verbs.MAC(m.src)
	go r.Do(func(r *RDMAFunc) {
		if old != 0 {
			r.dropConn(peer, old)
		}
		c, _ := r.port.Connect(cfg)
		r.connected(peer, c)
		h.mu.Lock()
		b := pr.rep
		h.mu.Unlock()
		_ = h.fabric.Send(KindCM, from, 0, b)
	})
}

// forget drops the set-up state of r's connection to peer (it died), and
// for a peer NIC of this daemon its side too, so the next Lookup sets up a
// new connection. Called on r's goroutine.
func (h *RDMAHub) forget(r *RDMAFunc, peer verbs.MAC) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := [2]verbs.MAC{r.mac, peer}
	pr := h.pairs[key]
	if pr == nil {
		return
	}
	delete(h.pairs, key)
	delete(h.cids, pr.cfg.SCID)
	if pr.remote {
		return
	}
	back := [2]verbs.MAC{peer, r.mac}
	if pp := h.pairs[back]; pp != nil {
		delete(h.pairs, back)
		delete(h.cids, pp.cfg.SCID)
		p, scid, mac := pp.r, pp.cfg.SCID, r.mac
		go p.Do(func(p *RDMAFunc) { p.dropConn(mac, scid) })
	}
}

// maxPeersPerNIC bounds the connections a NIC accepts from other daemons
// (each costs a Falcon connection's state).
const maxPeersPerNIC = 1024

// pairsOf counts r's connections and set-ups (h.mu held).
func (h *RDMAHub) pairsOf(r *RDMAFunc) int {
	n := 0
	for k := range h.pairs {
		if k[0] == r.mac {
			n++
		}
	}
	return n
}

func lessMAC(a, b [6]byte) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// receiveFalcon hands a Falcon packet from the fabric to the NIC owning
// its destination CID.
func (h *RDMAHub) receiveFalcon(from netip.AddrPort, flow uint32, payload []byte) {
	if len(payload) < 4 {
		h.Stats.FalconShort.Inc()
		return
	}
	cid := wire.Packet(payload).CID()
	h.mu.Lock()
	r := h.cids[cid]
	h.mu.Unlock()
	if r == nil {
		h.Stats.FalconNoCID.Inc()
		return
	}
	r.ReceiveFalcon(payload, flow)
}
