package storage

import (
	"fmt"
	"time"

	"falconnic/device/cm"
	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
	"falconnic/internal/stats"
	"falconnic/nvme"
)

// NVMeFunc is one NIC's NVMe function: the nvme.Engine (target of the
// namespaces this NIC exports, initiator of its disks) attached to the
// NIC's Falcon port as the ULP of NVMe connections. The engine is used only
// on the port's goroutine.
type NVMeFunc struct {
	Port   *port.Port
	Engine *nvme.Engine
	cm     *cm.Agent // nil: no paths to other NICs through the connection manager
	// MAC is the NIC's: what a path's far end knows it as (nvme.Initiator).
	MAC [6]byte

	// On the port's goroutine: the paths the connection manager set up.
	paths  map[[6]byte]*nvme.Path // the current path to each peer NIC
	byConn map[*falcon.Conn]*nvme.Path
	users  map[[6]byte][]func(*nvme.Path)
}

// NewNVMeFunc attaches a new NVMe engine to port; function is the
// Initiator Function put in NBTHs.
func NewNVMeFunc(port *port.Port, function uint32) *NVMeFunc {
	f := &NVMeFunc{Port: port, Engine: nvme.NewEngine(nvme.Config{Function: function & (1<<24 - 1), Clock: port.Clock(), Frames: port}),
		paths: map[[6]byte]*nvme.Path{}, byConn: map[*falcon.Conn]*nvme.Path{}, users: map[[6]byte][]func(*nvme.Path){}}
	port.SetULP(wire.ProtoNVMe, f.Engine)
	return f
}

// AttachCM has the NIC's connection-manager agent set up f's paths to
// NICs of other daemons, and accept theirs (before the port runs).
func (f *NVMeFunc) AttachCM(a *cm.Agent) {
	f.cm = a
	a.Register(wire.ProtoNVMe, cm.Proto{Config: nvmeConnConfig, Local: nvmeLocalConnConfig, Up: f.pathUp, Down: f.pathDown})
}

// pathUp makes connection c the path to NIC peer and hands it to the
// path's users.
func (f *NVMeFunc) pathUp(peer [6]byte, c *falcon.Conn) error {
	p, err := f.Engine.AddPathFrom(c, nvme.Initiator{MAC: peer, Owner: f.cm.PeerOwner(peer)})
	if err != nil {
		return err
	}
	f.paths[peer], f.byConn[c] = p, p
	for _, use := range f.users[peer] {
		use(p)
	}
	return nil
}

// pathDown removes the path over connection c: its commands complete with
// a path error, which disks resubmit on the path that replaced it.
func (f *NVMeFunc) pathDown(peer [6]byte, c *falcon.Conn) {
	p := f.byConn[c]
	if p == nil {
		return
	}
	delete(f.byConn, c)
	if f.paths[peer] == p {
		delete(f.paths, peer)
	}
	f.Engine.RemovePath(p)
}

// Dial asks for f's path to NIC peer (on the port's goroutine); use runs
// there with that path and with each one replacing it.
func (f *NVMeFunc) Dial(peer [6]byte, use func(*nvme.Path)) {
	f.users[peer] = append(f.users[peer], use)
	if p := f.paths[peer]; p != nil {
		use(p)
	}
	if f.cm != nil {
		f.cm.Dial(wire.ProtoNVMe, peer)
	}
}

// Broken asks for a new connection replacing path p to NIC peer (on the
// port's goroutine: a disk saw p die or time out); p nil asks again for a
// path that was never set up.
func (f *NVMeFunc) Broken(peer [6]byte, p *nvme.Path) {
	switch {
	case f.cm == nil:
	case p == nil:
		f.cm.Dial(wire.ProtoNVMe, peer)
	case f.paths[peer] == p:
		f.cm.Redial(wire.ProtoNVMe, peer, p.Conn())
	}
}

// NewBackend opens the backend a namespace spec names: "memory", a file
// or a block device. It returns the backend and its size in bytes.
func NewBackend(s NamespaceSpec) (nvme.Backend, int64, error) {
	if s.Backing == NamespaceMemory {
		if s.Size <= 0 {
			return nil, 0, fmt.Errorf("namespace %d: a memory namespace needs a size", s.NSID)
		}
		return nvme.NewMemBackend(s.Size), s.Size, nil
	}
	b, err := OpenFileBackend(s.Backing, s.Size, s.ReadOnly, s.Direct)
	if err != nil {
		return nil, 0, fmt.Errorf("namespace %d: %w", s.NSID, err)
	}
	return b, b.Size(), nil
}

// AddNamespace exports the namespace spec describes (before Run, or
// through Port.Call). A file or block device is served by an nsPool
// (nvme_pool.go: io_uring or worker goroutines); memory on the port's
// goroutine.
func (f *NVMeFunc) AddNamespace(s NamespaceSpec) (*nvme.Namespace, error) {
	be, size, err := NewBackend(s)
	if err != nil {
		return nil, err
	}
	bs := s.BlockSize
	if bs == 0 {
		bs = 512
	}
	if s.Backing != NamespaceMemory {
		// File and device IO blocks: it goes through an io_uring or to
		// worker goroutines, never blocking the port.
		pool := newNSPool(be, f.Port, f.Engine)
		if s.AIO != AIOThreads {
			pool.useRing()
		}
		be = pool
	}
	ns, err := nvme.NewNamespace(nvme.NamespaceConfig{NSID: s.NSID, BlockSize: bs, Blocks: uint64(size) / uint64(bs),
		ReadOnly: s.ReadOnly, Backend: be, Allow: s.ACL})
	if err != nil {
		return nil, fmt.Errorf("namespace %d: %w", s.NSID, err)
	}
	return ns, f.Engine.AddNamespace(ns)
}

// LocalCIDs returns the cid function of ConnectNVMeLocal for ini and tgt
// from the connection manager m: each CID owned by its end's port.
func LocalCIDs(m *cm.Manager, ini, tgt *NVMeFunc) func() uint32 {
	owners := []cm.FalconReceiver{ini.Port, tgt.Port}
	n := 0
	return func() uint32 {
		o := owners[n%2]
		n++
		return m.AllocCID(o)
	}
}

// ConnectNVMeLocal joins two NVMe functions of one daemon with a path
// (one unordered connection, each end's packets handed straight to the
// other's port). cid returns CIDs unique in the daemon: it is called for
// ini's CID, then for tgt's. It returns ini's path (to submit on) and
// tgt's (serving it).
func ConnectNVMeLocal(ini, tgt *NVMeFunc, cid func() uint32) (iniPath, tgtPath *nvme.Path, err error) {
	c := falcon.ConnConfig{SCID: cid(), Protocol: wire.ProtoNVMe}
	c.DCID = cid()
	nvmeConnConfig(&c)
	nvmeLocalConnConfig(&c)
	var peer falcon.ConnConfig
	if !ini.Port.Call(func(ep *falcon.Endpoint) { ep.RandomPSNs(&c) }) ||
		!tgt.Port.Call(func(ep *falcon.Endpoint) { ep.RandomPSNs(&peer) }) {
		return nil, nil, port.ErrStopped
	}
	c.RxReqPSN, c.RxDataPSN, c.RxRSN = peer.TxReqPSN, peer.TxDataPSN, peer.TxRSN
	// The target side first, so nothing the initiator sends finds no connection.
	ok := tgt.Port.Call(func(ep *falcon.Endpoint) {
		m := falcon.Mirror(c)
		m.Peer = tgt.Port.LinkTo(ini.Port)
		var conn *falcon.Conn
		if conn, err = tgt.Port.Connect(m); err == nil {
			tgtPath, err = tgt.Engine.AddPathFrom(conn, nvme.Initiator{MAC: ini.MAC})
		}
	})
	if !ok {
		return nil, nil, port.ErrStopped
	}
	if err != nil {
		return nil, nil, err
	}
	ok = ini.Port.Call(func(ep *falcon.Endpoint) {
		c.Peer = ini.Port.LinkTo(tgt.Port)
		var conn *falcon.Conn
		if conn, err = ini.Port.Connect(c); err == nil {
			iniPath, err = ini.Engine.AddPathFrom(conn, nvme.Initiator{MAC: tgt.MAC})
		}
	})
	if !ok {
		return nil, nil, port.ErrStopped
	}
	return iniPath, tgtPath, err
}

// NVMeFcwnd is the fixed window of NVMe connections, in packets: the
// receiver's data window [S §9] (pdl.RxDataWindow), so that a queue-depth-32
// stream of 128 KiB commands (1024 nCMDs of 4 KiB) is not held to one
// command's worth of data per round trip as the port RUE's default of 32
// packets would. NVMe connections ask for it as their InitFcwnd
// (nvmeConnConfig), which the port's RUE keeps.
const NVMeFcwnd = 128

// NVMeMinRTO is the retransmission timeout floor of NVMe connections. The
// RUE's (twice the smoothed delay, at least 250 µs) suits a NIC; a daemon
// sharing two cores with TCG guests sees delays jump by milliseconds when
// the scheduler runs a guest, and then resends packets that were not lost
// (`bench nvme` 128 KiB: 327 k spurious resends of 7.4 M packets, each
// costing both ports a packet's work). Losses inside a stream are still
// resent at once (early retransmit on out-of-order ACKs); only a lost
// tail waits this long.
const NVMeMinRTO = 4 * time.Millisecond

// NVMe connections' ACK policy: with a 128-packet window an ACK every 32
// packets (not 10) and an ACK request on 3 % of packets (not 10 %) still
// advance the window several times a round trip, and spare both ports an
// ACK's work for every few 4 KiB packets (blk benchmark, 128 KiB QD32:
// 15–30 % less CPU per request).
const (
	nvmeAckCoalesce = 32
	nvmeARPercent   = 3
)

// nvmeConnConfig widens an NVMe connection's windows (NVMeFcwnd) and
// transaction table from the start — a host command at queue depth 32 is
// up to 32 nCMDs, each one transaction — and sets its RTO floor and ACK
// policy.
func nvmeConnConfig(c *falcon.ConnConfig) {
	c.InitFcwnd = NVMeFcwnd * rue.One
	c.MaxTxns = 1024
	c.MinRTO, c.InitRTO = NVMeMinRTO, NVMeMinRTO
	c.AckCoalesceCount, c.ARPercent = nvmeAckCoalesce, nvmeARPercent
	c.PullTimeout = nvmePullTimeout
}

// nvmeLocalConnConfig caps the windows of a connection to a NIC of this
// daemon at Fixed's, as RDMA's are (rdma.LocalMaxFcwnd): the fabric
// window at NVMeFcwnd and the NIC window at port.FixedNcwnd. Nothing
// between two ports of one daemon congests, so Swift would grow them to
// its ceilings of 256 packets and 256 requests, whose frame buffers then
// miss the caches: 128 KiB writes cost more CPU per MiB and ran slower
// than under Fixed (README, "Measured", session 37).
func nvmeLocalConnConfig(c *falcon.ConnConfig) {
	c.MaxFcwnd, c.MaxNcwnd = NVMeFcwnd*rue.One, port.FixedNcwnd
}

// nvmePullTimeout bounds a target's Write Data Request (Falcon's pull
// timeout, default 1 s). A write whose pull times out fails for good
// (Data Transfer Error), and a daemon starved by TCG guests can fall a
// second behind (`bench nvme` once failed fio's writes so); the
// initiator's command timeout (30 s) still bounds the command.
const nvmePullTimeout = 10 * time.Second

// NamespaceCounters returns the counters of namespace nsid: the engine's
// and, for a file or block device, its IO pool's; false if f exports no
// such namespace.
func (f *NVMeFunc) NamespaceCounters(nsid uint16) (stats.Set, bool) {
	ns := f.Engine.Namespace(nsid)
	if ns == nil {
		return nil, false
	}
	set := ns.Stats.Set()
	if p, ok := ns.Config().Backend.(*nsPool); ok {
		set = append(set, p.Stats.Set()...)
	}
	return set, true
}
