package ether

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"falconnic/device/l2"
	"falconnic/internal/clock"
	"falconnic/vhostuser"
)

// Config configures one guest NIC.
type Config struct {
	Name       string           // e.g. "nic0"
	Socket     string           // vhost-user unix socket path
	MAC        net.HardwareAddr // the guest's MAC (QEMU's -device ...,mac=)
	QueuePairs int              // default 1
	Dial       bool             // connect to Socket instead of listening (default: listen)
	// RxWait bounds how long a local sender waits for room in a full RX
	// queue (DeliverPatient) before the frame drops. 0 means
	// DefaultRxWait; negative means never wait.
	RxWait time.Duration
	// Clock times those waits; nil means the real clock.
	Clock clock.Clock
}

// MaxQueuePairs bounds a NIC's virtio-net queue pairs.
const MaxQueuePairs = 16

// DefaultRxWait is Config.RxWait's default: long enough to ride out a
// TCG guest that is slow to refill its RX ring, short enough that a stuck
// guest costs its senders little (and only once: see DeliverPatient).
const DefaultRxWait = 50 * time.Millisecond

// Limits of the Ethernet function.
const (
	// rxQueueDepth is how many frames per pair wait in the NIC while the
	// guest has posted no RX buffers; beyond it frames drop (RxQueueFull).
	rxQueueDepth = 256
	// smallBufLen holds any standard-MTU frame; larger frames use the large pool.
	smallBufLen = 2048
	largeBufs   = 8
	// maxMergeBufs bounds the RX buffers one frame may span (MRG_RXBUF).
	maxMergeBufs = 64
)

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("device: NIC closed")

// ControlHandler receives control-channel frames (EtherType 0x88B5 to the
// NIC's own MAC) on the TX ring's goroutine. It must copy what it keeps.
type ControlHandler func(frame []byte)

type uplinkBox struct {
	s  l2.Sink
	ps l2.PatientSink // s, when it can hold the sender back
}

// NIC is one guest NIC's Ethernet function (virtio-net over vhost-user),
// to which the NIC's RDMA function attaches as its Upper (Attach: control
// frames and the guest's memory table); the daemon's NIC owns it with the
// NIC's Falcon port, RDMA and NVMe functions. A NIC survives QEMU
// reconnects; a vhost-user session does not.
type NIC struct {
	cfg      Config
	dev      *netDev
	srv      *vhostuser.Server
	uplink   atomic.Pointer[uplinkBox]
	control  atomic.Pointer[ControlHandler]
	upper    atomic.Pointer[upperBox]
	counters Counters

	small, large chan []byte   // free NIC buffers (the on-NIC RX pool)
	rxq          []chan []byte // frames waiting for each pair's RX ring
	rxActive     []atomic.Bool // RX ring of the pair is running
	rxStalled    []atomic.Bool // a DeliverPatient wait timed out; cleared by RX progress

	mu      sync.Mutex
	cancel  context.CancelFunc
	serving chan struct{}
	closed  bool
}

// New builds a NIC. uplink receives frames the guest transmits (it may
// be nil and set later with SetUplink).
func New(cfg Config, uplink l2.Sink) (*NIC, error) {
	if cfg.QueuePairs == 0 {
		cfg.QueuePairs = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	switch {
	case cfg.Name == "":
		return nil, errors.New("device: NIC needs a name")
	case cfg.Socket == "":
		return nil, fmt.Errorf("device: NIC %s needs a socket path", cfg.Name)
	case len(cfg.MAC) != 6:
		return nil, fmt.Errorf("device: NIC %s: MAC %q is not a 6-byte Ethernet address", cfg.Name, cfg.MAC)
	case cfg.QueuePairs < 1 || cfg.QueuePairs > MaxQueuePairs:
		return nil, fmt.Errorf("device: NIC %s: %d queue pairs (want 1..%d)", cfg.Name, cfg.QueuePairs, MaxQueuePairs)
	}
	cfg.MAC = append(net.HardwareAddr(nil), cfg.MAC...)
	n := &NIC{cfg: cfg}
	n.dev = &netDev{nic: n, pairs: cfg.QueuePairs}
	n.srv = &vhostuser.Server{Path: cfg.Socket, Dial: cfg.Dial, Device: n.dev}
	nsmall := cfg.QueuePairs*rxQueueDepth + 2*maxMergeBufs
	n.small = make(chan []byte, nsmall)
	slab := make([]byte, nsmall*smallBufLen)
	for i := 0; i < nsmall; i++ {
		n.small <- slab[i*smallBufLen : (i+1)*smallBufLen : (i+1)*smallBufLen]
	}
	n.large = make(chan []byte, largeBufs)
	for i := 0; i < largeBufs; i++ {
		n.large <- make([]byte, l2.MaxFrameLen)
	}
	n.rxq = make([]chan []byte, cfg.QueuePairs)
	for i := range n.rxq {
		n.rxq[i] = make(chan []byte, rxQueueDepth)
	}
	n.rxActive = make([]atomic.Bool, cfg.QueuePairs)
	n.rxStalled = make([]atomic.Bool, cfg.QueuePairs)
	n.SetUplink(uplink)
	return n, nil
}

// SetUplink sets where guest-transmitted frames go (may be called any time).
func (n *NIC) SetUplink(uplink l2.Sink) {
	if uplink == nil {
		n.uplink.Store(nil)
		return
	}
	ps, _ := uplink.(l2.PatientSink)
	n.uplink.Store(&uplinkBox{s: uplink, ps: ps})
}

// SetControlHandler sets the control-channel hook (nil detaches); Attach
// sets it to the upper function's.
func (n *NIC) SetControlHandler(h ControlHandler) {
	if h == nil {
		n.control.Store(nil)
		return
	}
	n.control.Store(&h)
}

// SetTrace sets a hook that receives one line per vhost-user message
// (debugging; call before Serve). nil turns tracing off.
func (n *NIC) SetTrace(f func(string)) { n.srv.Trace = f }

// Name returns the NIC's name.
func (n *NIC) Name() string { return n.cfg.Name }

// MAC returns the NIC's MAC.
func (n *NIC) MAC() net.HardwareAddr { return n.cfg.MAC }

// Serve listens (or dials) and serves vhost-user sessions until ctx is done
// or Close is called; it survives reconnects.
func (n *NIC) Serve(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	if n.serving != nil {
		n.mu.Unlock()
		return fmt.Errorf("device: NIC %s already serving", n.cfg.Name)
	}
	ctx, cancel := context.WithCancel(ctx)
	n.cancel = cancel
	served := make(chan struct{})
	n.serving = served
	n.mu.Unlock()
	defer func() {
		cancel()
		n.mu.Lock()
		n.serving, n.cancel = nil, nil
		n.mu.Unlock()
		close(served)
	}()
	return n.srv.Serve(ctx)
}

// Close stops Serve (the listening socket is removed) and waits for it.
func (n *NIC) Close() error {
	n.mu.Lock()
	n.closed = true
	cancel, served := n.cancel, n.serving
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-served
	}
	return nil
}

// Disconnect drops the current vhost-user session (QEMU with reconnect=N
// comes back; the NIC keeps its state).
func (n *NIC) Disconnect() { n.srv.Disconnect() }

// getBuf takes a free NIC buffer for a frame of length l.
func (n *NIC) getBuf(l int) []byte {
	pool := n.small
	if l > smallBufLen {
		pool = n.large
	}
	select {
	case b := <-pool:
		return b[:l]
	default:
		return nil
	}
}

func (n *NIC) putBuf(b []byte) {
	if cap(b) == smallBufLen {
		n.small <- b[:cap(b)]
	} else {
		n.large <- b[:cap(b)]
	}
}

// admit checks a frame for the guest, copies it into a NIC buffer and picks
// its RX pair; a nil buffer means it was dropped (counted).
func (n *NIC) admit(frame []byte) (b []byte, pair int) {
	if len(frame) < l2.HeaderLen {
		n.counters.RxRunt.Inc()
		return nil, 0
	}
	if len(frame) > l2.MaxFrameLen {
		n.counters.RxTooBig.Inc()
		return nil, 0
	}
	if b = n.getBuf(len(frame)); b == nil {
		n.counters.RxNoPoolBuf.Inc()
		return nil, 0
	}
	copy(b, frame)
	p := 0
	if len(n.rxq) > 1 {
		p = int(l2.FlowHash(frame) % uint32(len(n.rxq)))
		if !n.rxActive[p].Load() {
			p = 0
		}
	}
	return b, p
}

// Deliver queues a frame toward the guest (it implements l2.Sink). It
// never blocks: with no buffer or a full RX queue the frame is dropped and
// counted.
func (n *NIC) Deliver(frame []byte) {
	b, p := n.admit(frame)
	if b == nil {
		return
	}
	select {
	case n.rxq[p] <- b:
	default:
		n.counters.RxQueueFull.Inc()
		n.putBuf(b)
	}
}

// DeliverPatient is Deliver for a sender that can be held back (a local
// NIC's TX path): a full queue makes it wait up to RxWait for room before
// the frame drops. A pair whose wait timed out takes no more waits until
// its RX ring makes progress, so a stuck guest costs its senders one wait,
// not one per frame.
func (n *NIC) DeliverPatient(frame []byte) {
	b, p := n.admit(frame)
	if b == nil {
		return
	}
	select {
	case n.rxq[p] <- b:
		return
	default:
	}
	if wait := n.rxWait(); wait > 0 && n.rxActive[p].Load() && !n.rxStalled[p].Load() {
		n.counters.RxWaits.Inc()
		expired := make(chan struct{})
		t := n.cfg.Clock.AfterFunc(wait, func() { close(expired) })
		select {
		case n.rxq[p] <- b:
			t.Stop()
			return
		case <-expired:
			n.rxStalled[p].Store(true)
			n.counters.RxWaitTimeouts.Inc()
		}
	}
	n.counters.RxQueueFull.Inc()
	n.putBuf(b)
}

func (n *NIC) rxWait() time.Duration {
	if n.cfg.RxWait == 0 {
		return DefaultRxWait
	}
	return n.cfg.RxWait
}

// QueueStatus is one ring in Status.
type QueueStatus struct {
	Index     int    `json:"index"`
	Role      string `json:"role"`
	Size      int    `json:"size"`
	LastAvail uint16 `json:"last_avail"`
	Enabled   bool   `json:"enabled"`
	Running   bool   `json:"running"`
	Waiting   int    `json:"waiting,omitempty"` // RX frames queued in the NIC
}

// Status is a JSON-friendly snapshot of a NIC.
type Status struct {
	Name     string            `json:"name"`
	MAC      string            `json:"mac"`
	Socket   string            `json:"socket"`
	Mode     string            `json:"mode"`
	Session  string            `json:"session"`
	Features uint64            `json:"features"`
	Queues   []QueueStatus     `json:"queues"`
	Counters map[string]uint64 `json:"counters"`
}

// Status returns the NIC's state: session, rings and counters (the
// Ethernet function's, and the vhost-user back-end's prefixed "vhost.").
func (n *NIC) Status() Status {
	ss := n.srv.Status()
	st := Status{
		Name: n.cfg.Name, MAC: n.cfg.MAC.String(), Socket: n.cfg.Socket, Mode: "listen",
		Session: ss.State, Features: ss.Features, Counters: n.counters.Set().Snapshot(),
	}
	if n.cfg.Dial {
		st.Mode = "dial"
	}
	for k, v := range n.srv.Counters.Set().Snapshot() {
		st.Counters["vhost."+k] = v
	}
	if b := n.upper.Load(); b != nil {
		for k, v := range b.u.Status() {
			st.Counters[b.name+"."+k] = v
		}
	}
	for _, q := range ss.Queues {
		qs := QueueStatus{Index: q.Index, Size: q.Size, LastAvail: q.LastAvail, Enabled: q.Enabled, Running: q.Running}
		if q.Index%2 == 0 {
			qs.Role = fmt.Sprintf("rx%d", q.Index/2)
			qs.Waiting = len(n.rxq[q.Index/2])
		} else {
			qs.Role = fmt.Sprintf("tx%d", q.Index/2)
		}
		st.Queues = append(st.Queues, qs)
	}
	sort.Slice(st.Queues, func(i, j int) bool { return st.Queues[i].Index < st.Queues[j].Index })
	return st
}

// StatusJSON returns Status for the daemon's status reply.
func (n *NIC) StatusJSON() any { return n.Status() }

// Counters returns the Ethernet function's counters.
func (n *NIC) Counters() *Counters { return &n.counters }

// VhostCounters returns the vhost-user back-end's counters.
func (n *NIC) VhostCounters() *vhostuser.Counters { return &n.srv.Counters }

// ServeConn runs one vhost-user session on an established connection
// (tests and embedders that accept connections themselves).
func (n *NIC) ServeConn(c *net.UnixConn) error { return n.srv.ServeConn(c) }
