package falcon

import (
	"errors"
	"time"

	"falconnic/falcon/framebuf"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// Link is where an endpoint sends frames (falcon/link's Link satisfies it).
// Send must copy pkt before returning; flow is the flow label.
type Link interface {
	Send(pkt []byte, flow uint32)
}

// InProcessLink is a Link whose frames go from memory to memory inside
// one process (two NICs of one daemon) and reach the peer endpoint
// through ReceiveInProcess. Nothing on it can corrupt or forge a frame, so
// the endpoint does not compute the envelope's ICV for it (the PSP
// stand-in, envelope.go): CRC32C of every packet twice was 7-9 % of the
// daemon's CPU in `falconnic bench nvme`. The frame layout is unchanged
// (the ICV field is zero).
type InProcessLink interface {
	Link
	InProcess()
}

// SealingLink is a Link that authenticates and encrypts every frame
// itself (PSP: package psp) [digest §2.1, F-WIRE-9]. The endpoint leaves
// the envelope's ICV field zero for it, as for an InProcessLink; the
// link splits the frame (SplitEnvelope), seals the packet with the
// envelope's IV timestamp as PSP's T1/T3 and, at the far end, hands
// what PSP opened to ReceiveAuthenticated.
type SealingLink interface {
	Link
	Seals()
}

// RefLink is an InProcessLink that also takes frames by reference, for
// the first transmission of a packet only; the endpoint writes such a
// frame no more (a resend or Resync works on a copy).
//
// SendRef: the receiver reads the frame in place, once, before anything
// it sends in answer can come back. The endpoint uses it for PushFrame
// packets, whose buffer goes back to the ULP once acknowledged, i.e. once
// the receiver is done with it; after a resend the ULP does not get the
// shared buffer back (Completion.Frame nil).
//
// SendShared: the frame lies in mem, a shared frame buffer, and the link
// takes over one reference to it, which the receiver holds as long as it
// uses the frame — also past its acknowledgement (the NVMe target writes
// from a kept Write Data Response). The endpoint uses it for Pull Data
// (PullDataGather gathers into a shared frame buffer when the link is a
// RefLink) and holds its own reference until the packet is acknowledged.
type RefLink interface {
	InProcessLink
	SendRef(frame []byte, flow uint32)
	SendShared(frame []byte, mem *framebuf.Buf, flow uint32)
}

// Request is a request delivered to the target ULP. Payload is valid only
// during the callback.
type Request struct {
	Kind    tl.Kind
	RSN     wire.RSN
	Payload []byte // Push data, or a Pull Request's ULP headers
	Length  uint32 // Pull: bytes of Pull Data expected
}

// Completion is an initiator completion. Data (Pull Data) is valid only
// during the callback.
type Completion struct {
	Kind    tl.Kind
	RSN     wire.RSN
	Cookie  uint64
	Status  tl.Status
	ULPCode uint8 // the target ULP's code from a CIE/NRE NACK
	Data    []byte
	// Frame is a PushFrame's buffer, back with the ULP (nil: Falcon kept it).
	Frame []byte
}

// ULP is the upper-layer protocol attached to an endpoint. Callbacks run on
// the goroutine driving the endpoint and may call back into the connection
// (respond, submit).
type ULP interface {
	// OnRequest delivers a Push or Pull to the target side. The ULP answers
	// with AckPush/NackPush or PullData/NackPull, now or later.
	OnRequest(c *Conn, r *Request)
	// OnCompletion reports an initiator transaction's end.
	OnCompletion(c *Conn, cpl *Completion)
	// OnXon says c accepts submissions again after ErrXoff.
	OnXon(c *Conn)
}

// Errors returned to the ULP.
var (
	ErrXoff       = errors.New("falcon: connection is flow-controlled (Xoff); wait for OnXon")
	ErrTooLong    = errors.New("falcon: transaction longer than the MTU")
	ErrDead       = errors.New("falcon: connection failed")
	ErrCIDInUse   = errors.New("falcon: source CID already in use")
	ErrBadCID     = errors.New("falcon: CID does not fit 24 bits")
	ErrNoSuchTxn  = errors.New("falcon: no such transaction awaiting a response")
	ErrNoSuchConn = errors.New("falcon: no such connection")
	ErrBadVerdict = errors.New("falcon: verdict not valid here")
	ErrBadFrame   = errors.New("falcon: frame without header room or envelope capacity")
)

// Endpoint is one NIC's Falcon engine: a table of connections keyed by
// local CID, fed by Receive, OnTimer and ULP calls, emitting frames to its
// Link and callbacks to its ULP. It is not safe for concurrent use: one
// goroutine owns it.
type Endpoint struct {
	cfg     Config
	clk     clock.Clock
	conns   map[uint32]*Conn
	list    []*Conn
	res     *tl.Resources
	ctl     []byte // scratch for ACK/NACK frames
	rng     interface{ Uint32() uint32 }
	nXoff   int
	xonNext int // where the next Xon scan starts (round robin)
	// Connections with a pending timer, by deadline (timers.go).
	timers []*Conn
	visit  []*Conn
	nConns uint64
	// at is the clock's reading for the event being handled while atSet
	// (event.go).
	at    time.Duration
	atSet bool
	hot   epCounts // counts not yet published (hot.go)
	// last is the connection the latest frame was for: a run of frames
	// for one connection skips the table lookup.
	last *Conn
	// replayMargin and replayLead are ReplayMargin and ReplayMaxLead in
	// timestamp ticks.
	replayMargin, replayLead uint32
	// stallEnd is when the host last resumed the endpoint after a stall
	// (Resumed), while stalled is set: a delay sample of a packet sent
	// before it measured the stall (delaySample).
	stallEnd time.Duration
	stalled  bool
	// arrived is when the frames being received reached the NIC, if the
	// I/O loop said (Arrived; 0: it did not).
	arrived time.Duration
	Stats   EndpointCounters
}

// New returns an endpoint.
func New(cfg Config) *Endpoint {
	if cfg.Limits == (tl.Limits{}) {
		cfg.Limits = tl.DefaultLimits()
	}
	if cfg.ReplayMargin == 0 {
		cfg.ReplayMargin = time.Second
	}
	if cfg.ReplayMaxLead == 0 {
		cfg.ReplayMaxLead = 10 * time.Second
	}
	rng := cfg.Rand
	if rng == nil {
		rng = &xorshift{s: 0x9e3779b97f4a7c15}
	}
	e := &Endpoint{cfg: cfg, clk: cfg.Clock, conns: make(map[uint32]*Conn), res: tl.NewResources(cfg.Limits),
		ctl: make([]byte, 0, wire.MaxHeaderLen+envelopeLen+16), rng: rng,
		replayMargin: uint32(wire.TimestampAt(cfg.ReplayMargin)), replayLead: uint32(wire.TimestampAt(cfg.ReplayMaxLead))}
	e.initCounts()
	return e
}

type xorshift struct{ s uint64 }

func (x *xorshift) Uint32() uint32 {
	x.s ^= x.s << 13
	x.s ^= x.s >> 7
	x.s ^= x.s << 17
	return uint32(x.s >> 32)
}

// SetLink sets the link (for harnesses that build endpoints first).
func (e *Endpoint) SetLink(l Link) { e.cfg.Link = l }

// SetULP sets the ULP.
func (e *Endpoint) SetULP(u ULP) { e.cfg.ULP = u }

// Resources exposes the NIC's pools (read-only use).
func (e *Endpoint) Resources() *tl.Resources { return e.res }

// RandomPSNs fills a ConnConfig's TX sequence numbers from the endpoint's
// random source (the CM exchanges them with the peer out of band).
func (e *Endpoint) RandomPSNs(c *ConnConfig) {
	c.TxReqPSN = wire.PSN(e.rng.Uint32())
	c.TxDataPSN = wire.PSN(e.rng.Uint32())
	c.TxRSN = wire.RSN(e.rng.Uint32())
}

// Connect installs a connection set up by the connection manager.
func (e *Endpoint) Connect(cc ConnConfig) (*Conn, error) {
	if cc.SCID >= 1<<24 || cc.DCID >= 1<<24 {
		return nil, ErrBadCID
	}
	if _, ok := e.conns[cc.SCID]; ok {
		return nil, ErrCIDInUse
	}
	cc.fill()
	c := newConn(e, cc)
	e.nConns++
	c.order = e.nConns
	e.conns[cc.SCID] = c
	e.list = append(e.list, c)
	return c, nil
}

// Close tears a connection down (CM teardown or a fatal error reported
// out of band): outstanding transactions complete with kCmplDeadConn, its
// resources return, and its CID is free for reuse.
func (e *Endpoint) Close(scid uint32) error {
	c := e.conns[scid]
	if c == nil {
		return ErrNoSuchConn
	}
	now, outer := e.enter()
	defer e.leave(outer)
	c.fail(now)
	e.timerRemove(c)
	delete(e.conns, scid)
	if e.last == c {
		e.last = nil
	}
	for i, x := range e.list {
		if x == c {
			e.list = append(e.list[:i], e.list[i+1:]...)
			break
		}
	}
	if c.xoff {
		e.nXoff--
	}
	return nil
}

// Conn returns the connection with local CID scid.
func (e *Endpoint) Conn(scid uint32) *Conn { return e.conns[scid] }

// Conns returns the connections in setup order.
func (e *Endpoint) Conns() []*Conn { return e.list }

// Now returns the endpoint clock's reading.
func (e *Endpoint) Now() time.Duration { return e.clk.Now() }

// Receive is the receive pipeline for one frame from the link (the frame is
// only read during the call) [S §9.2.2]: integrity, parse, CID lookup,
// replay check, then the connection's window and transaction processing.
func (e *Endpoint) Receive(frame []byte, flow uint32) { e.receive(frame, flow, Mark{}, true) }

// Mark is what the network tells the receiver about one frame: the number
// of switches it crossed and whether one marked it congestion-experienced.
// The connection echoes the latest transaction packet's hop count and its
// count of ECN-marked packets in the CC fields of its ACKs and NACKs
// [S §7.7.1].
type Mark struct {
	Hops uint8
	ECN  bool
}

// ReceiveMarked is Receive for a link that reports the frame's Mark.
func (e *Endpoint) ReceiveMarked(frame []byte, flow uint32, m Mark) { e.receive(frame, flow, m, true) }

// ReceiveInProcess is Receive for a frame from an InProcessLink: the same
// pipeline without the ICV check (such frames carry none).
func (e *Endpoint) ReceiveInProcess(frame []byte, flow uint32) { e.receive(frame, flow, Mark{}, false) }

// ReceiveAuthenticated is ReceiveMarked for a frame whose integrity a
// SealingLink verified (PSP's tag): the same pipeline without the ICV
// check. Build the frame with Envelope from the opened packet and its IV
// timestamp.
func (e *Endpoint) ReceiveAuthenticated(frame []byte, flow uint32, m Mark) {
	e.receive(frame, flow, m, false)
}

func (e *Endpoint) receive(frame []byte, flow uint32, mark Mark, checkICV bool) {
	now, outer := e.enter()
	defer e.leave(outer)
	e.count(hotRxFrames, 1)
	e.count(hotRxBytes, uint64(len(frame)))
	var b []byte
	var iv wire.Timestamp
	var ok bool
	if checkICV {
		b, iv, ok = open(frame)
	} else {
		b, iv, ok = openInProcess(frame)
	}
	if !ok {
		e.Stats.RxBadICV.Inc()
		return
	}
	if e.cfg.Tap != nil {
		e.cfg.Tap(false, b)
	}
	p, err := wire.Parse(b)
	if err != nil {
		e.countParse(err)
		return
	}
	c := e.last
	if cid := p.CID(); c == nil || c.cfg.SCID != cid {
		if c = e.conns[cid]; c != nil {
			e.last = c
		}
	}
	if c == nil {
		e.Stats.RxUnknownCID.Inc()
		if p.Type().Window() != wire.WindowNone {
			e.nackUnknownCID(p.Txn(), flow)
		}
		return
	}
	if c.dead {
		e.Stats.RxDeadConn.Inc()
		return
	}
	c.receive(p, iv, flow, mark, now)
}

// parseDrops maps each wire.Parse error to its drop counter.
var parseDrops = []struct {
	err     error
	counter func(*EndpointCounters) *stats.Counter
}{
	{wire.ErrShort, func(c *EndpointCounters) *stats.Counter { return &c.RxParseShort }},
	{wire.ErrVersion, func(c *EndpointCounters) *stats.Counter { return &c.RxParseVersion }},
	{wire.ErrType, func(c *EndpointCounters) *stats.Counter { return &c.RxParseType }},
	{wire.ErrLength, func(c *EndpointCounters) *stats.Counter { return &c.RxParseLength }},
}

func (e *Endpoint) countParse(err error) {
	for _, d := range parseDrops {
		if errors.Is(err, d.err) {
			d.counter(&e.Stats).Inc()
			return
		}
	}
	e.Stats.RxParseLength.Inc()
}

// nackUnknownCID answers a transaction packet for an unknown CID with an
// invalid-CID NACK (code 8) echoing the CID, PSN and window it named.
func (e *Endpoint) nackUnknownCID(t wire.Txn, flow uint32) {
	if e.cfg.Link == nil {
		return
	}
	w := t.Type().Window()
	if t.Type() == wire.TypeResync {
		w = t.ResyncWindow()
	}
	f := wire.NackFields{CID: t.CID(), NackPSN: t.PSN(), Code: wire.NackInvalidCID,
		RequestWindow: w == wire.WindowRequest, T1: 0, T2: wire.TimestampAt(e.now())}
	n := wire.AppendNACK(e.ctl[:0], &f)
	e.Stats.TxInvalidCIDNack.Inc()
	e.send([]byte(n), flow)
}

// send seals pkt and hands it to the connection's link.
func (c *Conn) send(pkt []byte, flow uint32) { c.ep.sendOn(c.link(), pkt, flow, false, nil) }

// link is the connection's link towards its peer.
func (c *Conn) link() Link {
	if c.cfg.Peer != nil {
		return c.cfg.Peer
	}
	return c.ep.cfg.Link
}

// send seals pkt and hands it to the endpoint's link.
func (e *Endpoint) send(pkt []byte, flow uint32) { e.sendOn(e.cfg.Link, pkt, flow, false, nil) }

// sendOn seals pkt and hands it to l; by reference (l is then a RefLink)
// when ref, with a reference to mem if pkt lies in that shared buffer.
func (e *Endpoint) sendOn(l Link, pkt []byte, flow uint32, ref bool, mem *framebuf.Buf) {
	if e.cfg.Tap != nil {
		e.cfg.Tap(true, pkt)
	}
	var frame []byte
	switch l.(type) {
	case InProcessLink, SealingLink:
		frame = sealInProcess(pkt, wire.TimestampAt(e.now()))
	default:
		frame = seal(pkt, wire.TimestampAt(e.now()))
	}
	e.count(hotTxFrames, 1)
	e.count(hotTxBytes, uint64(len(frame)))
	switch {
	case ref && mem != nil:
		mem.Hold()
		l.(RefLink).SendShared(frame, mem, flow)
	case ref:
		l.(RefLink).SendRef(frame, flow)
	case l != nil:
		l.Send(frame, flow)
	}
}
