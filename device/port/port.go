// Package port is a NIC's Falcon port: the NIC's one Falcon endpoint,
// driven by one goroutine (Run), carrying every Falcon ULP of the NIC —
// the verbs engine (protocol 2) and the NVMe engine (protocol 3) attach by
// protocol — with one CID space, one set of resource pools and one RUE,
// the NIC's firmware (firmware.go: Swift by default, or fixed windows,
// swappable while the port runs).
// Everything else reaches the endpoint through Do/Call, Receive and
// Control, which queue work for that goroutine. One goroutine may run
// several ports (Adopt), as one core of a NIC runs several engines; two
// ports of one daemon exchange frames a burst at a time (LinkTo).
//
// Time is the port's injected clock: the endpoint reads it once per work
// item (burstClock), and the port sleeps until the next deadline on that
// clock (portWaker), so a port on a manual clock moves only when the test
// advances it. Initial sequence numbers come from crypto/rand (CryptoRand).
package port

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/framebuf"
	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// Port is one NIC's Falcon endpoint with its one owning goroutine
// (Run): the real clock (or an injected one), a link, and the ULPs
// attached by protocol type (RDMA = 2, NVMe = 3): every Falcon ULP of the
// NIC shares its one endpoint, CID space, resource pools and RUE.
// Everything else reaches the endpoint through Do/Call, Receive and
// Control, which queue work for that goroutine. One goroutine may run
// several ports (Adopt), as one core of a NIC runs several engines.
type Port struct {
	ep    *falcon.Endpoint
	clk   clock.Clock
	bc    *burstClock // the endpoint's view of clk
	work  chan portWork
	ulps  [16]falcon.ULP
	ctl   func(frame []byte) // the control-channel handler (SetControl)
	timed []ulpTimers
	polls []ulpPoller   // ULPs whose deadlines may be polls (spin)
	idle  []func()      // run at the end of each burst of work (OnIdle)
	cur   *framebuf.Buf // the pooled frame being handled, unless a ULP kept it (KeepFrame)
	kept  int           // frames ULPs kept and have not released
	dead  chan struct{} // closed when Run returns
	// rue is the port's firmware (UseFirmware, SwapFirmware).
	rue *portRUE
	// paths are the flows, path policy and reroute of the connections it
	// opens (UseMultipath).
	paths falcon.ConnConfig
	// windows holds the initial window of each connection opened with an
	// InitFcwnd (Connect): the fixed firmware keeps it there.
	windows map[uint32]rue.Fixed
	// links are this port's links to other ports of the daemon, one per
	// peer port (LinkTo), so connections between two ports share one
	// outbox.
	links map[*Port]falcon.RefLink
	// core lists the ports this port's goroutine runs (itself first; only
	// on that goroutine). runner is the port whose goroutine runs this one
	// instead, adopted how many ports this one's goroutine runs besides
	// itself (Adopt).
	core    []*Port
	runner  *Port
	adopted int
	// resumeStalls: a timer pass lateWake or more past its deadline tells
	// the endpoints they were stalled (falcon.Endpoint.Resumed). Only on
	// the real clock: a test's clock.Manual jumps when the test says so.
	resumeStalls bool
	// busyAt is when the latest work item ended with more work already
	// queued (negative: the goroutine may have waited since): the next
	// item should start at once (run).
	busyAt time.Duration
	Stats  Counters
	// WrapLink, when set (before the port runs), sees this port's link to
	// each other port of the daemon as LinkTo makes it, and returns the
	// link to use in its place (the daemon's capture taps it).
	WrapLink func(to *Port, l falcon.RefLink) falcon.RefLink
}

type portWork struct {
	p     *Port // the port the work is for
	pkt   []byte
	buf   *framebuf.Buf // pkt's pooled buffer, if any
	ctl   bool          // pkt is a control-channel frame (Control), not a Falcon packet
	burst *portBurst    // a burst of frames from another port (portLink)
	flow  uint32
	fn    func(*falcon.Endpoint)
	sa    PacketOpener // pkt is a PSP datagram this SA opens (ReceiveSealed)
	// at is when the frames reached the port (0: not said): the
	// endpoint's receive timestamps (falcon.Endpoint.Arrived), so the
	// time they wait in the queue is not taken for the fabric's.
	at time.Duration
}

// Counters count the port's queue and demux drops.
type Counters struct {
	RxPackets, RxQueueFull, RxNoULP, RxByRef, RxShared stats.Counter
	CtlQueueFull, CtlNoHandler                         stats.Counter
	// TimerLate counts timer wakes at least lateWake past their deadline,
	// TimerLateMaxUs the latest (µs): the host did not run the port's
	// goroutine. A Falcon RTO that falls in such a gap fires before the
	// goroutine can handle the ACK: these explain retx_rto on links that
	// never lose a packet.
	TimerLate, TimerLateMaxUs stats.Counter
	// Resumed counts timer passes that ran lateWake or more past the
	// deadline the goroutine waited for, after which the endpoints
	// restarted their due loss timers (falcon.Endpoint.Resumed).
	Resumed stats.Counter
	// BusyStalls counts work items that ran lateWake or more, or began
	// lateWake or more after the one before ended with them queued: the
	// host did not run the busy goroutine for that long (run).
	BusyStalls stats.Counter
	// SpinDenied counts the times a polling ULP's port slept on its
	// timer instead of spinning: other goroutines held every spinning
	// place (spinners).
	SpinDenied stats.Counter
	// SpinNoIdleCPU counts the same when the host had no idle CPU: the
	// spin would have taken one from another thread (idleCPU).
	SpinNoIdleCPU stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "port_rx_packets", Help: "Falcon packets handed to the endpoint", Counter: &c.RxPackets},
		{Name: "port_rx_queue_full", Help: "Falcon packets dropped: the port's queue was full", Counter: &c.RxQueueFull},
		{Name: "port_rx_no_ulp", Help: "requests and completions for a protocol no ULP is attached for", Counter: &c.RxNoULP},
		{Name: "port_rx_by_ref", Help: "frames from another port of the daemon taken in place, not copied (falcon.RefLink)", Counter: &c.RxByRef},
		{Name: "port_rx_shared", Help: "frames from another port of the daemon taken over in its shared frame buffer, not copied (falcon.RefLink)", Counter: &c.RxShared},
		{Name: "port_ctl_queue_full", Help: "control-channel frames dropped: the port's queue was full", Counter: &c.CtlQueueFull},
		{Name: "port_ctl_no_handler", Help: "control-channel frames dropped: no function handles them", Counter: &c.CtlNoHandler},
		{Name: "port_timer_late", Help: "timer wakes 1 ms or more past their deadline (the host did not run the port's goroutine)", Counter: &c.TimerLate},
		{Name: "port_resumed", Help: "timer passes 1 ms or more past their deadline (woken late, or spun or busy past it) after which the endpoints restarted their due loss timers instead of resending", Counter: &c.Resumed},
		{Name: "port_busy_stalls", Help: "work items that took 1 ms or more, or began 1 ms or more after the one before ended with them queued (the host did not run the busy goroutine); the endpoints then restarted their due loss timers and kept their in-flight packets' delays from the RUE", Counter: &c.BusyStalls},
		{Name: "port_timer_late_max_us", Help: "the latest timer wake, µs past its deadline", Counter: &c.TimerLateMaxUs},
		{Name: "port_spin_denied", Help: "waits for a polling ULP's deadline slept on the timer, not spun: GOMAXPROCS-1 goroutines already spin (one P stays for the network poller)", Counter: &c.SpinDenied},
		{Name: "port_spin_no_idle_cpu", Help: "waits for a polling ULP's deadline slept on the timer, not spun: the host's runnable threads left no CPU idle (a spin would take one from a guest)", Counter: &c.SpinNoIdleCPU},
	}
}

// queueLen bounds the work waiting for a port.
const queueLen = 8192

// New returns a port whose endpoint sends to link (nil: every
// connection must name its own Peer link). clk nil is the real clock. The
// endpoint's initial sequence numbers come from crypto/rand, so no two
// ports (nor two runs of a daemon) start from the same ones.
func New(clk clock.Clock, link falcon.Link) *Port {
	if clk == nil {
		clk = clock.Real
	}
	if link == nil {
		link = dropLink{}
	}
	p := &Port{clk: clk, bc: &burstClock{base: clk}, work: make(chan portWork, queueLen), dead: make(chan struct{}),
		windows: map[uint32]rue.Fixed{}, links: map[*Port]falcon.RefLink{}}
	p.core = []*Port{p}
	p.resumeStalls, p.busyAt = clk == clock.Real, -1
	p.rue = &portRUE{p: p}
	if err := p.UseFirmware(FirmwareSpec{}); err != nil {
		panic("port: the default firmware: " + err.Error())
	}
	p.ep = falcon.New(falcon.Config{Clock: p.bc, Link: link, ULP: portDemux{p}, Rand: CryptoRand{}, RUE: p.rue})
	return p
}

// dropLink is the endpoint's default link: every connection names its own.
type dropLink struct{}

func (dropLink) Send([]byte, uint32) {}

// CryptoRand is a source of initial sequence numbers and CIDs:
// crypto/rand, read at each connection set-up (not a hot path); safe for
// concurrent use.
type CryptoRand struct{}

// Uint32 returns 32 random bits (falcon.Config's Rand).
func (CryptoRand) Uint32() uint32 {
	var b [4]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic("port: crypto/rand: " + err.Error()) // crypto/rand.Read does not fail on Linux
	}
	return binary.LittleEndian.Uint32(b[:])
}

// Connect opens a connection on the port's endpoint (on the port's
// goroutine). A non-zero cfg.InitFcwnd is where the connection's window
// starts, and under the fixed firmware where it stays; a cfg that names no
// flows takes the port's (UseMultipath).
func (p *Port) Connect(cfg falcon.ConnConfig) (*falcon.Conn, error) {
	p.applyPaths(&cfg)
	c, err := p.ep.Connect(cfg)
	if err == nil && cfg.InitFcwnd != 0 {
		p.windows[c.SCID()] = cfg.InitFcwnd
	}
	return c, err
}

// CloseConn closes connection scid (on the port's goroutine); its
// outstanding transactions fail.
func (p *Port) CloseConn(scid uint32) error {
	delete(p.windows, scid)
	return p.ep.Close(scid)
}

// LinkTo returns the port's link to port q of the same daemon (on p's
// goroutine): one per pair of ports, whatever protocols connect them.
func (p *Port) LinkTo(q *Port) falcon.Link {
	l, ok := p.links[q]
	if !ok {
		l = newPortLink(p, q)
		if p.WrapLink != nil {
			l = p.WrapLink(q, l)
		}
		p.links[q] = l
	}
	return l
}

// ConnCounts reports the port's connections per protocol ("rdma",
// "nvme"; on the port's goroutine).
func (p *Port) ConnCounts() map[string]int {
	m := map[string]int{}
	for _, c := range p.ep.Conns() {
		m[protoName(c.Config().Protocol)]++
	}
	return m
}

// protoName names a Falcon ULP protocol for status.
func protoName(t wire.ProtocolType) string {
	switch t {
	case wire.ProtoRDMA:
		return "rdma"
	case wire.ProtoNVMe:
		return "nvme"
	}
	return "proto_" + strconv.Itoa(int(t))
}

// ulpTimers is what a ULP with deadlines of its own (command timeouts)
// implements; the port drives them with the endpoint's.
type ulpTimers interface {
	NextDeadline() (time.Duration, bool)
	OnTimer(now time.Duration)
}

// ulpPoller is a ULP with timers that polls guest memory at them (the
// verbs engine's doorbell polling): while Polling reports true, the port's
// goroutine on the real clock spins for its deadlines instead of sleeping
// (spin).
type ulpPoller interface {
	Polling() bool
}

// SetULP attaches u for connections of protocol proto (and drives its
// timers if it has any). Call before Run.
func (p *Port) SetULP(proto wire.ProtocolType, u falcon.ULP) {
	p.ulps[proto&15] = u
	if t, ok := u.(ulpTimers); ok {
		p.timed = append(p.timed, t)
		if q, ok := u.(ulpPoller); ok {
			p.polls = append(p.polls, q)
		}
	}
}

// polling reports whether a ULP of a port p's goroutine runs is polling.
func (p *Port) polling() bool {
	for _, q := range p.core {
		for _, u := range q.polls {
			if u.Polling() {
				return true
			}
		}
	}
	return false
}

// OnIdle runs fn on the port's goroutine at the end of each burst of
// work, before the port waits again: for work gathered during the burst
// and handed on in one piece (nsPool). Call before Run, or on the port's
// goroutine.
func (p *Port) OnIdle(fn func()) { p.idle = append(p.idle, fn) }

// Clock returns the port's clock.
func (p *Port) Clock() clock.Clock { return p.clk }

// nextDeadline is the earliest of the endpoint's and the ULPs' deadlines.
func (p *Port) nextDeadline() (time.Duration, bool) {
	at, ok := p.ep.NextDeadline()
	for _, t := range p.timed {
		if d, has := t.NextDeadline(); has && (!ok || d < at) {
			at, ok = d, true
		}
	}
	return at, ok
}

// Receive queues a Falcon frame from the link (copied; never blocks).
func (p *Port) Receive(pkt []byte, flow uint32) {
	w := portWork{p: p, flow: flow, at: p.clk.Now()}
	w.pkt, w.buf = copyFrame(pkt)
	select {
	case p.work <- w:
	default:
		p.Stats.RxQueueFull.Inc()
		putFrame(w.buf)
	}
}

// copyFrame copies frame pkt into a pooled frame buffer (a larger one
// into a buffer of its own, buf nil), its packet ending on a page
// (framebuf.Buf.Tail), as a NIC's DMA engine fills page-aligned receive
// buffers: a payload of whole 4 KiB pages then starts on one too, and the
// NVMe target can hand a write's data to an O_DIRECT write where it lies
// instead of copying it to an aligned buffer (KeepFrame). The endpoint
// copies whatever it keeps of a frame (falcon.Link's and the ULP
// callbacks' contracts), so the buffer is free again once Endpoint.Receive
// returns, unless a ULP kept it; pooling spares an allocation (and its
// zeroing and collection) per packet.
func copyFrame(pkt []byte) (frame []byte, buf *framebuf.Buf) {
	buf = framebuf.Get(len(pkt))
	frame, ok := buf.Tail(len(pkt), falcon.EnvelopeLen)
	if !ok {
		buf.Release()
		return append([]byte(nil), pkt...), nil
	}
	copy(frame, pkt)
	return frame, buf
}

// putFrame lets the port's reference to a frame buffer go (nil: none).
func putFrame(b *framebuf.Buf) {
	if b != nil {
		b.Release()
	}
}

// ReceiveFalcon is Receive for the fabric's Falcon demux (the connection
// manager's CID table).
func (p *Port) ReceiveFalcon(pkt []byte, flow uint32) { p.Receive(pkt, flow) }

// SetControl has fn handle the NIC's control-channel frames on the port's
// goroutine (the RDMA function's driver interface). Call before Run.
func (p *Port) SetControl(fn func(frame []byte)) { p.ctl = fn }

// Control queues a control-channel frame from the guest driver as port
// work (copied; never blocks). It reports false, counted, when the
// port's queue is full.
func (p *Port) Control(frame []byte) bool {
	w := portWork{p: p, ctl: true}
	w.pkt, w.buf = copyFrame(frame)
	select {
	case p.work <- w:
		return true
	default:
		p.Stats.CtlQueueFull.Inc()
		putFrame(w.buf)
		return false
	}
}

// AddTimers drives t's deadlines with the endpoint's (on the port's
// goroutine: before Run, or through Call).
func (p *Port) AddTimers(t ulpTimers) { p.timed = append(p.timed, t) }

// Do queues fn to run on the owning goroutine. It reports false, and
// fn never runs, once the port has stopped.
func (p *Port) Do(fn func(ep *falcon.Endpoint)) bool {
	select {
	case <-p.dead:
		return false
	default:
	}
	select {
	case p.work <- portWork{p: p, fn: fn}:
		return true
	case <-p.dead:
		return false
	}
}

// TryDo is Do that never blocks: it reports false, and fn never runs, when
// the port's queue is full or the port has stopped (for work that is
// retried anyway: connection-manager messages).
func (p *Port) TryDo(fn func(ep *falcon.Endpoint)) bool {
	select {
	case <-p.dead:
		return false
	default:
	}
	select {
	case p.work <- portWork{p: p, fn: fn}:
		return true
	default:
		return false
	}
}

// Call runs fn on the owning goroutine and waits for it. It reports
// false, and fn never runs, once the port has stopped.
func (p *Port) Call(fn func(ep *falcon.Endpoint)) bool {
	done := make(chan struct{})
	if !p.Do(func(ep *falcon.Endpoint) { fn(ep); close(done) }) {
		return false
	}
	select {
	case <-done:
		return true
	case <-p.dead:
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// ErrStopped is returned by work that needed a stopped Port.
var ErrStopped = errors.New("port: Falcon port stopped")

// Run is the owning goroutine: work, then due timers, until ctx ends —
// for p and the ports it adopted. An adopted port's Run only waits until
// ctx ends or its runner stops.
func (p *Port) Run(ctx context.Context) {
	if p.runner != nil {
		select {
		case <-ctx.Done():
		case <-p.dead:
		}
		return
	}
	defer close(p.dead)
	wake := newPortWaker(p.clk)
	defer wake.stop()
	// armed is the deadline the timer is set for: it is reset only when
	// the next deadline moves (each reset may wake the runtime's poller:
	// 1 % of the daemon's CPU when done every burst).
	const none = time.Duration(-1)
	armed := none
	spins := p.clk == clock.Real
	maxSpinners := int32(runtime.GOMAXPROCS(0) - 1)
	for {
		at, ok := p.coreDeadline()
		if ok && spins && p.polling() {
			if !hostIdle.spareAt(p.clk.Now()) {
				p.Stats.SpinNoIdleCPU.Inc()
			} else if takeSpin(maxSpinners) {
				if armed != none {
					wake.arm(time.Hour) // a wake-up for a deadline spun past would count as late
					armed = none
				}
				run := p.spin(ctx, at)
				spinners.Add(-1)
				if !run {
					return
				}
				continue
			} else {
				p.Stats.SpinDenied.Inc()
			}
		}
		if !ok {
			at = none
		}
		if at != armed {
			d := time.Hour
			if ok {
				d = max(at-p.clk.Now(), 0)
			}
			wake.arm(d)
			armed = at
		}
		select {
		case <-ctx.Done():
			return
		case w := <-p.work:
			p.run(w)
		case <-wake.c:
			if late := p.clk.Now() - armed; late >= lateWake {
				p.Stats.TimerLate.Inc()
				p.Stats.TimerLateMaxUs.Max(uint64(late / time.Microsecond))
			}
			armed = none // fired: the next pass arms it again
		}
		p.drainThenPass(at)
	}
}

// spin runs the port's goroutine without sleeping until work comes or the
// deadline at passes, then handles both as a wake-up would. It reports
// false when ctx ended. A ULP polls guest memory at its deadlines (a
// doorbell-polling window, bounded by the ULP): Go's timers sleep at least
// a millisecond when the process is otherwise idle (the runtime's netpoll
// waits in whole milliseconds), far longer than a poll interval. Between
// checks the goroutine yields, so the goroutines of the daemon's other
// ports and functions run on the same thread.
func (p *Port) spin(ctx context.Context, at time.Duration) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case w := <-p.work:
			p.run(w)
			p.drainThenPass(at)
			return true
		default:
		}
		if p.clk.Now() >= at {
			p.drainThenPass(at)
			return true
		}
		runtime.Gosched()
	}
}

// spinners counts the goroutines of the daemon spinning for a polling ULP
// (spin). A goroutine that keeps itself runnable keeps its P from the
// runtime's network poller, which the scheduler consults only when a P
// runs out of goroutines: with every P spinning, a guest's kick, a fabric
// datagram or an io_uring completion would wait for sysmon's poll, up to
// 10 ms. So at most GOMAXPROCS-1 goroutines spin; a port that finds no
// room sleeps on its timer as without polling (port_spin_denied), and its
// polls, running late, switch the ULP's polling off.
var spinners atomic.Int32

// takeSpin takes one of max spinning places.
func takeSpin(max int32) bool {
	for {
		n := spinners.Load()
		if n >= max {
			return false
		}
		if spinners.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// lateWake is how late a timer wake must be to count as one: the port's
// goroutine was not run for that long (the host ran something else).
const lateWake = time.Millisecond

// drainThenPass handles the work already queued, then runs the due timers
// and end-of-burst work. Work goes first whatever woke the goroutine: after
// the host did not run it for a while, both the timer and acknowledgements
// are ready at once, and a timer pass ahead of them would resend packets
// that an ACK waiting in the queue covers (spurious RTO resends between
// two ports of one daemon). Go's select picks among ready cases at random,
// so the order is made here. The queue is drained to its size at most, so
// timers still run under a steady stream.
//
// due is the earliest deadline the goroutine knew of when it last waited
// (negative: none). A pass lateWake or more past it ran after the host
// had not run the goroutine (or after a backlog of work) for that long:
// no ACK was handled meanwhile, nor sent by a peer port the same stall
// stopped, so the endpoints restart their due loss timers (Resumed)
// rather than resend what the peer holds.
func (p *Port) drainThenPass(due time.Duration) {
	for n := 0; n < queueLen; n++ {
		select {
		case w := <-p.work:
			p.run(w)
			continue
		default:
		}
		break
	}
	now := p.clk.Now()
	stalled := p.resumeStalls && due >= 0 && now-due >= lateWake
	if stalled {
		p.Stats.Resumed.Inc()
	}
	for _, q := range p.core {
		if stalled {
			q.ep.Resumed(now)
		}
		q.pass(now)
	}
	p.busyAt = -1 // the gap after a pass is the pass's (timed above)
}

// run handles one work item (w.p is p or a port p's goroutine runs) and
// judges whether the host stalled the goroutine around it. No item's own
// work takes lateWake (a burst of frames, a closure): one that ran that
// long, or that began that long after the item before it ended with it
// already queued, ran on a goroutine the host had stopped running, as a
// late timer wake shows for a waiting one (drainThenPass). For that time
// the endpoints handled no acknowledgement, so they restart their due
// loss timers and keep the delays of the packets they had sent, which
// measured the stall, from their RUEs (falcon.Endpoint.Resumed).
func (p *Port) run(w portWork) {
	start := p.clk.Now()
	w.p.handle(w, start)
	end := p.clk.Now()
	stalled := end-start >= lateWake || p.busyAt >= 0 && start-p.busyAt >= lateWake
	p.busyAt = -1
	if len(p.work) > 0 {
		p.busyAt = end
	}
	if stalled && p.resumeStalls {
		p.Stats.BusyStalls.Inc()
		for _, q := range p.core {
			q.ep.Resumed(end)
		}
	}
}

// portWaker wakes a port's goroutine when its next deadline is due on the
// port's clock: on the real clock a runtime timer reset in place (no
// allocation per re-arm); on any other clock (a test's clock.Manual) one of
// that clock's timers, so advancing the clock wakes the port.
type portWaker struct {
	clk   clock.Clock
	t     *time.Timer // the real clock's
	ct    clock.Timer // another clock's
	c     <-chan time.Time
	fired chan time.Time
}

func newPortWaker(clk clock.Clock) *portWaker {
	w := &portWaker{clk: clk}
	if clk == clock.Real {
		w.t = time.NewTimer(time.Hour)
		w.c = w.t.C
	} else {
		w.fired = make(chan time.Time, 1)
		w.c = w.fired
	}
	return w
}

// arm sets the wake-up d from now, replacing the one set before.
func (w *portWaker) arm(d time.Duration) {
	if w.t != nil {
		if !w.t.Stop() {
			select {
			case <-w.t.C:
			default:
			}
		}
		w.t.Reset(d)
		return
	}
	if w.ct != nil {
		w.ct.Stop()
	}
	select { // a wake-up of the old deadline is stale
	case <-w.fired:
	default:
	}
	w.ct = w.clk.AfterFunc(d, func() {
		select {
		case w.fired <- time.Time{}:
		default:
		}
	})
}

func (w *portWaker) stop() {
	if w.t != nil {
		w.t.Stop()
	}
	if w.ct != nil {
		w.ct.Stop()
	}
}

// pass runs the port's due timers and its end-of-burst work.
func (p *Port) pass(now clock.Time) {
	p.bc.set(now)
	p.ep.OnTimer(now)
	for _, u := range p.timed {
		if at, ok := u.NextDeadline(); ok && at <= now {
			u.OnTimer(now)
		}
	}
	for _, fn := range p.idle {
		fn()
	}
	p.bc.clear()
}

// coreDeadline is the earliest deadline of the ports p's goroutine runs.
func (p *Port) coreDeadline() (time.Duration, bool) {
	var at time.Duration
	ok := false
	for _, q := range p.core {
		if d, has := q.nextDeadline(); has && (!ok || d < at) {
			at, ok = d, true
		}
	}
	return at, ok
}

// RunsOn returns the port whose goroutine runs p: its runner if another
// port adopted it, else p.
func (p *Port) RunsOn() *Port {
	if p.runner != nil {
		return p.runner
	}
	return p
}

// Adopt has p's goroutine run q too, as one NIC core runs several ports:
// frames between them (portLink) then pass without waking another
// thread, and q's work, timers and end-of-burst work run between p's.
// The ports then share one work queue (queueLen items), so a
// port's bursts can fill it for the others. Call once q is set up
// (SetULP, OnIdle) and before it takes work (p may be running); both must
// have the same clock. q must not have adopted ports itself, nor p be
// adopted (a programming error: it panics).
func (p *Port) Adopt(q *Port) {
	if p.runner != nil || q.runner != nil || q.adopted != 0 || p == q {
		panic("port: Port.Adopt: the runner is adopted, or the adopted port is or runs others")
	}
	q.work, q.dead, q.core, q.runner = p.work, p.dead, nil, p
	p.adopted++
	// Through p's queue: q joins p's rounds before any of q's work.
	p.Do(func(*falcon.Endpoint) { p.core = append(p.core, q) })
}

// burstClock is the endpoint's clock: the port's, read once per work item
// (a received packet, a burst of frames from another port, a Do) and per
// timer pass rather than at each of the
// endpoint's many reads while it handles one — what a NIC does with one
// timestamp per event. It is only used on the port's goroutine; outside a
// work item it reads the port's clock.
type burstClock struct {
	base  clock.Clock
	now   clock.Time
	valid bool
}

func (c *burstClock) set(now clock.Time) { c.now, c.valid = now, true }
func (c *burstClock) clear()             { c.valid = false }

// Now implements clock.Clock.
func (c *burstClock) Now() clock.Time {
	if c.valid {
		return c.now
	}
	return c.base.Now()
}

// AfterFunc implements clock.Clock.
func (c *burstClock) AfterFunc(d time.Duration, f func()) clock.Timer { return c.base.AfterFunc(d, f) }

func (p *Port) handle(w portWork, now clock.Time) {
	p.bc.set(now)
	p.ep.Arrived(w.at) // 0 for work that brings no frames
	defer func() { p.ep.Arrived(0); p.bc.clear() }()
	switch {
	case w.fn != nil:
		w.fn(p.ep)
	case w.ctl:
		if p.ctl == nil {
			p.Stats.CtlNoHandler.Inc()
		} else {
			p.ctl(w.pkt)
		}
		putFrame(w.buf)
	case w.burst != nil:
		// One burst of the endpoint's counters per burst of frames: its
		// per-packet counts are published once, at EndBurst. The frames
		// of a burst arrived together: they share one timestamp, the
		// clock read above, as a NIC stamps a batch it takes off a ring.
		p.ep.BeginBurst()
		p.Stats.RxPackets.Add(uint64(len(w.burst.frames)))
		for _, f := range w.burst.frames {
			p.cur = f.buf
			p.ep.ReceiveInProcess(f.pkt, f.flow)
			putFrame(p.cur)
		}
		p.ep.EndBurst()
		p.cur = nil
		putBurst(w.burst)
	case w.sa != nil:
		p.receiveSealed(w)
	default:
		p.Stats.RxPackets.Inc()
		p.cur = w.buf
		p.ep.Receive(w.pkt, w.flow)
		putFrame(p.cur)
		p.cur = nil
	}
}

// KeepFrame takes the pooled buffer of the frame being received away from
// the port, if data lies in it (nil otherwise: not a pooled frame, or data
// a copy the endpoint made): data stays valid until ReleaseFrame. Only
// during a ULP callback, on the port's goroutine.
func (p *Port) KeepFrame(data []byte) *framebuf.Buf {
	b := p.cur
	if b == nil || !b.Within(data) {
		return nil
	}
	p.cur = nil
	p.kept++
	return b
}

// ReleaseFrame gives back a buffer KeepFrame returned (on the port's
// goroutine).
func (p *Port) ReleaseFrame(b *framebuf.Buf) {
	p.kept--
	putFrame(b)
}

// portDemux is the endpoint's ULP: it hands each callback to the ULP of
// the connection's protocol.
type portDemux struct{ p *Port }

func (d portDemux) ulp(c *falcon.Conn) falcon.ULP {
	u := d.p.ulps[c.Config().Protocol&15] // a Conn.Protocol() accessor would avoid the copy
	if u == nil {
		d.p.Stats.RxNoULP.Inc()
	}
	return u
}

func (d portDemux) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if u := d.ulp(c); u != nil {
		u.OnRequest(c, r)
	}
}

func (d portDemux) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	if u := d.ulp(c); u != nil {
		u.OnCompletion(c, cpl)
	}
}

func (d portDemux) OnXon(c *falcon.Conn) {
	if u := d.ulp(c); u != nil {
		u.OnXon(c)
	}
}

// portLink delivers one port's frames to another port of the same daemon
// a burst at a time: the frames the sending endpoint sends while its port
// handles a burst of work are copied to an outbox and handed to the other
// port as one work item at the end of the burst (OnIdle), so two ports
// exchanging a stream pay one queue operation and at most one wake-up per
// burst rather than per packet. Send runs on the sending port's goroutine
// (the endpoint's); newPortLink registers the flush there too.
type portLink struct{ ob *portOutbox }

type portOutbox struct {
	to    *Port
	burst *portBurst
}

// portBurst is a burst of frames and the arena its small frames are
// copied to: one pooled buffer and no reference counting for a whole
// burst of ACKs, requests and completions.
type portBurst struct {
	frames []portFrame
	arena  []byte
}

// portFrame is one frame of a burst: in a pooled buffer (whose reference
// the burst holds), or, buf nil, in the burst's arena or one the sender
// lent (SendRef).
type portFrame struct {
	pkt  []byte
	buf  *framebuf.Buf
	flow uint32
}

// portBurstMax bounds a burst: a longer one is handed over at once.
const portBurstMax = 256

// portEagerBurst: a burst this long goes at once if the receiving port has
// no work queued (it is idle or about to be), so the two ports of a
// request/response exchange (NVMe pulls: Pull Request one way, Pull Data
// back) work in parallel instead of taking turns over whole bursts, which
// held a window-limited stream to one window per two burst times.
const portEagerBurst = 16

// portSmallFrame is the largest frame copied to a burst's arena, which
// holds portArena bytes; larger frames, and small ones once it is full,
// get a pooled frame buffer (copyFrame).
const (
	portSmallFrame = 512
	portArena      = 32 << 10
)

var bursts = sync.Pool{New: func() any {
	return &portBurst{frames: make([]portFrame, 0, portBurstMax), arena: make([]byte, 0, portArena)}
}}

func putBurst(b *portBurst) {
	clear(b.frames)
	b.frames, b.arena = b.frames[:0], b.arena[:0]
	bursts.Put(b)
}

// newPortLink returns a link from port from to port to; call it on from's
// goroutine (or before from runs).
func newPortLink(from, to *Port) portLink {
	ob := &portOutbox{to: to}
	from.OnIdle(ob.flush)
	return portLink{ob}
}

// InProcess implements falcon.InProcessLink: frames reach the other port's
// endpoint through ReceiveInProcess (handle), never a wire.
func (portLink) InProcess() {}

// Send implements falcon.Link: the frame is copied to the outbox.
func (l portLink) Send(pkt []byte, flow uint32) {
	f := portFrame{flow: flow}
	b := l.ob.open()
	if n := len(b.arena); len(pkt) <= portSmallFrame && n+len(pkt) <= cap(b.arena) {
		b.arena = append(b.arena, pkt...)
		f.pkt = b.arena[n:len(b.arena):len(b.arena)]
	} else {
		f.pkt, f.buf = copyFrame(pkt)
	}
	l.add(f)
}

// SendRef implements falcon.RefLink: the frame goes to the outbox as it
// is (a Read Response in the NVMe target's chunk); the receiving port
// reads it in place and neither keeps nor recycles it.
func (l portLink) SendRef(frame []byte, flow uint32) {
	l.ob.to.Stats.RxByRef.Inc()
	l.add(portFrame{pkt: frame, flow: flow})
}

// SendShared implements falcon.RefLink: the frame goes to the outbox in
// the sender's shared buffer, whose reference it brings; the receiving
// port takes it as a frame of its own (a Write Data Response the NVMe
// target keeps for its write).
func (l portLink) SendShared(frame []byte, mem *framebuf.Buf, flow uint32) {
	l.ob.to.Stats.RxShared.Inc()
	l.add(portFrame{pkt: frame, buf: mem, flow: flow})
}

// open returns the burst being filled.
func (ob *portOutbox) open() *portBurst {
	if ob.burst == nil {
		ob.burst = bursts.Get().(*portBurst)
	}
	return ob.burst
}

// add queues f in the outbox, handing the burst over when it is long.
func (l portLink) add(f portFrame) {
	ob := l.ob
	b := ob.open()
	b.frames = append(b.frames, f)
	if n := len(b.frames); n >= portBurstMax || n >= portEagerBurst && len(ob.to.work) == 0 {
		ob.flush()
	}
}

// flush hands the burst to the receiving port (dropped, counted there, if
// its queue is full: Falcon resends).
func (ob *portOutbox) flush() {
	if ob.burst == nil || len(ob.burst.frames) == 0 {
		return
	}
	b := ob.burst
	ob.burst = nil
	// The frames leave now: their IV says so (falcon.Restamp), and they
	// arrive now. Ports of one daemon share its clock.
	now := ob.to.clk.Now()
	iv := wire.TimestampAt(now)
	for _, f := range b.frames {
		falcon.Restamp(f.pkt, iv)
	}
	select {
	case ob.to.work <- portWork{p: ob.to, burst: b, at: now}:
	default:
		ob.to.Stats.RxQueueFull.Add(uint64(len(b.frames)))
		for _, f := range b.frames {
			putFrame(f.buf)
		}
		putBurst(b)
	}
}

// RandomPSNs fills c's TX sequence numbers from the endpoint's source
// (crypto/rand: safe from any goroutine).
func (p *Port) RandomPSNs(c *falcon.ConnConfig) { p.ep.RandomPSNs(c) }

// Stopped is closed once the port's goroutine (its runner's, for an adopted
// port) has returned.
func (p *Port) Stopped() <-chan struct{} { return p.dead }

// KeptFrames reports how many frames ULPs kept (KeepFrame) and have not
// released (on the port's goroutine).
func (p *Port) KeptFrames() int { return p.kept }
