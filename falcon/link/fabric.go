package link

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// FabricConfig describes an emulated two-tier fabric: every host has an
// access link to the fabric (an uplink egress queue and a downlink egress
// queue), and between the uplinks and the downlinks there are Paths parallel
// core paths, each with its own egress queue. A packet from host s to host d
// on flow f crosses s's uplink, the core path ECMP picks by hashing (s, d,
// f), and d's downlink. Many senders to one host (incast) queue at that
// host's downlink; changing a flow label (PLB) moves a flow to another path.
type FabricConfig struct {
	// Hosts is the number of attached hosts (at least 1).
	Hosts int
	// Paths is the number of parallel core paths (default 1).
	Paths int
	// HostRateBitsPerSec is the rate of every uplink and downlink;
	// 0 means infinite.
	HostRateBitsPerSec uint64
	// PathRateBitsPerSec is the rate of every core path; 0 means infinite.
	PathRateBitsPerSec uint64
	// HostDelay is the propagation delay of each access link (paid on the
	// uplink and again on the downlink).
	HostDelay time.Duration
	// PathDelay is the propagation delay of each core path.
	PathDelay time.Duration
	// QueueBytes caps the bytes waiting in (or being serialized by) each
	// egress queue; an arrival beyond it is tail-dropped. 0 means unlimited.
	QueueBytes int
	// Seed salts the ECMP hash and seeds per-path loss.
	Seed int64
}

// Fabric stages a packet crosses, in order.
const (
	StageUplink = iota
	StageCore
	StageDownlink
	numStages
)

// FabricStats counts what a Fabric did, one counter per cause.
type FabricStats struct {
	Sent             stats.Counter
	Delivered        stats.Counter
	DroppedUplink    stats.Counter
	DroppedCore      stats.Counter
	DroppedDownlink  stats.Counter
	DroppedPathLoss  stats.Counter
	DroppedNoHost    stats.Counter
	DroppedNoReceive stats.Counter
}

// Set lists the counters with their help text.
func (s *FabricStats) Set() stats.Set {
	return stats.Set{
		{Name: "fabric_sent", Help: "packets handed to a fabric link", Counter: &s.Sent},
		{Name: "fabric_delivered", Help: "packets delivered to a host's receiver", Counter: &s.Delivered},
		{Name: "fabric_dropped_uplink", Help: "tail drops at a sender's uplink queue", Counter: &s.DroppedUplink},
		{Name: "fabric_dropped_core", Help: "tail drops at a core path queue", Counter: &s.DroppedCore},
		{Name: "fabric_dropped_downlink", Help: "tail drops at a receiver's downlink queue (incast)", Counter: &s.DroppedDownlink},
		{Name: "fabric_dropped_path_loss", Help: "packets lost by a core path's configured loss", Counter: &s.DroppedPathLoss},
		{Name: "fabric_dropped_no_host", Help: "packets addressed to a host index outside the fabric", Counter: &s.DroppedNoHost},
		{Name: "fabric_dropped_no_receiver", Help: "packets for a host with no receiver attached", Counter: &s.DroppedNoReceive},
	}
}

// Fabric is an event-driven emulation of a switched fabric on an injected
// clock, without goroutines: links Send into it, Poll moves packets through
// the queues up to the clock's current time and delivers those that reach
// their host. Buffers are recycled; steady-state operation does not
// allocate. Fabric is safe for concurrent use; receivers run without its
// lock and may Send.
type Fabric struct {
	mu    sync.Mutex
	clk   clock.Clock
	cfg   FabricConfig
	rng   *rand.Rand
	salt  uint64
	queue [numStages][]egress
	// per-path impairments
	pathDelay []time.Duration
	pathLoss  []float64
	rx        []Receiver
	slots     []fabricSlot
	free      []int32
	q         dueQueue // slots by (at, seq)
	seq       uint64
	polling   bool
	pending   []int32 // sent by receivers during Poll

	// Stats counts sends, deliveries and drops by cause.
	Stats FabricStats
}

type fabricSlot struct {
	buf      []byte
	at       clock.Time // when the packet reaches its next stage
	seq      uint64
	flow     uint32
	src, dst int32
	path     int32
	stage    int8 // next stage; numStages = deliver
}

// egress is one FIFO egress queue with serialization.
type egress struct {
	rate      uint64
	delay     time.Duration
	busyUntil clock.Time
	backlog   int         // bytes not yet fully serialized
	fin       []finRecord // serialization finish times, FIFO
	head      int
	maxBytes  int // high-water mark of backlog
}

type finRecord struct {
	at   clock.Time
	size int
}

// NewFabric returns a fabric with cfg.Hosts hosts and no receivers.
func NewFabric(clk clock.Clock, cfg FabricConfig) *Fabric {
	cfg.Hosts = max(cfg.Hosts, 1)
	cfg.Paths = max(cfg.Paths, 1)
	seed := uint64(cfg.Seed)
	f := &Fabric{
		clk:       clk,
		cfg:       cfg,
		rng:       rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)),
		salt:      seed*0x9e3779b97f4a7c15 + 1,
		pathDelay: make([]time.Duration, cfg.Paths),
		pathLoss:  make([]float64, cfg.Paths),
		rx:        make([]Receiver, cfg.Hosts),
	}
	mk := func(n int, rate uint64, d time.Duration) []egress {
		q := make([]egress, n)
		for i := range q {
			q[i] = egress{rate: rate, delay: d}
		}
		return q
	}
	f.queue[StageUplink] = mk(cfg.Hosts, cfg.HostRateBitsPerSec, cfg.HostDelay)
	f.queue[StageCore] = mk(cfg.Paths, cfg.PathRateBitsPerSec, cfg.PathDelay)
	f.queue[StageDownlink] = mk(cfg.Hosts, cfg.HostRateBitsPerSec, cfg.HostDelay)
	return f
}

// Attach sets the receiver of packets delivered to host.
func (f *Fabric) Attach(host int, rx Receiver) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if host >= 0 && host < len(f.rx) {
		f.rx[host] = rx
	}
}

// SetPathDelay adds extra propagation delay to core path p (e.g. a
// congested or long path for PLB experiments).
func (f *Fabric) SetPathDelay(p int, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p >= 0 && p < len(f.pathDelay) {
		f.pathDelay[p] = max(d, 0)
	}
}

// SetPathLoss makes core path p drop packets with probability prob.
func (f *Fabric) SetPathLoss(p int, prob float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p >= 0 && p < len(f.pathLoss) {
		f.pathLoss[p] = prob
	}
}

// PathOf returns the core path ECMP picks for (src, dst, flow).
func (f *Fabric) PathOf(src, dst int, flow uint32) int {
	h := f.salt ^ uint64(uint32(src))<<40 ^ uint64(uint32(dst))<<20 ^ uint64(flow)
	// splitmix64 finalizer
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return int(h % uint64(f.cfg.Paths))
}

// QueueHighWater returns the largest backlog in bytes egress queue idx of
// stage has held.
func (f *Fabric) QueueHighWater(stage, idx int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if stage < 0 || stage >= numStages || idx < 0 || idx >= len(f.queue[stage]) {
		return 0
	}
	return f.queue[stage][idx].maxBytes
}

// FabricLink is the Link from one host to another through a Fabric.
type FabricLink struct {
	f        *Fabric
	src, dst int
}

// Link returns the Link host src uses to reach host dst.
func (f *Fabric) Link(src, dst int) *FabricLink { return &FabricLink{f: f, src: src, dst: dst} }

// Send injects pkt into the fabric at the sender's uplink.
func (l *FabricLink) Send(pkt []byte, flow uint32) { l.f.send(l.src, l.dst, pkt, flow) }

func (f *Fabric) send(src, dst int, pkt []byte, flow uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Stats.Sent.Inc()
	if src < 0 || src >= f.cfg.Hosts || dst < 0 || dst >= f.cfg.Hosts {
		f.Stats.DroppedNoHost.Inc()
		return
	}
	var i int32
	if n := len(f.free); n > 0 {
		i = f.free[n-1]
		f.free = f.free[:n-1]
	} else {
		f.slots = append(f.slots, fabricSlot{})
		i = int32(len(f.slots) - 1)
	}
	s := &f.slots[i]
	s.buf = append(s.buf[:0], pkt...)
	s.flow, s.src, s.dst = flow, int32(src), int32(dst)
	s.path = int32(f.PathOf(src, dst, flow))
	s.stage = StageUplink
	s.at = f.clk.Now()
	f.seq++
	s.seq = f.seq
	if f.polling {
		f.pending = append(f.pending, i)
		return
	}
	f.push(i)
}

// Poll advances every packet through the fabric up to the clock's current
// time, delivering those that reach their host in arrival order, and
// returns the number delivered. Packets sent by receivers during Poll move
// on the next Poll.
func (f *Fabric) Poll() int {
	f.mu.Lock()
	now := f.clk.Now()
	f.polling = true
	n := 0
	for f.q.len() > 0 {
		if f.q.top().at > now {
			break
		}
		i := f.pop()
		s := &f.slots[i]
		if s.stage < numStages {
			if f.advance(s) {
				f.push(i)
			} else {
				f.free = append(f.free, i)
			}
			continue
		}
		rx := f.rx[s.dst]
		if rx == nil {
			f.Stats.DroppedNoReceive.Inc()
			f.free = append(f.free, i)
			continue
		}
		buf, flow := s.buf, s.flow
		f.Stats.Delivered.Inc()
		f.mu.Unlock()
		rx(buf, flow)
		n++
		f.mu.Lock()
		f.free = append(f.free, i)
	}
	f.polling = false
	for _, i := range f.pending {
		f.push(i)
	}
	f.pending = f.pending[:0]
	f.mu.Unlock()
	return n
}

// advance passes s through the egress queue of its next stage and reports
// whether it survives; on success s.at is its arrival at the stage after.
func (f *Fabric) advance(s *fabricSlot) bool {
	var q *egress
	var extra time.Duration
	switch s.stage {
	case StageUplink:
		q = &f.queue[StageUplink][s.src]
	case StageCore:
		q = &f.queue[StageCore][s.path]
		extra = f.pathDelay[s.path]
		if p := f.pathLoss[s.path]; p > 0 && f.rng.Float64() < p {
			f.Stats.DroppedPathLoss.Inc()
			return false
		}
	case StageDownlink:
		q = &f.queue[StageDownlink][s.dst]
	}
	t := s.at
	for q.head < len(q.fin) && q.fin[q.head].at <= t {
		q.backlog -= q.fin[q.head].size
		q.head++
	}
	if q.head == len(q.fin) {
		q.fin, q.head = q.fin[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.fin) {
		n := copy(q.fin, q.fin[q.head:])
		q.fin, q.head = q.fin[:n], 0
	}
	size := len(s.buf)
	if f.cfg.QueueBytes > 0 && q.backlog+size > f.cfg.QueueBytes {
		switch s.stage {
		case StageUplink:
			f.Stats.DroppedUplink.Inc()
		case StageCore:
			f.Stats.DroppedCore.Inc()
		default:
			f.Stats.DroppedDownlink.Inc()
		}
		return false
	}
	finish := t
	if q.rate > 0 {
		finish = max(t, q.busyUntil) + time.Duration(uint64(size)*8*uint64(time.Second)/q.rate)
		q.busyUntil = finish
		q.fin = append(q.fin, finRecord{finish, size})
		q.backlog += size
		q.maxBytes = max(q.maxBytes, q.backlog)
	}
	s.at = finish + q.delay + extra
	s.stage++
	f.seq++
	s.seq = f.seq
	return true
}

// NextDue returns when the next packet reaches its next stage (Poll then
// has work to do).
func (f *Fabric) NextDue() (clock.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.q.len() == 0 {
		return 0, false
	}
	return f.q.top().at, true
}

// Len returns the number of packets inside the fabric.
func (f *Fabric) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.q.len()
}

// String describes the fabric's shape.
func (f *Fabric) String() string {
	return fmt.Sprintf("fabric(%d hosts, %d paths)", f.cfg.Hosts, f.cfg.Paths)
}

func (f *Fabric) push(i int32) { f.q.push(f.slots[i].at, f.slots[i].seq, i) }

func (f *Fabric) pop() int32 { return f.q.pop() }
