package device

import (
	"net/netip"
	"sync"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/wire"
	"falconnic/internal/stats"
	"falconnic/nvme"
)

// NVMeCM sets up NVMe paths between NICs of different daemons: one
// unordered Falcon connection (protocol 3) per pair of NICs, with the
// RDMA connection manager's REQ/REP/REJ messages (KindCM) carrying
// wire.ProtoNVMe in their ULP byte. Its CIDs come from the RDMAHub, whose
// one KindFalcon receiver hands each packet to the FalconPort owning its
// destination CID.
//
// A new REQ for a pair that is up replaces the old connection (the peer's
// daemon restarted, or it found the path broken): the old path is removed
// and its commands complete with an internal path error, which disks
// resubmit on the new path. An initiator whose path breaks (dead
// connection, command timeout) sends a new REQ the same way.
//
// Work for a port is queued from a new goroutine whenever cm.mu is held:
// the port's queue may be full, and its goroutine takes cm.mu (Broken).
type NVMeCM struct {
	hub    *RDMAHub
	fabric *Fabric

	mu    sync.Mutex
	funcs map[[6]byte]*NVMeFunc
	pairs map[[2][6]byte]*nvmePair // key: (local, remote)

	Stats NVMeCMCounters
}

// nvmePair is one local NIC's NVMe path to a peer NIC.
type nvmePair struct {
	f           *NVMeFunc
	local, peer [6]byte
	scid        uint32 // our CID (pending or up)
	dcid        uint32 // the peer's, once up
	cfg         falcon.ConnConfig
	dialing     bool // our REQ is out
	tries       int
	rep         []byte     // the REP we sent (a repeated REQ gets it again)
	path        *nvme.Path // on f.Port's goroutine
	gen         uint64     // installs started
	installed   uint64     // the gen of path
	users       []func(*nvme.Path)
	from        netip.AddrPort
}

// NVMeCMCounters count the NVMe CM's work and drops.
type NVMeCMCounters struct {
	REQSent, REQRecv, REPRecv, REJRecv, PathsUp stats.Counter
	NoNIC, Stale, GaveUp, Replaced, ConnErr     stats.Counter
	TooMany                                     stats.Counter
}

// Set lists the counters with help text.
func (c *NVMeCMCounters) Set() stats.Set {
	return stats.Set{
		{Name: "nvme_cm_req_sent", Help: "NVMe REQs sent (retries included)", Counter: &c.REQSent},
		{Name: "nvme_cm_req_recv", Help: "NVMe REQs received", Counter: &c.REQRecv},
		{Name: "nvme_cm_rep_recv", Help: "NVMe REPs received", Counter: &c.REPRecv},
		{Name: "nvme_cm_rej_recv", Help: "NVMe REJs received", Counter: &c.REJRecv},
		{Name: "nvme_cm_paths_up", Help: "NVMe paths set up over the fabric", Counter: &c.PathsUp},
		{Name: "nvme_cm_no_nic", Help: "NVMe REQs for a MAC with no NVMe function here (REJ sent)", Counter: &c.NoNIC},
		{Name: "nvme_cm_stale", Help: "REPs for no pending set-up, or REQs while ours wins", Counter: &c.Stale},
		{Name: "nvme_cm_gave_up", Help: "set-ups abandoned after every REQ retry", Counter: &c.GaveUp},
		{Name: "nvme_cm_replaced", Help: "paths replaced by a new connection", Counter: &c.Replaced},
		{Name: "nvme_cm_too_many", Help: "NVMe REQs refused: the NIC has maxPeersPerNIC paths", Counter: &c.TooMany},
		{Name: "nvme_cm_conn_err", Help: "connections the endpoint refused to set up", Counter: &c.ConnErr},
	}
}

// NewNVMeCM returns the NVMe CM of a daemon's hub and fabric.
func NewNVMeCM(hub *RDMAHub, f *Fabric) *NVMeCM {
	cm := &NVMeCM{hub: hub, fabric: f, funcs: map[[6]byte]*NVMeFunc{}, pairs: map[[2][6]byte]*nvmePair{}}
	hub.HandleCM(uint8(wire.ProtoNVMe), cm.receive)
	return cm
}

// Add makes f reachable from other daemons as the NIC with MAC mac.
func (cm *NVMeCM) Add(mac [6]byte, f *NVMeFunc) {
	cm.mu.Lock()
	cm.funcs[mac] = f
	cm.mu.Unlock()
}

// Dial asks for f's path to the NIC with MAC peer on another daemon; use
// runs on f's port goroutine with that path and each one replacing it.
func (cm *NVMeCM) Dial(f *NVMeFunc, local, peer [6]byte, use func(*nvme.Path)) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	pr := cm.pairs[[2][6]byte{local, peer}]
	if pr == nil {
		pr = &nvmePair{f: f, local: local, peer: peer}
		cm.pairs[[2][6]byte{local, peer}] = pr
	}
	pr.users = append(pr.users, use)
	switch {
	case pr.path != nil || pr.dcid != 0:
		go f.Port.Do(func(*falcon.Endpoint) { // a path is (being) set up: use it
			cm.mu.Lock()
			p := pr.path
			cm.mu.Unlock()
			if p != nil {
				use(p)
			}
		})
	case !pr.dialing:
		cm.dial(pr)
	}
}

// Broken asks for a new connection replacing path p of local NIC's pair
// with peer (on the port's goroutine: a disk saw it die or time out).
func (cm *NVMeCM) Broken(local, peer [6]byte, p *nvme.Path) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	pr := cm.pairs[[2][6]byte{local, peer}]
	if pr == nil || pr.dialing || pr.path != p {
		return
	}
	cm.dial(pr)
}

// dial starts a set-up: a new CID and sequence numbers, then REQs until a
// REP (cm.mu held).
func (cm *NVMeCM) dial(pr *nvmePair) {
	pr.dialing, pr.tries = true, 0
	scid := cm.hub.AllocCID(pr.f.Port)
	go pr.f.Port.Do(func(ep *falcon.Endpoint) {
		cfg := falcon.ConnConfig{SCID: scid, Protocol: wire.ProtoNVMe}
		nvmeConnConfig(&cfg)
		ep.RandomPSNs(&cfg)
		cm.mu.Lock()
		defer cm.mu.Unlock()
		if pr.scid != 0 && (pr.path == nil || pr.path.Conn().SCID() != pr.scid) {
			cm.hub.ReleaseCID(pr.scid) // an earlier set-up that got no REP
		}
		pr.cfg, pr.scid = cfg, scid
		cm.sendREQ(pr)
	})
}

// sendREQ sends (or resends) pr's REQ: to the daemon that last showed the
// peer's MAC, or to every peer daemon (cm.mu held).
func (cm *NVMeCM) sendREQ(pr *nvmePair) {
	pr.tries++
	m := cmMsg{typ: cmREQ, proto: uint8(wire.ProtoNVMe), src: pr.local, dst: pr.peer, srcCID: pr.cfg.SCID,
		reqPSN: uint32(pr.cfg.TxReqPSN), dataPSN: uint32(pr.cfg.TxDataPSN), rsn: uint32(pr.cfg.TxRSN)}
	b := m.append(nil)
	f := cm.fabric
	if p := f.macs.lookup(ethAddr(pr.peer), f.opts.Clock.Now()); p != nil {
		_ = f.sendPeer(p, KindCM, 0, b)
	} else {
		for _, p := range f.peers.Load().list {
			_ = f.sendPeer(p, KindCM, 0, b)
		}
	}
	cm.Stats.REQSent.Inc()
	scid := pr.cfg.SCID
	time.AfterFunc(cmRetryEvery, func() {
		cm.mu.Lock()
		defer cm.mu.Unlock()
		if !pr.dialing || pr.cfg.SCID != scid {
			return
		}
		if pr.tries >= cmMaxTries {
			cm.Stats.GaveUp.Inc()
			pr.dialing = false
			return // the next Broken (a disk's retry) dials again
		}
		cm.sendREQ(pr)
	})
}

// receive handles an NVMe CM message from the fabric.
func (cm *NVMeCM) receive(from netip.AddrPort, m cmMsg) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	key := [2][6]byte{m.dst, m.src}
	switch m.typ {
	case cmREQ:
		cm.Stats.REQRecv.Inc()
		cm.onREQ(from, m)
	case cmREP:
		cm.Stats.REPRecv.Inc()
		pr := cm.pairs[key]
		if pr == nil || !pr.dialing || pr.cfg.SCID != m.dstCID {
			cm.Stats.Stale.Inc()
			return
		}
		cfg := pr.cfg
		cfg.DCID = m.srcCID
		cfg.RxReqPSN, cfg.RxDataPSN, cfg.RxRSN = wire.PSN(m.reqPSN), wire.PSN(m.dataPSN), wire.RSN(m.rsn)
		cfg.Peer = cm.fabric.Link(from, KindFalcon)
		pr.dialing, pr.dcid, pr.from, pr.rep = false, m.srcCID, from, nil
		cm.install(pr, cfg, nil)
	case cmREJ:
		cm.Stats.REJRecv.Inc()
		// Another daemon has no such NIC; a REQ sent to every peer draws
		// REJs from all but the right one. Keep retrying.
	}
}

// onREQ answers a REQ for one of our NICs (cm.mu held).
func (cm *NVMeCM) onREQ(from netip.AddrPort, m cmMsg) {
	f := cm.funcs[m.dst]
	if f == nil {
		cm.Stats.NoNIC.Inc()
		rej := cmMsg{typ: cmREJ, proto: uint8(wire.ProtoNVMe), src: m.dst, dst: m.src, dstCID: m.srcCID}
		_ = cm.fabric.Send(KindCM, from, 0, rej.append(nil))
		return
	}
	key := [2][6]byte{m.dst, m.src}
	pr := cm.pairs[key]
	switch {
	case pr == nil && cm.pairsOf(m.dst) >= maxPeersPerNIC:
		cm.Stats.TooMany.Inc()
		rej := cmMsg{typ: cmREJ, proto: uint8(wire.ProtoNVMe), src: m.dst, dst: m.src, dstCID: m.srcCID}
		_ = cm.fabric.Send(KindCM, from, 0, rej.append(nil))
		return
	case pr == nil:
		pr = &nvmePair{f: f, local: m.dst, peer: m.src}
		cm.pairs[key] = pr
	case pr.dcid == m.srcCID && !pr.dialing:
		if pr.rep != nil {
			_ = cm.fabric.Send(KindCM, from, 0, pr.rep) // our REP was lost
		}
		return
	case pr.dialing && lessMAC(m.dst, m.src):
		cm.Stats.Stale.Inc()
		return // simultaneous set-up: the lower MAC's REQ wins
	}
	if pr.dialing && pr.path == nil {
		cm.hub.ReleaseCID(pr.scid) // our REQ lost the race
	}
	pr.dialing, pr.dcid, pr.from, pr.rep = false, m.srcCID, from, nil
	scid := cm.hub.AllocCID(f.Port)
	peer := cm.fabric.Link(from, KindFalcon)
	cm.install(pr, falcon.ConnConfig{}, func(ep *falcon.Endpoint) falcon.ConnConfig {
		cfg := falcon.ConnConfig{SCID: scid, DCID: m.srcCID, Protocol: wire.ProtoNVMe, Peer: peer}
		nvmeConnConfig(&cfg)
		ep.RandomPSNs(&cfg)
		cfg.RxReqPSN, cfg.RxDataPSN, cfg.RxRSN = wire.PSN(m.reqPSN), wire.PSN(m.dataPSN), wire.RSN(m.rsn)
		rep := cmMsg{typ: cmREP, proto: uint8(wire.ProtoNVMe), src: m.dst, dst: m.src, srcCID: scid, dstCID: m.srcCID,
			reqPSN: uint32(cfg.TxReqPSN), dataPSN: uint32(cfg.TxDataPSN), rsn: uint32(cfg.TxRSN)}
		cm.mu.Lock()
		if pr.dcid == m.srcCID {
			pr.rep, pr.scid = rep.append(nil), scid
			_ = cm.fabric.Send(KindCM, from, 0, pr.rep)
		}
		cm.mu.Unlock()
		return cfg
	})
}

// pairsOf counts the pairs of local NIC mac (cm.mu held).
func (cm *NVMeCM) pairsOf(mac [6]byte) int {
	n := 0
	for k := range cm.pairs {
		if k[0] == mac {
			n++
		}
	}
	return n
}

// install connects pr's new connection on its port's goroutine (cfg, or
// what mk returns there), hands the new path to the pair's users and then
// removes the old path, whose commands fail with a path error and are
// resubmitted by their disks on the new one (cm.mu held).
func (cm *NVMeCM) install(pr *nvmePair, cfg falcon.ConnConfig, mk func(*falcon.Endpoint) falcon.ConnConfig) {
	f := pr.f
	pr.gen++
	gen := pr.gen
	go f.Port.Do(func(ep *falcon.Endpoint) {
		if mk != nil {
			cfg = mk(ep)
		}
		cm.mu.Lock()
		stale := gen < pr.installed
		cm.mu.Unlock()
		if stale { // a newer connection got here first
			cm.Stats.Stale.Inc()
			cm.hub.ReleaseCID(cfg.SCID)
			return
		}
		var path *nvme.Path
		c, err := f.Port.Connect(cfg)
		if err == nil {
			if path, err = f.Engine.AddPath(c); err != nil {
				_ = f.Port.CloseConn(c.SCID())
			}
		}
		if err != nil {
			cm.Stats.ConnErr.Inc()
			cm.hub.ReleaseCID(cfg.SCID)
			return
		}
		cm.mu.Lock()
		old := pr.path
		pr.path, pr.installed = path, gen
		users := append([]func(*nvme.Path){}, pr.users...)
		cm.mu.Unlock()
		cm.Stats.PathsUp.Inc()
		for _, u := range users {
			u(path)
		}
		if old != nil {
			cm.Stats.Replaced.Inc()
			scid := old.Conn().SCID()
			f.Engine.RemovePath(old)
			_ = f.Port.CloseConn(scid)
			cm.hub.ReleaseCID(scid)
		}
	})
}
