package device

// The NIC's RDMA function (ARCHITECTURE §3.2, §6).
//
//	guest driver ──0x88B5 frames──▶ NIC TX path ─HandleControl─┐
//	                                                           ▼
//	fabric / local NICs ─ReceiveFalcon─▶ work queue ─▶ Run goroutine
//	                                         owns: verbs.Engine, falcon.Endpoint
//	guest RAM ◀── DMA (rdmaMem over vhostuser.MemTable, bounds checked) ──┘
//	driver ◀── replies and events (NIC.Deliver on the RX path)
//
// One goroutine per NIC owns the verbs engine and the Falcon endpoint
// (STYLE 8): control frames, Falcon packets and connection-manager work all
// arrive through one bounded queue; timers are the endpoint's NextDeadline
// on the real clock. The RDMAHub (rdma_cm.go) sets up one ordered Falcon
// connection per pair of NICs, directly inside a daemon and with REQ/REP
// messages (fabric kind KindCM) between daemons, and routes Falcon packets
// from the fabric to the NIC owning their destination CID.
//
// Isolation: each NIC has its own engine, keys and memory; a packet can
// reach a NIC's guest memory only through an rkey that guest registered,
// and every DMA access is checked against that guest's memory table.
//
// The guest's memory table reaches the DMA engine through
// netDev.SetMemTable, which vhostuser must call (see rdma_nic.go).

import (
	"context"
	"net"
	"sync"
	"time"

	"falconnic/falcon"
	"falconnic/firmware"
	"falconnic/internal/clock"
	"falconnic/internal/stats"
	"falconnic/verbs"
	"falconnic/vhostuser"
)

// RDMACounters count the RDMA function's control channel, DMA engine and
// connection manager, one counter per drop cause.
type RDMACounters struct {
	CtlFrames, CtlReplies, CtlEvents     stats.Counter
	CtlQueueFull, CtlDecodeErr, CtlNoAck stats.Counter
	CtlBadInstance, CtlFailed            stats.Counter
	Doorbells                            stats.Counter
	FalconRx, FalconQueueFull            stats.Counter
	DMAReadBytes, DMAWriteBytes          stats.Counter
	DMABadGPA, DMANoMemory               stats.Counter
	ConnsUp, ConnRequests                stats.Counter
	Resets                               stats.Counter
}

// Set lists the counters with help text.
func (c *RDMACounters) Set() stats.Set {
	return stats.Set{
		{Name: "rdma_ctl_frames", Help: "control-channel frames from the driver", Counter: &c.CtlFrames},
		{Name: "rdma_ctl_replies", Help: "replies sent to the driver", Counter: &c.CtlReplies},
		{Name: "rdma_ctl_events", Help: "events sent to the driver", Counter: &c.CtlEvents},
		{Name: "rdma_ctl_queue_full", Help: "control frames dropped: the RDMA function's queue was full", Counter: &c.CtlQueueFull},
		{Name: "rdma_ctl_decode_err", Help: "control frames that failed to decode", Counter: &c.CtlDecodeErr},
		{Name: "rdma_ctl_unanswerable", Help: "undecodable control frames that could not be answered", Counter: &c.CtlNoAck},
		{Name: "rdma_ctl_bad_instance", Help: "requests from an instance that is not the open one", Counter: &c.CtlBadInstance},
		{Name: "rdma_ctl_failed", Help: "requests answered with an error status", Counter: &c.CtlFailed},
		{Name: "rdma_doorbells", Help: "doorbells rung", Counter: &c.Doorbells},
		{Name: "rdma_falcon_rx", Help: "Falcon packets received for this NIC", Counter: &c.FalconRx},
		{Name: "rdma_falcon_queue_full", Help: "Falcon packets dropped: the RDMA function's queue was full", Counter: &c.FalconQueueFull},
		{Name: "rdma_dma_read_bytes", Help: "bytes the DMA engine read from guest memory", Counter: &c.DMAReadBytes},
		{Name: "rdma_dma_write_bytes", Help: "bytes the DMA engine wrote to guest memory", Counter: &c.DMAWriteBytes},
		{Name: "rdma_dma_bad_gpa", Help: "DMA accesses refused: outside guest RAM", Counter: &c.DMABadGPA},
		{Name: "rdma_dma_no_memory", Help: "DMA accesses refused: no guest memory attached", Counter: &c.DMANoMemory},
		{Name: "rdma_conns_up", Help: "Falcon connections set up to peer NICs", Counter: &c.ConnsUp},
		{Name: "rdma_conn_requests", Help: "connection set-ups started", Counter: &c.ConnRequests},
		{Name: "rdma_resets", Help: "times every RDMA object was reclaimed (driver reset, guest gone)", Counter: &c.Resets},
	}
}

// rdmaWork is one item for the RDMA function's owning goroutine.
type rdmaWork struct {
	ctl  []byte          // a control frame, or
	pkt  []byte          // a Falcon packet (with flow), or
	flow uint32          //
	fn   func(*RDMAFunc) // a closure from the connection manager
}

// rdmaQueueDepth bounds the work waiting for the RDMA function.
const rdmaQueueDepth = 4096

// RDMAFunc is one NIC's RDMA function: the control-channel handler, the
// verbs engine, the NIC's Falcon endpoint and the DMA engine over the
// guest's memory. One goroutine (Run) owns the engine and the endpoint;
// everything else reaches them through its work queue.
type RDMAFunc struct {
	mac     [6]byte
	deliver func(frame []byte) // toward the guest (the NIC's RX path)
	hub     *RDMAHub
	clk     clock.Clock
	mem     rdmaMem
	ep      *falcon.Endpoint
	eng     *verbs.Engine
	work    chan rdmaWork

	// Owned by the Run goroutine.
	instance uint64
	open     bool
	conns    map[verbs.MAC]*falcon.Conn
	pending  map[verbs.MAC]bool
	out      []byte
	Stats    RDMACounters
}

// NewRDMAFunc builds the RDMA function of the NIC with MAC mac. deliver
// sends frames to the guest; hub is the daemon's connection manager.
func NewRDMAFunc(mac net.HardwareAddr, deliver func([]byte), hub *RDMAHub, clk clock.Clock) *RDMAFunc {
	if clk == nil {
		clk = clock.Real
	}
	r := &RDMAFunc{deliver: deliver, hub: hub, clk: clk, work: make(chan rdmaWork, rdmaQueueDepth),
		conns: map[verbs.MAC]*falcon.Conn{}, pending: map[verbs.MAC]bool{}}
	copy(r.mac[:], mac)
	r.mem.stats = &r.Stats
	r.eng = verbs.New(verbs.Config{Mem: &r.mem, Events: r.sendEvent})
	r.eng.SetConns(rdmaConns{r})
	r.ep = falcon.New(falcon.Config{Clock: clk, ULP: r.eng, Link: dropLink{}, RUE: firmware.NewFixed(firmware.FixedConfig{})})
	if hub != nil {
		hub.add(r)
	}
	return r
}

// dropLink is the endpoint's default link: every connection has its own.
type dropLink struct{}

func (dropLink) Send([]byte, uint32) {}

// MAC returns the NIC's MAC.
func (r *RDMAFunc) MAC() verbs.MAC { return r.mac }

// Engine returns the verbs engine (only for use on the Run goroutine or
// before Run starts).
func (r *RDMAFunc) Engine() *verbs.Engine { return r.eng }

// SetMemTable gives the DMA engine the guest's current memory table; nil
// means the guest is gone: every RDMA object is reclaimed, since the GPAs
// it holds may no longer belong to the driver.
func (r *RDMAFunc) SetMemTable(t *vhostuser.MemTable) {
	r.mem.set(t)
	if t == nil {
		r.enqueue(rdmaWork{fn: func(r *RDMAFunc) { r.reset() }}, &r.Stats.CtlQueueFull)
	}
}

// HandleControl takes a control-channel frame from the NIC's TX path (a
// device.ControlHandler). It copies the frame (pooled) and never blocks.
func (r *RDMAFunc) HandleControl(frame []byte) {
	r.enqueue(rdmaWork{ctl: copyPkt(frame)}, &r.Stats.CtlQueueFull)
}

// ReceiveFalcon takes a Falcon packet for this NIC (copied into a pooled
// buffer, so the steady state does not allocate).
func (r *RDMAFunc) ReceiveFalcon(pkt []byte, flow uint32) {
	r.enqueue(rdmaWork{pkt: copyPkt(pkt), flow: flow}, &r.Stats.FalconQueueFull)
}

// copyPkt copies b into a pooled buffer (a fresh one when b is larger).
func copyPkt(b []byte) []byte {
	var c []byte
	if len(b) <= rdmaPktBuf {
		c = (*rdmaPkts.Get().(*[rdmaPktBuf]byte))[:len(b)]
	} else {
		c = make([]byte, len(b))
	}
	copy(c, b)
	return c
}

// rdmaPktBuf is the size of pooled packet buffers (a Falcon frame of the
// largest transaction fits).
const rdmaPktBuf = 8192

var rdmaPkts = sync.Pool{New: func() any { return new([rdmaPktBuf]byte) }}

func putPkt(b []byte) {
	if cap(b) == rdmaPktBuf {
		rdmaPkts.Put((*[rdmaPktBuf]byte)(b[:rdmaPktBuf]))
	}
}

func (r *RDMAFunc) enqueue(w rdmaWork, full *stats.Counter) {
	select {
	case r.work <- w:
	default:
		full.Inc()
		putPkt(w.pkt)
		putPkt(w.ctl)
	}
}

// Do queues fn to run on the owning goroutine (the connection manager).
func (r *RDMAFunc) Do(fn func(*RDMAFunc)) { r.work <- rdmaWork{fn: fn} }

// Call runs fn on the owning goroutine and waits for it (status, tests).
func (r *RDMAFunc) Call(fn func(*RDMAFunc)) {
	done := make(chan struct{})
	r.work <- rdmaWork{fn: func(r *RDMAFunc) { fn(r); close(done) }}
	<-done
}

// Run is the owning goroutine: it handles work and the endpoint's timers
// until ctx is done.
func (r *RDMAFunc) Run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.arm(t)
		select {
		case <-ctx.Done():
			return
		case w := <-r.work:
			r.handle(w)
			// Drain what is queued before looking at timers again.
		drain:
			for n := 0; n < 256; n++ {
				select {
				case w := <-r.work:
					r.handle(w)
				default:
					break drain
				}
			}
		case <-t.C:
		}
		r.ep.OnTimer(r.clk.Now())
	}
}

func (r *RDMAFunc) arm(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	d := time.Hour
	if at, ok := r.ep.NextDeadline(); ok {
		d = max(at-r.clk.Now(), 0)
	}
	t.Reset(d)
}

func (r *RDMAFunc) handle(w rdmaWork) {
	switch {
	case w.ctl != nil:
		r.control(w.ctl)
		putPkt(w.ctl)
	case w.pkt != nil:
		r.Stats.FalconRx.Inc()
		r.ep.Receive(w.pkt, w.flow)
		putPkt(w.pkt)
	case w.fn != nil:
		w.fn(r)
	}
}

// reset reclaims every RDMA object (Falcon connections to peer NICs stay:
// they belong to the NIC, not to the driver).
func (r *RDMAFunc) reset() {
	r.Stats.Resets.Inc()
	r.eng.Reset()
	r.open = false
}

// Status reports the RDMA function's counters (verbs engine's prefixed
// "verbs.", the endpoint's "falcon.").
func (r *RDMAFunc) Status() map[string]uint64 {
	m := r.Stats.Set().Snapshot()
	for k, v := range r.eng.Stats.Set().Snapshot() {
		m["verbs."+k] = v
	}
	for k, v := range r.ep.Stats.Set().Snapshot() {
		m["falcon."+k] = v
	}
	return m
}

// rdmaConns is the verbs engine's view of the connection manager.
type rdmaConns struct{ r *RDMAFunc }

// Lookup returns the connection to peer or starts setting one up. A
// connection the transport declared dead is torn down and set up anew.
func (c rdmaConns) Lookup(peer verbs.MAC) *falcon.Conn {
	r := c.r
	if cn := r.conns[peer]; cn != nil {
		if !cn.Dead() {
			return cn
		}
		r.dropConn(peer, cn.SCID())
		if r.hub != nil {
			r.hub.forget(r, peer)
		}
	}
	if !r.pending[peer] && r.hub != nil && peer != r.mac {
		r.pending[peer] = true
		r.Stats.ConnRequests.Inc()
		r.hub.connect(r, peer)
	}
	return nil
}

// dropConn closes r's connection scid to peer, if it is the current one
// (on the owning goroutine); its outstanding transactions fail.
func (r *RDMAFunc) dropConn(peer verbs.MAC, scid uint32) {
	if c := r.conns[peer]; c != nil && c.SCID() == scid {
		delete(r.conns, peer)
	}
	_ = r.ep.Close(scid)
}

// connected installs a connection to peer (on the owning goroutine).
func (r *RDMAFunc) connected(peer verbs.MAC, c *falcon.Conn) {
	delete(r.pending, peer)
	if c == nil {
		return
	}
	r.conns[peer] = c
	r.Stats.ConnsUp.Inc()
	r.eng.KickAll()
}
