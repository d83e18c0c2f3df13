package rdma

import (
	"net"
	"time"

	"falconnic/device/cm"
	"falconnic/device/port"
	"falconnic/device/rdmauapi"
	"falconnic/falcon"
	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
	"falconnic/internal/stats"
	"falconnic/verbs"
	"falconnic/vhostuser"
)

// Counters count the RDMA function's control channel, DMA engine and
// connection manager, one counter per drop cause.
type Counters struct {
	CtlFrames, CtlReplies, CtlEvents stats.Counter
	CtlDecodeErr, CtlNoAck           stats.Counter
	CtlBadInstance, CtlFailed        stats.Counter
	CtlEventNoOwner                  stats.Counter
	Doorbells                        stats.Counter
	DMAReadBytes, DMAWriteBytes      stats.Counter
	DMABadGPA, DMANoMemory           stats.Counter
	ConnsUp, ConnRequests            stats.Counter
	Resets                           stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "rdma_ctl_frames", Help: "control-channel frames from the driver", Counter: &c.CtlFrames},
		{Name: "rdma_ctl_replies", Help: "replies sent to the driver", Counter: &c.CtlReplies},
		{Name: "rdma_ctl_events", Help: "events sent to the driver", Counter: &c.CtlEvents},
		{Name: "rdma_ctl_decode_err", Help: "control frames that failed to decode", Counter: &c.CtlDecodeErr},
		{Name: "rdma_ctl_unanswerable", Help: "undecodable control frames that could not be answered", Counter: &c.CtlNoAck},
		{Name: "rdma_ctl_bad_instance", Help: "requests from an instance that is not the open one", Counter: &c.CtlBadInstance},
		{Name: "rdma_ctl_event_no_owner", Help: "events not sent: no driver instance open (it reads state after OPEN)", Counter: &c.CtlEventNoOwner},
		{Name: "rdma_ctl_failed", Help: "requests answered with an error status", Counter: &c.CtlFailed},
		{Name: "rdma_doorbells", Help: "doorbells rung", Counter: &c.Doorbells},
		{Name: "rdma_dma_read_bytes", Help: "bytes the DMA engine read from guest memory", Counter: &c.DMAReadBytes},
		{Name: "rdma_dma_write_bytes", Help: "bytes the DMA engine wrote to guest memory", Counter: &c.DMAWriteBytes},
		{Name: "rdma_dma_bad_gpa", Help: "DMA accesses refused: outside guest RAM", Counter: &c.DMABadGPA},
		{Name: "rdma_dma_no_memory", Help: "DMA accesses refused: no guest memory attached", Counter: &c.DMANoMemory},
		{Name: "rdma_conns_up", Help: "Falcon connections set up to peer NICs", Counter: &c.ConnsUp},
		{Name: "rdma_resets", Help: "times every RDMA object was reclaimed (driver reset, guest gone)", Counter: &c.Resets},
	}
}

// Func is one NIC's RDMA function: the control-channel handler, the
// verbs engine and the DMA engine over the guest's memory, attached to
// the NIC's Falcon port as the ULP of RDMA connections (protocol 2). The
// port's goroutine owns the engine: control frames reach it as port work
// (Port.Control), Falcon packets through the port's endpoint.
type Func struct {
	mac     [6]byte
	deliver func(frame []byte) // toward the guest (the NIC's RX path)
	cm      *cm.Agent          // nil: no connections
	port    *port.Port
	mem     rdmaMem
	eng     *verbs.Engine

	// Owned by the port's goroutine.
	instance uint64
	open     bool
	conns    map[verbs.MAC]*falcon.Conn
	out      []byte
	// replyBody is the reply body a handler fills (a local array would
	// escape through the handler table: 1.5 KiB allocated per frame).
	replyBody [rdmauapi.MaxBody]byte
	Stats     Counters
}

// New builds the RDMA function of the NIC with MAC mac and
// attaches it to the NIC's port (before the port runs). deliver sends
// frames to the guest; cm is the NIC's connection-manager agent (nil: no
// connections to other NICs).
func New(mac net.HardwareAddr, deliver func([]byte), agent *cm.Agent, port *port.Port) *Func {
	r := &Func{deliver: deliver, cm: agent, port: port, conns: map[verbs.MAC]*falcon.Conn{}}
	copy(r.mac[:], mac)
	r.mem.stats = &r.Stats
	r.eng = verbs.New(verbs.Config{Mem: &r.mem, Events: r.sendEvent, Clock: port.Clock()})
	r.eng.SetConns(rdmaConns{r})
	port.SetULP(wire.ProtoRDMA, r.eng)
	port.SetControl(r.control)
	if agent != nil {
		agent.Register(wire.ProtoRDMA, r.cmProto())
	}
	return r
}

// MAC returns the NIC's MAC.
func (r *Func) MAC() verbs.MAC { return r.mac }

// PollConfig is the doorbell-polling configuration of the NIC's verbs
// engine (verbs/poll.go).
type PollConfig = verbs.PollConfig

// Bounds of PollConfig.WindowCap a config may ask for: one poll interval
// to verbs.MaxPollWindowCap.
const (
	MinPollWindowCap = verbs.DefaultPollEvery
	MaxPollWindowCap = verbs.MaxPollWindowCap
)

// SetPolling configures the NIC's doorbell polling (off unless the config
// turns it on): while an SQ has work and for a window after, the engine
// polls its producer index on the port's goroutine and sets the ring's
// polling flag (rdmauapi.RingNICPollingOff), so the driver sends no DB_SQ.
// Call before the port runs, or on its goroutine.
func (r *Func) SetPolling(c PollConfig) { r.eng.SetPolling(c) }

// Port returns the NIC's Falcon port the function is attached to.
func (r *Func) Port() *port.Port { return r.port }

// Engine returns the verbs engine (only for use on the port's goroutine
// or before the port runs).
func (r *Func) Engine() *verbs.Engine { return r.eng }

// SetMemTable gives the DMA engine the guest's current memory table; nil
// means the guest is gone: every RDMA object is reclaimed, since the GPAs
// it holds may no longer belong to the driver.
func (r *Func) SetMemTable(t *vhostuser.MemTable) {
	r.mem.set(t)
	if t == nil {
		r.port.Do(func(*falcon.Endpoint) { r.reset() })
	}
}

// ResetDevice reclaims every RDMA object of the guest's driver
// (vhostuser.DeviceResetter: RESET_OWNER, RESET_DEVICE): a peer's WRITE to
// an old rkey then fails instead of landing in the rebooted guest's RAM.
func (r *Func) ResetDevice() {
	r.port.Do(func(*falcon.Endpoint) { r.reset() })
}

// HandleControl takes a control-channel frame from the NIC's TX path (a
// device.ControlHandler): it becomes work for the port (copied; never
// blocks; a full queue is counted by the port).
func (r *Func) HandleControl(frame []byte) { r.port.Control(frame) }

// Do queues fn to run on the port's goroutine; false once it stopped.
func (r *Func) Do(fn func(*Func)) bool {
	return r.port.Do(func(*falcon.Endpoint) { fn(r) })
}

// Call runs fn on the port's goroutine and waits for it (status, tests);
// false, and fn never runs, once the port stopped.
func (r *Func) Call(fn func(*Func)) bool {
	return r.port.Call(func(*falcon.Endpoint) { fn(r) })
}

// reset reclaims every RDMA object (Falcon connections to peer NICs stay:
// they belong to the NIC, not to the driver).
func (r *Func) reset() {
	r.Stats.Resets.Inc()
	r.eng.Reset()
	r.open = false
}

// Status reports the RDMA function's counters (verbs engine's prefixed
// "verbs."; the endpoint's are the port's).
func (r *Func) Status() map[string]uint64 {
	m := r.Stats.Set().Snapshot()
	for k, v := range r.eng.Stats.Set().Snapshot() {
		m["verbs."+k] = v
	}
	return m
}

// rdmaConns is the verbs engine's view of the NIC's connections.
type rdmaConns struct{ r *Func }

// Lookup returns the connection to peer, or nil while the connection
// manager sets one up (a dead one is replaced).
func (c rdmaConns) Lookup(peer verbs.MAC) *falcon.Conn {
	r := c.r
	if cn := r.conns[peer]; cn != nil && !cn.Dead() {
		return cn
	}
	if r.cm != nil {
		r.cm.Dial(wire.ProtoRDMA, peer)
	}
	return nil
}

// LocalMTU is the Falcon MTU of an RDMA connection between two NICs of one
// daemon: 32 KiB segments (verbs.RDMAHeaderRoom beside them), where the
// fabric's connections carry 4 KiB: an eighth of the transactions, ACKs
// and per-packet work for the same data (README, "Measured").
const LocalMTU = 32<<10 + verbs.RDMAHeaderRoom

// LocalMinRTO is the retransmission timeout floor of those connections, as
// NVMe's (storage.NVMeMinRTO): a port link loses a frame only when the
// receiving port's queue is full, while a host that preempts the daemon's
// busy goroutine for a millisecond fires RTOs for packets the peer holds.
const LocalMinRTO = 4 * time.Millisecond

// LocalMaxFcwnd caps those connections' window: 32 packets of LocalMTU
// (1 MiB in flight), Fixed's window. Nothing between two NICs of one
// daemon congests, so Swift would grow the window to the receive
// window's 128 packets (4 MiB in flight), whose frame buffers then miss
// the caches: ib_read_bw ran 12-33 % slower under Swift than under Fixed
// (README, "Measured").
// Their NIC window is capped at Fixed's too (port.FixedNcwnd): Swift
// grows it to 256 requests when no receiver's buffers push back.
const LocalMaxFcwnd = 32 * rue.One

// cmProto is the RDMA function's part in connection set-up: one ordered
// connection per peer NIC.
func (r *Func) cmProto() cm.Proto {
	return cm.Proto{
		Config: func(c *falcon.ConnConfig) { c.Ordered = true },
		Local: func(c *falcon.ConnConfig) {
			c.MTU, c.MinRTO, c.InitRTO = LocalMTU, LocalMinRTO, LocalMinRTO
			c.MaxFcwnd, c.MaxNcwnd = LocalMaxFcwnd, port.FixedNcwnd
		},
		Up: func(peer [6]byte, c *falcon.Conn) error {
			r.conns[peer] = c
			r.Stats.ConnsUp.Inc()
			r.eng.KickAll()
			return nil
		},
		Down: func(peer [6]byte, c *falcon.Conn) {
			if r.conns[peer] == c {
				delete(r.conns, peer)
			}
			r.eng.ConnDown(c)
		},
	}
}
