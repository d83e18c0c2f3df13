package link

import (
	"math/rand/v2"
	"sync"
	"time"

	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// MemConfig sets the behaviour of one direction of an in-memory link. The
// zero value is a perfect link with no delay and infinite rate.
type MemConfig struct {
	// Delay is the propagation delay added to every packet.
	Delay time.Duration
	// RateBitsPerSec is the serialization rate: packets leave one after the
	// other, each taking len×8/rate. 0 means infinite (no serialization).
	RateBitsPerSec uint64
	// DropProb is the probability a packet is lost.
	DropProb float64
	// ReorderProb is the probability a packet is held back by ReorderDelay,
	// so that packets sent after it overtake it.
	ReorderProb float64
	// ReorderDelay is the extra delay of a reordered packet;
	// 0 means DefaultReorderDelay.
	ReorderDelay time.Duration
	// DupProb is the probability a packet is delivered twice.
	DupProb float64
	// CorruptProb is the probability a delivered copy has one random bit
	// flipped (the receiver's ICV check must catch it).
	CorruptProb float64
	// Seed seeds the link's PCG random source: the same seed and the same
	// sequence of Sends give the same impairments.
	Seed int64
	// QueueLimit caps the packets the link holds (waiting for serialization
	// or in flight); a Send beyond it is a tail drop. 0 means unlimited.
	QueueLimit int
	// Priority, when set, picks the packets the sender's NIC serves ahead
	// of those queued for serialization (with a rate): they wait only for
	// the packet on the wire. Falcon's ACKs and NACKs, as Isekai's NIC
	// arbiter weighs ack/nack 2 against 1 for connection traffic.
	Priority func(pkt []byte) bool
}

// DefaultReorderDelay is the hold-back of a reordered packet when
// MemConfig.ReorderDelay is zero.
const DefaultReorderDelay = 10 * time.Microsecond

// MemStats counts what a Mem did, one counter per cause.
type MemStats struct {
	Sent             stats.Counter
	Delivered        stats.Counter
	DroppedRandom    stats.Counter
	DroppedQueueFull stats.Counter
	Reordered        stats.Counter
	Duplicated       stats.Counter
	Corrupted        stats.Counter
}

// Set lists the counters with their help text.
func (s *MemStats) Set() stats.Set {
	return stats.Set{
		{Name: "link_sent", Help: "packets handed to Send", Counter: &s.Sent},
		{Name: "link_delivered", Help: "packets (and duplicates) delivered by Poll", Counter: &s.Delivered},
		{Name: "link_dropped_random", Help: "packets lost by the random drop impairment", Counter: &s.DroppedRandom},
		{Name: "link_dropped_queue_full", Help: "packets tail-dropped because the link held QueueLimit packets", Counter: &s.DroppedQueueFull},
		{Name: "link_reordered", Help: "packets held back by ReorderDelay so later ones overtake them", Counter: &s.Reordered},
		{Name: "link_duplicated", Help: "packets delivered a second time", Counter: &s.Duplicated},
		{Name: "link_corrupted", Help: "delivered copies with one bit flipped", Counter: &s.Corrupted},
	}
}

// Mem is one direction of an in-memory link driven by an injected clock. It
// starts no goroutines: Send queues a copy of the packet with its delivery
// time, and Poll hands every packet whose time has come to a Receiver.
// Buffers are recycled, so steady-state Send+Poll does not allocate. Mem is
// safe for concurrent use; Poll does not hold its lock while the Receiver
// runs, so a Receiver may Send (on this or another link).
type Mem struct {
	mu        sync.Mutex
	clk       clock.Clock
	cfg       MemConfig
	rng       *rand.Rand
	slots     []memSlot
	free      []int32
	q         dueQueue // queued slots by (due, seq)
	seq       uint64
	busyUntil clock.Time
	// wire holds the serialization ends of the packets queued in send
	// order (with Priority): the first one after now is on the wire.
	wire []clock.Time

	// Stats counts sends, deliveries and every impairment.
	Stats MemStats
}

type memSlot struct {
	buf  []byte
	due  clock.Time
	seq  uint64
	flow uint32
}

// NewMem returns an empty link reading time from clk.
func NewMem(clk clock.Clock, cfg MemConfig) *Mem {
	if cfg.Delay < 0 {
		cfg.Delay = 0
	}
	if cfg.ReorderDelay <= 0 {
		cfg.ReorderDelay = DefaultReorderDelay
	}
	seed := uint64(cfg.Seed)
	return &Mem{
		clk: clk,
		cfg: cfg,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// NewMemPair returns the two directions of a link: ab carries packets from
// A to B, ba from B to A.
func NewMemPair(clk clock.Clock, cfgAB, cfgBA MemConfig) (ab, ba *Mem) {
	return NewMem(clk, cfgAB), NewMem(clk, cfgBA)
}

// Config returns the link's configuration.
func (m *Mem) Config() MemConfig { return m.cfg }

// chance draws one random event of probability p; it consumes no randomness
// when p ≤ 0, so enabling one impairment leaves the others' draws unchanged.
func (m *Mem) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	return m.draw(p)
}

// draw is chance's random draw, kept out of line so that chance inlines
// into Send: a perfect link then costs a compare per impairment.
//
//go:noinline
func (m *Mem) draw(p float64) bool { return m.rng.Float64() < p }

// Send queues a copy of pkt for delivery on flow (it implements Link).
func (m *Mem) Send(pkt []byte, flow uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Stats.Sent.Inc()
	if m.chance(m.cfg.DropProb) {
		m.Stats.DroppedRandom.Inc()
		return
	}
	if m.full() {
		m.Stats.DroppedQueueFull.Inc()
		return
	}
	now := m.clk.Now()
	depart := now
	if r := m.cfg.RateBitsPerSec; r > 0 {
		ser := time.Duration(uint64(len(pkt)) * 8 * uint64(time.Second) / r)
		if m.cfg.Priority != nil {
			n := 0
			for n < len(m.wire) && m.wire[n] <= now {
				n++
			}
			m.wire = m.wire[:copy(m.wire, m.wire[n:])]
		}
		if m.cfg.Priority != nil && len(m.wire) > 0 && m.cfg.Priority(pkt) {
			// Ahead of the queue, behind the packet on the wire; the
			// queue's later packets leave ser later.
			depart = m.wire[0] + ser
			m.busyUntil += ser
		} else {
			start := max(now, m.busyUntil)
			m.busyUntil = start + ser
			depart = m.busyUntil
			if m.cfg.Priority != nil {
				m.wire = append(m.wire, depart)
			}
		}
	}
	due := depart + m.cfg.Delay
	m.enqueue(pkt, flow, due)
	if m.chance(m.cfg.DupProb) {
		if m.full() {
			m.Stats.DroppedQueueFull.Inc()
			return
		}
		m.Stats.Duplicated.Inc()
		m.enqueue(pkt, flow, due)
	}
}

func (m *Mem) full() bool { return m.cfg.QueueLimit > 0 && m.q.Len() >= m.cfg.QueueLimit }

// enqueue stores one copy of pkt, applying reordering and corruption.
func (m *Mem) enqueue(pkt []byte, flow uint32, due clock.Time) {
	if m.chance(m.cfg.ReorderProb) {
		m.Stats.Reordered.Inc()
		due += m.cfg.ReorderDelay
	}
	var i int32
	if n := len(m.free); n > 0 {
		i = m.free[n-1]
		m.free = m.free[:n-1]
	} else {
		m.slots = append(m.slots, memSlot{})
		i = int32(len(m.slots) - 1)
	}
	s := &m.slots[i]
	s.buf = append(s.buf[:0], pkt...)
	s.due, s.flow = due, flow
	m.seq++
	s.seq = m.seq
	if len(s.buf) > 0 && m.chance(m.cfg.CorruptProb) {
		m.Stats.Corrupted.Inc()
		bit := m.rng.IntN(len(s.buf) * 8)
		s.buf[bit/8] ^= 1 << (bit % 8)
	}
	m.push(i)
}

// Poll delivers, in delivery-time order (ties in send order), every packet
// due at the clock's current time and returns how many it delivered.
// Packets that rx sends during Poll are delivered by a later Poll. It
// takes the due packets out in batches and delivers each batch without
// the lock held.
func (m *Mem) Poll(rx Receiver) int {
	var batch [pollBatch]memDelivery
	m.mu.Lock()
	now, last := m.clk.Now(), m.seq
	n := 0
	for {
		k := 0
		for k < len(batch) && m.q.Len() > 0 {
			if top := m.q.Top(); top.at > now || top.seq > last {
				break
			}
			i := m.pop()
			batch[k] = memDelivery{buf: m.slots[i].buf, flow: m.slots[i].flow, slot: i}
			k++
		}
		if k == 0 {
			break
		}
		m.Stats.Delivered.Add(uint64(k))
		m.mu.Unlock()
		for j := range batch[:k] {
			rx(batch[j].buf, batch[j].flow)
		}
		n += k
		m.mu.Lock()
		for j := range batch[:k] {
			m.free = append(m.free, batch[j].slot)
			batch[j].buf = nil
		}
	}
	m.mu.Unlock()
	return n
}

// pollBatch is how many packets Poll takes out under the lock at a time.
const pollBatch = 32

// memDelivery is one packet Poll took out of the queue: its slot stays
// off the free list until the receiver is done with the buffer.
type memDelivery struct {
	buf  []byte
	flow uint32
	slot int32
}

// NextDue returns the delivery time of the next queued packet.
func (m *Mem) NextDue() (clock.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.q.Len() == 0 {
		return 0, false
	}
	return m.q.Top().at, true
}

// Len returns the number of packets the link holds.
func (m *Mem) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.q.Len()
}

func (m *Mem) push(i int32) { m.q.Push(dueEntry{m.slots[i].due, m.slots[i].seq, i}) }

func (m *Mem) pop() int32 { return m.q.Pop().slot }
