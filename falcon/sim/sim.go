package sim

import (
	"errors"
	"falconnic/internal/heapq"
	"math/rand/v2"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/fabric"
	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// Config configures a Sim.
type Config struct {
	Fabric fabric.Config
	// Conn is the template of every connection (CIDs, peer links and flow
	// labels are filled in by Connect).
	Conn falcon.ConnConfig
	// RUE returns host h's congestion-control engine (nil: every window
	// stays at its initial value).
	RUE    func(h int) rue.Engine
	Limits tl.Limits
	// Seed seeds the op generators (the fabric has its own).
	Seed uint64
	// Tap, when set, sees every Falcon packet host h sends (tx) or
	// accepts (falcon.Config.Tap).
	Tap func(h int, tx bool, pkt []byte)
}

// Sim is many Falcon endpoints, one per fabric host, on one manual clock.
// It advances time to the next due event (fabric, endpoint deadline or
// generator) and drives operations from completions and Xon callbacks,
// never by polling connections. One goroutine runs it.
type Sim struct {
	Clock  *clock.Manual
	Fabric *fabric.Fabric
	Hosts  []*Host
	QPs    []*QP
	cfg    Config
	rng    *rand.Rand
	ev     heapq.Queue[simEvent, *simEvent]
	seq    uint64
	zero   []byte
	// Steps counts the distinct instants the loop visited.
	Steps uint64
}

// Host is one fabric host's NIC: an endpoint and its ULP.
type Host struct {
	Index   int
	EP      *falcon.Endpoint
	sim     *Sim
	bySCID  []*QP // initiator QPs by local CID
	nextCID uint32
	// Drain, when nonzero, is the rate (bits/s) at which the host's ULP
	// consumes pushed data: each push is acknowledged when the drain has
	// taken its bytes (host congestion). 0 acknowledges at once.
	Drain     uint64
	drainBusy time.Duration
	drainQ    []drainItem
	drainHead int
	// Drained counts push bytes the ULP consumed.
	Drained uint64
}

type drainItem struct {
	c   *falcon.Conn
	rsn wire.RSN
}

// New builds a Sim: a fabric and one endpoint per host.
func New(cfg Config) *Sim {
	clk := clock.NewManual(time.Millisecond)
	s := &Sim{Clock: clk, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0xda3e39cb94b95bdb))}
	s.Fabric = fabric.New(clk, cfg.Fabric)
	for h := 0; h < s.Fabric.Hosts(); h++ {
		host := &Host{Index: h, sim: s, nextCID: 1}
		var eng rue.Engine
		if cfg.RUE != nil {
			eng = cfg.RUE(h)
		}
		var tap func(bool, []byte)
		if cfg.Tap != nil {
			tap = func(tx bool, pkt []byte) { cfg.Tap(h, tx, pkt) }
		}
		host.EP = falcon.New(falcon.Config{Clock: clk, Link: discard{}, ULP: host, RUE: eng, Limits: cfg.Limits,
			Rand: rand.New(rand.NewPCG(uint64(h)+1, cfg.Seed)), Tap: tap})
		ep := host.EP
		s.Fabric.Attach(h, func(pkt []byte, flow uint32, m fabric.Meta) {
			ep.ReceiveMarked(pkt, flow, falcon.Mark{Hops: m.Hops, ECN: m.ECN})
		})
		s.Hosts = append(s.Hosts, host)
	}
	return s
}

// Now returns the simulated time.
func (s *Sim) Now() time.Duration { return s.Clock.Now() }

// Connect sets up a connection from host src (the initiator, a QP) to host
// dst with the template's settings and flows paths; each connection gets
// its own flow labels (low two bits: the flow id), so ECMP spreads them.
func (s *Sim) Connect(src, dst, flows int) (*QP, error) {
	if src == dst || src < 0 || dst < 0 || src >= len(s.Hosts) || dst >= len(s.Hosts) {
		return nil, errors.New("sim: bad host pair")
	}
	a, b := s.Hosts[src], s.Hosts[dst]
	cc := s.cfg.Conn
	cc.SCID, cc.DCID = a.nextCID, b.nextCID
	a.nextCID++
	b.nextCID++
	cc.Flows = flows
	id := len(s.QPs)
	for f := range cc.FlowLabels {
		cc.FlowLabels[f] = uint32(id)<<2 | uint32(f)
	}
	a.EP.RandomPSNs(&cc)
	cc.Peer = s.Fabric.Port(src, dst)
	ca, err := a.EP.Connect(cc)
	if err != nil {
		return nil, err
	}
	m := falcon.Mirror(cc)
	m.Peer = s.Fabric.Port(dst, src)
	cb, err := b.EP.Connect(m)
	if err != nil {
		return nil, err
	}
	qp := &QP{ID: id, Src: src, Dst: dst, Conn: ca, Peer: cb, sim: s, mtu: cc.MTU}
	for int(cc.SCID) >= len(a.bySCID) {
		a.bySCID = append(a.bySCID, nil)
	}
	a.bySCID[cc.SCID] = qp
	s.QPs = append(s.QPs, qp)
	return qp, nil
}

// OnRequest is the target ULP: pushes are acknowledged (after the drain,
// if any), pulls answered with zeros.
func (h *Host) OnRequest(c *falcon.Conn, r *falcon.Request) {
	switch r.Kind {
	case tl.Push:
		h.Drained += uint64(len(r.Payload))
		if h.Drain == 0 && len(h.drainQ) == h.drainHead {
			c.AckPush(r.RSN)
			return
		}
		// Behind earlier pushes still draining (acknowledged in order).
		now := h.sim.Now()
		h.drainBusy = max(h.drainBusy, now)
		if h.Drain > 0 {
			h.drainBusy += time.Duration(uint64(len(r.Payload)) * 8 * uint64(time.Second) / h.Drain)
		}
		h.drainQ = append(h.drainQ, drainItem{c, r.RSN})
		h.sim.push(h.drainBusy, evDrain, int32(h.Index))
	case tl.Pull:
		s := h.sim
		if int(r.Length) > len(s.zero) {
			s.zero = make([]byte, r.Length)
		}
		c.PullData(r.RSN, s.zero[:r.Length])
	}
}

func (h *Host) drain() {
	d := h.drainQ[h.drainHead]
	h.drainQ[h.drainHead] = drainItem{}
	h.drainHead++
	if h.drainHead == len(h.drainQ) {
		h.drainQ, h.drainHead = h.drainQ[:0], 0
	}
	d.c.AckPush(d.rsn)
}

// OnCompletion passes an initiator completion to its QP.
func (h *Host) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	if qp := h.qp(c); qp != nil {
		qp.complete(cpl)
	}
}

// OnXon resumes a flow-controlled QP.
func (h *Host) OnXon(c *falcon.Conn) {
	if qp := h.qp(c); qp != nil {
		qp.pump()
	}
}

func (h *Host) qp(c *falcon.Conn) *QP {
	id := c.SCID()
	if int(id) < len(h.bySCID) {
		return h.bySCID[id]
	}
	return nil
}

// At runs fn at simulated time t.
func (s *Sim) At(t time.Duration, fn func()) { s.Fabric.At(t, fn) }

// Run advances the simulation to time until (or until nothing is
// pending).
func (s *Sim) Run(until time.Duration) { s.RunUntil(nil, until) }

// RunUntil advances the simulation until done reports true (checked after
// every instant), nothing is pending, or the clock passes until. It
// reports done() (true when done is nil and until was reached).
func (s *Sim) RunUntil(done func() bool, until time.Duration) bool {
	for {
		now := s.Clock.Now()
		s.instant(now)
		s.Steps++
		if done != nil && done() {
			return true
		}
		next, ok := s.next()
		if !ok || next > until {
			if next > until || !ok {
				s.Clock.Set(max(until, now))
			}
			return done == nil || done()
		}
		if next <= now {
			next = now + 1 // a deadline OnTimer did not clear: move on
		}
		s.Clock.Set(next)
	}
}

// instant runs everything due at now until nothing more is.
func (s *Sim) instant(now time.Duration) {
	for round := 0; round < 64; round++ {
		for s.ev.Len() > 0 && s.ev.Top().at <= now {
			e := s.ev.Pop()
			switch e.kind {
			case evArrival:
				s.QPs[e.idx].arrival(now)
			case evDrain:
				s.Hosts[e.idx].drain()
			}
		}
		s.Fabric.Poll()
		for _, h := range s.Hosts {
			if d, ok := h.EP.NextDeadline(); ok && d <= now {
				h.EP.OnTimer(now)
			}
		}
		if t, ok := s.Fabric.NextDue(); ok && t <= now {
			continue
		}
		if s.ev.Len() > 0 && s.ev.Top().at <= now {
			continue
		}
		return
	}
}

func (s *Sim) next() (time.Duration, bool) {
	next, ok := s.Fabric.NextDue()
	consider := func(t time.Duration, has bool) {
		if has && (!ok || t < next) {
			next, ok = t, true
		}
	}
	if s.ev.Len() > 0 {
		consider(s.ev.Top().at, true)
	}
	for _, h := range s.Hosts {
		consider(h.EP.NextDeadline())
	}
	return next, ok
}

// discard is an endpoint's default link: every connection has its own
// peer link, so only answers to unknown CIDs would go here.
type discard struct{}

func (discard) Send([]byte, uint32) {}

// events of the harness itself (the fabric keeps its own)

type simKind uint8

const (
	evArrival simKind = iota // an open-loop op arrives at a QP
	evDrain                  // a host's ULP finished draining a push
)

type simEvent struct {
	at   time.Duration
	seq  uint64
	idx  int32
	kind simKind
}

func (s *Sim) push(at time.Duration, k simKind, idx int32) {
	s.seq++
	s.ev.Push(simEvent{at: at, seq: s.seq, kind: k, idx: idx})
}

// Before orders events by (time, schedule order) in the simulator's queue.
func (a *simEvent) Before(b *simEvent) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}
