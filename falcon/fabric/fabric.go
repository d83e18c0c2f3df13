package fabric

import (
	"falconnic/internal/heapq"
	"math"
	"math/rand/v2"
	"time"

	"falconnic/internal/clock"
)

// Config describes a leaf–spine fabric. Zero fields take the defaults noted.
type Config struct {
	// Racks is the number of racks, one leaf switch each (default 1).
	Racks int `json:"racks"`
	// HostsPerRack is the number of hosts under each leaf (default 1).
	HostsPerRack int `json:"hosts_per_rack"`
	// Spines is the number of spine switches every leaf connects to
	// (default 1; unused when Racks is 1).
	Spines int `json:"spines"`
	// HostRate is the rate of every host–leaf link in bits per second
	// (default 100 Gb/s).
	HostRate uint64 `json:"host_rate_bps"`
	// SpineRate is the rate of every leaf–spine link (default HostRate).
	SpineRate uint64 `json:"spine_rate_bps"`
	// HostDelay and SpineDelay are the propagation delays of a host–leaf
	// and a leaf–spine link.
	HostDelay  time.Duration `json:"host_delay_ns"`
	SpineDelay time.Duration `json:"spine_delay_ns"`
	// Pipeline is the delay a packet spends in a switch between its
	// arrival and joining the egress queue (Isekai: 600 ns).
	Pipeline time.Duration `json:"pipeline_ns"`
	// HostQueueBytes caps a host NIC's egress queue (0: unlimited; a NIC
	// does not drop what its own transport sends).
	HostQueueBytes int `json:"host_queue_bytes"`
	// PortBytes caps each switch egress queue (0: unlimited).
	PortBytes int `json:"port_bytes"`
	// PoolBytes is each switch's shared buffer (0: unlimited). A queue
	// may hold at most Alpha × (PoolBytes − used) bytes (dynamic
	// threshold) when Alpha > 0.
	PoolBytes int     `json:"pool_bytes"`
	Alpha     float64 `json:"alpha"`
	// ECNBytes marks a packet that joins a switch queue holding at least
	// this many bytes (step marking; 0: off).
	ECNBytes int `json:"ecn_bytes"`
	// Convergence is how long a withdrawn link stays in ECMP before the
	// routing removes it, and a restored one stays out (default 1 ms).
	Convergence time.Duration `json:"convergence_ns"`
	// SampleEvery is the period of the queue-depth and utilization series
	// of watched links (0: no series).
	SampleEvery time.Duration `json:"sample_every_ns"`
	// Seed seeds the ECMP salts, per-link loss and background arrivals.
	Seed uint64 `json:"seed"`
	// Priority, when set, picks the packets a host NIC serves ahead of
	// those in its egress queue: they wait only for the packet on the
	// wire. Falcon's ACKs and NACKs, as Isekai's NIC arbiter weighs
	// ack/nack 2 against 1 for connection traffic (switches keep one
	// queue).
	Priority func(pkt []byte) bool `json:"-"`
}

// Meta is what the fabric tells a receiver about a delivered packet.
type Meta struct {
	Src  int   // sending host
	Hops uint8 // switches crossed
	ECN  bool  // marked congestion-experienced on the way
}

// Receiver consumes a delivered packet; pkt is valid only during the call.
type Receiver func(pkt []byte, flow uint32, m Meta)

// Mode is how a failed link behaves.
type Mode uint8

// Failure modes.
const (
	// Blackhole: the link drops everything and ECMP keeps hashing onto it.
	Blackhole Mode = iota
	// Withdrawn: the link drops everything; after Config.Convergence the
	// routing takes it out of ECMP.
	Withdrawn
)

func (m Mode) String() string {
	if m == Withdrawn {
		return "withdrawn"
	}
	return "blackhole"
}

// Kind is the role of a link.
type Kind uint8

// Link kinds.
const (
	HostUp    Kind = iota // host NIC → leaf
	HostDown              // leaf → host
	LeafSpine             // leaf → spine
	SpineLeaf             // spine → leaf
)

var kindNames = [...]string{"host_up", "host_down", "leaf_spine", "spine_leaf"}

func (k Kind) String() string { return kindNames[k] }

// Fabric is an event-driven leaf–spine network on a manual clock: hosts
// send packets into their NIC's egress queue, leaves and spines forward
// them by destination and ECMP, and Poll runs every event due at the
// clock's current time. It is not safe for concurrent use: one goroutine
// drives it (Send, Poll, At) and its receivers run on that goroutine.
// Packets live in recycled slots; steady-state operation does not allocate.
type Fabric struct {
	clk   clock.Clock
	cfg   Config
	hosts int
	rng   *rand.Rand
	salt  []uint64 // per leaf: the ECMP stage's salt
	links []link
	used  []int // per switch: shared-pool bytes in use
	// usable[srcLeaf*Racks+dstLeaf] lists the spines ECMP may pick.
	usable    [][]int16
	withdrawn []bool // per leaf*Spines+spine
	rx        []Receiver
	slots     []slot
	free      []int32
	ev        heapq.Queue[event, *event] // by (time, schedule order)
	seq       uint64
	calls     []func()
	bg        []bgGen
	watched   []int
	sampling  bool

	// Stats counts packets and drops by cause, fabric-wide.
	Stats Stats
	// Events counts the packet events run (arrivals and departures).
	Events uint64
}

type link struct {
	kind     Kind
	owner    int // switch index (leaves then spines), -1 for a host NIC
	from, to int // leaf/spine/host index, by kind
	rate     uint64
	delay    time.Duration
	busyPs   int64 // picoseconds: when the link finishes what it has
	// wirePs holds the serialization ends of the packets queued in
	// order on a host NIC link (with Config.Priority): the first one
	// after now is on the wire.
	wirePs  []int64
	backlog int
	down    bool
	loss    float64
	m       LinkMetrics
	lastTx  uint64 // TxBytes at the last sample
}

type slot struct {
	buf      []byte
	size     int
	flow     uint32
	src, dst int32
	link     int32 // the link whose queue the packet is in or goes to
	hops     uint8
	ecn      bool
	bg       bool
	sink     bool // background on one link: gone after it
}

// New returns a fabric reading time from clk.
func New(clk clock.Clock, cfg Config) *Fabric {
	cfg.Racks = max(cfg.Racks, 1)
	cfg.HostsPerRack = max(cfg.HostsPerRack, 1)
	cfg.Spines = max(cfg.Spines, 1)
	if cfg.HostRate == 0 {
		cfg.HostRate = 100e9
	}
	if cfg.SpineRate == 0 {
		cfg.SpineRate = cfg.HostRate
	}
	if cfg.Convergence == 0 {
		cfg.Convergence = time.Millisecond
	}
	R, H, P := cfg.Racks, cfg.HostsPerRack, cfg.Spines
	n := R * H
	f := &Fabric{
		clk:       clk,
		cfg:       cfg,
		hosts:     n,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		salt:      make([]uint64, R),
		links:     make([]link, 2*n+2*R*P),
		used:      make([]int, R+P),
		usable:    make([][]int16, R*R),
		withdrawn: make([]bool, R*P),
		rx:        make([]Receiver, n),
	}
	for l := range f.salt {
		f.salt[l] = f.rng.Uint64()
	}
	for h := 0; h < n; h++ {
		f.links[f.Up(h)] = link{kind: HostUp, owner: -1, from: h, to: h / H, rate: cfg.HostRate, delay: cfg.HostDelay}
		f.links[f.Down(h)] = link{kind: HostDown, owner: h / H, from: h / H, to: h, rate: cfg.HostRate, delay: cfg.HostDelay}
	}
	for l := 0; l < R; l++ {
		for s := 0; s < P; s++ {
			up, down := f.SpineLinks(l, s)
			f.links[up] = link{kind: LeafSpine, owner: l, from: l, to: s, rate: cfg.SpineRate, delay: cfg.SpineDelay}
			f.links[down] = link{kind: SpineLeaf, owner: R + s, from: s, to: l, rate: cfg.SpineRate, delay: cfg.SpineDelay}
		}
	}
	f.route()
	return f
}

// Hosts returns the number of hosts; host h sits in rack h / HostsPerRack.
func (f *Fabric) Hosts() int { return f.hosts }

// Config returns the fabric's configuration with defaults filled in.
func (f *Fabric) Config() Config { return f.cfg }

// Up returns the link from host h's NIC to its leaf.
func (f *Fabric) Up(h int) int { return h }

// Down returns the link from host h's leaf to h.
func (f *Fabric) Down(h int) int { return f.hosts + h }

// SpineLinks returns the two directions of the link between leaf (rack)
// l and spine s: leaf → spine and spine → leaf.
func (f *Fabric) SpineLinks(l, s int) (up, down int) {
	base := 2 * f.hosts
	RP := f.cfg.Racks * f.cfg.Spines
	i := l*f.cfg.Spines + s
	return base + i, base + RP + i
}

// Links returns the number of links (directed).
func (f *Fabric) Links() int { return len(f.links) }

// LinkName describes link i ("host_down 3", "leaf_spine 0-1").
func (f *Fabric) LinkName(i int) string {
	l := &f.links[i]
	switch l.kind {
	case HostUp:
		return "host_up " + itoa(l.from)
	case HostDown:
		return "host_down " + itoa(l.to)
	default:
		return l.kind.String() + " " + itoa(l.from) + "-" + itoa(l.to)
	}
}

func itoa(v int) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; v > 0; v /= 10 {
		i--
		b[i] = byte('0' + v%10)
	}
	return string(b[i:])
}

// Attach sets the receiver of packets delivered to host h.
func (f *Fabric) Attach(h int, rx Receiver) {
	if h >= 0 && h < f.hosts {
		f.rx[h] = rx
	}
}

// route recomputes, for every pair of leaves, the spines ECMP may pick:
// those whose links to both leaves are not withdrawn.
func (f *Fabric) route() {
	R, P := f.cfg.Racks, f.cfg.Spines
	for a := 0; a < R; a++ {
		for b := 0; b < R; b++ {
			u := f.usable[a*R+b][:0]
			for s := 0; s < P; s++ {
				if !f.withdrawn[a*P+s] && !f.withdrawn[b*P+s] {
					u = append(u, int16(s))
				}
			}
			f.usable[a*R+b] = u
		}
	}
}

// SpineOf returns the spine ECMP picks for a packet from host src to host
// dst on flow label flow, or -1 when the hosts share a rack or no spine is
// routable. The leaf hashes (src, dst, flow) with its own salt, so every
// stage hashes differently and a new flow label moves a flow.
func (f *Fabric) SpineOf(src, dst int, flow uint32) int {
	H := f.cfg.HostsPerRack
	a, b := src/H, dst/H
	if a == b {
		return -1
	}
	u := f.usable[a*f.cfg.Racks+b]
	if len(u) == 0 {
		return -1
	}
	h := f.salt[a] ^ uint64(uint32(src))<<40 ^ uint64(uint32(dst))<<20 ^ uint64(flow)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return int(u[h%uint64(len(u))])
}

// Path returns the links a packet from src to dst on flow crosses now, in
// order (nil when unroutable).
func (f *Fabric) Path(src, dst int, flow uint32) []int {
	H := f.cfg.HostsPerRack
	if src/H == dst/H {
		return []int{f.Up(src), f.Down(dst)}
	}
	s := f.SpineOf(src, dst, flow)
	if s < 0 {
		return nil
	}
	up, _ := f.SpineLinks(src/H, s)
	_, down := f.SpineLinks(dst/H, s)
	return []int{f.Up(src), up, down, f.Down(dst)}
}

// Port is the falcon.Link a host uses to reach one other host.
type Port struct {
	f        *Fabric
	src, dst int
}

// Port returns the link from host src to host dst.
func (f *Fabric) Port(src, dst int) *Port { return &Port{f: f, src: src, dst: dst} }

// Send injects a copy of pkt into src's NIC egress queue.
func (p *Port) Send(pkt []byte, flow uint32) { p.f.Send(p.src, p.dst, pkt, flow) }

// Send injects a copy of pkt from host src to host dst on flow label flow.
func (f *Fabric) Send(src, dst int, pkt []byte, flow uint32) {
	f.Stats.Sent.Inc()
	if src < 0 || src >= f.hosts || dst < 0 || dst >= f.hosts {
		f.Stats.DropNoHost.Inc()
		return
	}
	i := f.alloc()
	s := &f.slots[i]
	s.buf = append(s.buf[:0], pkt...)
	s.size = len(pkt)
	s.flow, s.src, s.dst = flow, int32(src), int32(dst)
	s.link = int32(f.Up(src))
	f.push(f.clk.Now(), evArrive, i)
}

func (f *Fabric) alloc() int32 {
	var i int32
	if n := len(f.free); n > 0 {
		i = f.free[n-1]
		f.free = f.free[:n-1]
	} else {
		f.slots = append(f.slots, slot{})
		i = int32(len(f.slots) - 1)
	}
	s := &f.slots[i]
	s.hops, s.ecn, s.bg, s.sink = 0, false, false, false
	return i
}

func (f *Fabric) release(i int32) { f.free = append(f.free, i) }

// NextDue returns when the next event is due (Poll then has work).
func (f *Fabric) NextDue() (clock.Time, bool) {
	if f.ev.Len() == 0 {
		return 0, false
	}
	return f.ev.Top().at, true
}

// Pending returns the number of scheduled events (packets in flight,
// timed calls, background generators, sampling).
func (f *Fabric) Pending() int { return f.ev.Len() }

// Poll runs every event due at or before the clock's current time in
// (time, schedule) order and returns the number of packets delivered to
// receivers. Receivers may Send; a packet sent now is run in this Poll.
func (f *Fabric) Poll() int {
	now := f.clk.Now()
	n := 0
	for f.ev.Len() > 0 && f.ev.Top().at <= now {
		e := f.ev.Pop()
		switch e.kind {
		case evArrive:
			f.Events++
			if f.arrive(e.at, e.idx) {
				n++
			}
		case evDepart:
			f.Events++
			f.depart(e.at, e.idx)
		case evCall:
			fn := f.calls[e.idx]
			f.calls[e.idx] = nil
			fn()
		case evBackground:
			f.background(e.at, e.idx)
		case evSample:
			f.sample(e.at)
		}
	}
	return n
}

// arrive puts slot i into the egress queue of its link at time t, or
// delivers it when it has reached its host. It reports a delivery.
func (f *Fabric) arrive(t clock.Time, i int32) bool {
	s := &f.slots[i]
	if s.link < 0 {
		f.deliver(i)
		return !f.slots[i].bg
	}
	l := &f.links[s.link]
	if l.down {
		f.drop(l, i, DropLinkDown)
		return false
	}
	if l.loss > 0 && f.rng.Float64() < l.loss {
		f.drop(l, i, DropLoss)
		return false
	}
	if l.owner < 0 {
		if c := f.cfg.HostQueueBytes; c > 0 && l.backlog+s.size > c {
			f.drop(l, i, DropHostQueue)
			return false
		}
	} else {
		if c := f.cfg.PortBytes; c > 0 && l.backlog+s.size > c {
			f.drop(l, i, DropPortCap)
			return false
		}
		if pool := f.cfg.PoolBytes; pool > 0 {
			used := f.used[l.owner]
			if used+s.size > pool {
				f.drop(l, i, DropPoolFull)
				return false
			}
			if a := f.cfg.Alpha; a > 0 && float64(l.backlog+s.size) > a*float64(pool-used) {
				f.drop(l, i, DropThreshold)
				return false
			}
		}
		if k := f.cfg.ECNBytes; k > 0 && l.backlog >= k && !s.ecn {
			s.ecn = true
			l.m.ECNMarked++
			f.Stats.ECNMarked.Inc()
		}
		f.used[l.owner] += s.size
	}
	// Serialization is kept in picoseconds so that rates which do not
	// divide a packet's bits into whole nanoseconds keep their long-run rate.
	serPs := int64(uint64(s.size) * 8 * 1e12 / l.rate)
	var startPs, endPs int64
	if prio := l.owner < 0 && f.cfg.Priority != nil; prio {
		n := 0
		for n < len(l.wirePs) && l.wirePs[n] <= int64(t)*1000 {
			n++
		}
		l.wirePs = l.wirePs[:copy(l.wirePs, l.wirePs[n:])]
		if len(l.wirePs) > 0 && !s.bg && f.cfg.Priority(s.buf) {
			// Ahead of the NIC's queue, behind the packet on the wire;
			// the queue's later packets leave serPs later.
			startPs = l.wirePs[0]
			endPs = startPs + serPs
			l.busyPs += serPs
		} else {
			startPs = max(int64(t)*1000, l.busyPs)
			l.busyPs = startPs + serPs
			endPs = l.busyPs
			l.wirePs = append(l.wirePs, endPs)
		}
	} else {
		startPs = max(int64(t)*1000, l.busyPs)
		l.busyPs = startPs + serPs
		endPs = l.busyPs
	}
	start := time.Duration((startPs + 999) / 1000)
	finish := time.Duration((endPs + 999) / 1000)
	l.backlog += s.size
	l.m.MaxQueueBytes = max(l.m.MaxQueueBytes, l.backlog)
	l.m.QueueDelay.add(start - t)
	f.push(finish, evDepart, i)
	return false
}

// depart finishes slot i's serialization on its link at time t: its
// buffer is released and it heads for the next hop.
func (f *Fabric) depart(t clock.Time, i int32) {
	s := &f.slots[i]
	l := &f.links[s.link]
	l.backlog -= s.size
	if l.owner >= 0 {
		f.used[l.owner] -= s.size
	}
	if l.down {
		f.drop(l, i, DropLinkDown)
		return
	}
	l.m.TxPackets++
	l.m.TxBytes += uint64(s.size)
	if s.sink {
		f.Stats.BackgroundDelivered.Inc()
		f.release(i)
		return
	}
	at := t + l.delay
	next := int32(-1)
	H := f.cfg.HostsPerRack
	switch l.kind {
	case HostUp:
		at += f.cfg.Pipeline
		s.hops++
		if int(s.src)/H == int(s.dst)/H {
			next = int32(f.Down(int(s.dst)))
		} else if sp := f.SpineOf(int(s.src), int(s.dst), s.flow); sp >= 0 {
			up, _ := f.SpineLinks(int(s.src)/H, sp)
			next = int32(up)
		} else {
			f.drop(l, i, DropNoRoute)
			return
		}
	case LeafSpine:
		at += f.cfg.Pipeline
		s.hops++
		_, down := f.SpineLinks(int(s.dst)/H, l.to)
		next = int32(down)
	case SpineLeaf:
		at += f.cfg.Pipeline
		s.hops++
		next = int32(f.Down(int(s.dst)))
	}
	s.link = next
	f.push(at, evArrive, i)
}

func (f *Fabric) deliver(i int32) {
	s := &f.slots[i]
	if s.bg {
		f.Stats.BackgroundDelivered.Inc()
		f.release(i)
		return
	}
	rx := f.rx[s.dst]
	if rx == nil {
		f.Stats.DropNoReceiver.Inc()
		f.release(i)
		return
	}
	f.Stats.Delivered.Inc()
	if s.ecn {
		f.Stats.DeliveredECN.Inc()
	}
	// The receiver may Send, which may grow f.slots: read s first and
	// release after.
	buf, flow, m := s.buf, s.flow, Meta{Src: int(s.src), Hops: s.hops, ECN: s.ecn}
	rx(buf, flow, m)
	f.release(i)
}

func (f *Fabric) drop(l *link, i int32, c Cause) {
	l.m.Drops[c]++
	f.Stats.drop(c)
	if f.slots[i].bg {
		f.Stats.BackgroundDropped.Inc()
	}
	f.release(i)
}

// At runs fn at simulated time t (now, if t has passed) from Poll, in
// order with the packet events of that instant.
func (f *Fabric) At(t clock.Time, fn func()) {
	idx := -1
	for j, c := range f.calls {
		if c == nil {
			idx = j
			break
		}
	}
	if idx < 0 {
		f.calls = append(f.calls, fn)
		idx = len(f.calls) - 1
	} else {
		f.calls[idx] = fn
	}
	f.push(max(t, f.clk.Now()), evCall, int32(idx))
}

// SetDown takes link i down or up now. A down link drops every packet that
// reaches it or is still in its queue.
func (f *Fabric) SetDown(i int, down bool) { f.links[i].down = down }

// SetRate changes link i's rate now (rate degradation); packets already
// queued keep their departure times.
func (f *Fabric) SetRate(i int, bitsPerSec uint64) {
	if bitsPerSec > 0 {
		f.links[i].rate = bitsPerSec
	}
}

// SetDelay sets link i's propagation delay now (a long or slow path);
// packets already past the link keep their arrival times.
func (f *Fabric) SetDelay(i int, d time.Duration) { f.links[i].delay = max(d, 0) }

// SetLoss makes link i drop each arriving packet with probability p.
func (f *Fabric) SetLoss(i int, p float64) { f.links[i].loss = p }

// Fail takes both directions of the leaf–spine link (leaf, spine) down at
// time t. Withdrawn mode also takes the spine out of ECMP for that leaf
// after the convergence delay.
func (f *Fabric) Fail(t clock.Time, leaf, spine int, mode Mode) {
	up, down := f.SpineLinks(leaf, spine)
	f.At(t, func() {
		f.SetDown(up, true)
		f.SetDown(down, true)
		f.Stats.LinkFailures.Inc()
	})
	if mode == Withdrawn {
		f.At(t+f.cfg.Convergence, func() {
			if f.links[up].down {
				f.withdrawn[leaf*f.cfg.Spines+spine] = true
				f.route()
			}
		})
	}
}

// Restore brings both directions of the leaf–spine link back at time t;
// a withdrawn link rejoins ECMP after the convergence delay.
func (f *Fabric) Restore(t clock.Time, leaf, spine int) {
	up, down := f.SpineLinks(leaf, spine)
	f.At(t, func() {
		f.SetDown(up, false)
		f.SetDown(down, false)
	})
	f.At(t+f.cfg.Convergence, func() {
		if !f.links[up].down && f.withdrawn[leaf*f.cfg.Spines+spine] {
			f.withdrawn[leaf*f.cfg.Spines+spine] = false
			f.route()
		}
	})
}

// Flap fails the leaf–spine link at start for downFor, restores it for
// upFor, and repeats n times.
func (f *Fabric) Flap(start clock.Time, leaf, spine int, mode Mode, downFor, upFor time.Duration, n int) {
	t := start
	for k := 0; k < n; k++ {
		f.Fail(t, leaf, spine, mode)
		f.Restore(t+downFor, leaf, spine)
		t += downFor + upFor
	}
}

// Withdrawn reports whether ECMP has taken the leaf–spine link out.
func (f *Fabric) Withdrawn(leaf, spine int) bool { return f.withdrawn[leaf*f.cfg.Spines+spine] }

// Degrade sets link i's rate to bitsPerSec at time t.
func (f *Fabric) Degrade(t clock.Time, i int, bitsPerSec uint64) {
	f.At(t, func() { f.SetRate(i, bitsPerSec) })
}

// LossAt sets link i's random loss to p at time t.
func (f *Fabric) LossAt(t clock.Time, i int, p float64) {
	f.At(t, func() { f.SetLoss(i, p) })
}

// Background is open-loop non-Falcon traffic: packets of Size bytes from
// host Src to host Dst (or, with Link ≥ 0, into that one link's queue and
// gone after it) at Load × the first link's rate, from Start to Stop.
type Background struct {
	Src, Dst    int
	Link        int // -1 (default via NewBackground): host to host
	Load        float64
	Size        int    // bytes per packet (default 4096)
	Flow        uint32 // flow label (host-to-host traffic hashes on it)
	Poisson     bool   // exponential gaps; else constant
	Start, Stop clock.Time
}

type bgGen struct {
	b   Background
	gap float64 // mean gap in ns
}

// AddBackground starts a background generator.
func (f *Fabric) AddBackground(b Background) {
	if b.Size <= 0 {
		b.Size = 4096
	}
	if b.Load <= 0 {
		return
	}
	first := f.Up(b.Src)
	if b.Link >= 0 {
		first = b.Link
	}
	rate := float64(f.links[first].rate)
	gap := float64(b.Size) * 8 / (b.Load * rate) * 1e9
	f.bg = append(f.bg, bgGen{b: b, gap: gap})
	f.push(max(b.Start, f.clk.Now()), evBackground, int32(len(f.bg)-1))
}

func (f *Fabric) background(t clock.Time, g int32) {
	gen := &f.bg[g]
	b := &gen.b
	if b.Stop > 0 && t >= b.Stop {
		return
	}
	i := f.alloc()
	s := &f.slots[i]
	s.buf = s.buf[:0]
	s.size = b.Size
	s.flow, s.src, s.dst = b.Flow, int32(b.Src), int32(b.Dst)
	s.bg = true
	if b.Link >= 0 {
		s.link = int32(b.Link)
		s.sink = true
	} else {
		s.link = int32(f.Up(b.Src))
	}
	f.Stats.BackgroundSent.Inc()
	f.arrive(t, i)
	gap := gen.gap
	if b.Poisson {
		gap = f.rng.ExpFloat64() * gen.gap
	}
	f.push(t+time.Duration(math.Max(1, gap)), evBackground, g)
}

func (f *Fabric) push(at clock.Time, k evKind, idx int32) {
	f.seq++
	f.ev.Push(event{at: at, seq: f.seq, kind: k, idx: idx})
}
