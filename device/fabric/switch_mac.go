package fabric

import (
	"sync"
	"sync/atomic"
	"time"

	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// ethAddr is a 48-bit Ethernet address used as a map key (no allocation).
type ethAddr [6]byte

// ethAddrAt reads the address at b[off:off+6]; the caller checks bounds.
func ethAddrAt(b []byte, off int) ethAddr {
	var a ethAddr
	copy(a[:], b[off:off+6])
	return a
}

// group reports whether a is a broadcast or multicast address (I/G bit set,
// IEEE 802-2014 §8.2).
func (a ethAddr) group() bool { return a[0]&1 != 0 }

func (a ethAddr) String() string {
	const hex = "0123456789abcdef"
	buf := make([]byte, 0, 17)
	for i, b := range a {
		if i > 0 {
			buf = append(buf, ':')
		}
		buf = append(buf, hex[b>>4], hex[b&15])
	}
	return string(buf)
}

// macCounters are the learning counters of one MAC table.
type macCounters struct {
	Learned   stats.Counter
	Moved     stats.Counter
	Aged      stats.Counter
	TableFull stats.Counter
}

func (c *macCounters) set(prefix string) stats.Set {
	return stats.Set{
		{Name: prefix + "MACLearned", Help: "source addresses learned", Counter: &c.Learned},
		{Name: prefix + "MACMoved", Help: "learned addresses seen on another port (station move)", Counter: &c.Moved},
		{Name: prefix + "MACAged", Help: "learned addresses removed after aging out", Counter: &c.Aged},
		{Name: prefix + "MACTableFull", Help: "source addresses not learned because the table was full", Counter: &c.TableFull},
	}
}

// macEntry is one learned address. Its fields are atomics so the fast path
// (address already learned on the same port) runs under the read lock only.
type macEntry[P any] struct {
	where atomic.Pointer[P]
	seen  atomic.Int64 // clock.Time of the last frame from this address
	// static marks a pinned entry: it never ages and never moves. It is
	// written only under the table's write lock.
	static bool
}

// macTable maps source addresses to the place they were last seen (a switch
// port, a fabric peer). Entries older than age are treated as unknown by
// lookup and removed by sweep or when the table needs room.
//
// Invariant: a lookup never returns an entry last refreshed more than age ago.
type macTable[P any] struct {
	mu  sync.RWMutex
	m   map[ethAddr]*macEntry[P]
	age time.Duration
	max int
	c   *macCounters
	// nextSweep rate-limits the sweep a full table triggers, so a flood of
	// new source addresses cannot make every frame scan the whole table.
	nextSweep clock.Time
}

func newMACTable[P any](age time.Duration, max int, c *macCounters) *macTable[P] {
	return &macTable[P]{m: make(map[ethAddr]*macEntry[P]), age: age, max: max, c: c}
}

func (t *macTable[P]) fresh(e *macEntry[P], now clock.Time) bool {
	return e.static || now-clock.Time(e.seen.Load()) <= t.age
}

// learn records that a was seen at p at time now. It reports false, and
// learns nothing, if a is pinned to another place.
func (t *macTable[P]) learn(a ethAddr, p *P, now clock.Time) bool {
	t.mu.RLock()
	e := t.m[a]
	if e != nil && (e.where.Load() == p || e.static) {
		ok := e.where.Load() == p
		if ok && clock.Time(e.seen.Load()) < now {
			e.seen.Store(int64(now))
		}
		t.mu.RUnlock()
		return ok
	}
	t.mu.RUnlock()

	t.mu.Lock()
	defer t.mu.Unlock()
	if e = t.m[a]; e != nil {
		if e.static {
			return e.where.Load() == p
		}
		if old := e.where.Load(); old != p {
			if t.fresh(e, now) {
				t.c.Moved.Inc()
			} else {
				t.c.Learned.Inc()
			}
			e.where.Store(p)
		}
		e.seen.Store(int64(now))
		return true
	}
	if len(t.m) >= t.max {
		if now >= t.nextSweep {
			t.sweepLocked(now)
			t.nextSweep = now + t.age/8
		}
		if len(t.m) >= t.max {
			t.c.TableFull.Inc()
			return true
		}
	}
	e = &macEntry[P]{}
	e.where.Store(p)
	e.seen.Store(int64(now))
	t.m[a] = e
	t.c.Learned.Inc()
	return true
}

// pin makes a a static entry at p: it never ages, never moves, and frames
// from a elsewhere are refused by learn. Pins may exceed the table size.
func (t *macTable[P]) pin(a ethAddr, p *P, now clock.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := &macEntry[P]{static: true}
	e.where.Store(p)
	e.seen.Store(int64(now))
	t.m[a] = e
}

// lookup returns where a was last seen, or nil if it is unknown or aged out.
func (t *macTable[P]) lookup(a ethAddr, now clock.Time) *P {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e := t.m[a]
	if e == nil || !t.fresh(e, now) {
		return nil
	}
	return e.where.Load()
}

// forget removes every entry that points at p (the port or peer is gone).
func (t *macTable[P]) forget(p *P) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for a, e := range t.m {
		if e.where.Load() == p {
			delete(t.m, a)
		}
	}
}

// sweep removes aged-out entries and returns how many it removed.
func (t *macTable[P]) sweep(now clock.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sweepLocked(now)
}

func (t *macTable[P]) sweepLocked(now clock.Time) int {
	n := 0
	for a, e := range t.m {
		if !t.fresh(e, now) { // static entries are always fresh
			delete(t.m, a)
			n++
		}
	}
	t.c.Aged.Add(uint64(n))
	return n
}

// macView is one learned address as status reports it.
type macView[P any] struct {
	addr   ethAddr
	at     *P
	age    time.Duration
	static bool
}

// snapshot lists the fresh entries.
func (t *macTable[P]) snapshot(now clock.Time) []macView[P] {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]macView[P], 0, len(t.m))
	for a, e := range t.m {
		if t.fresh(e, now) {
			out = append(out, macView[P]{addr: a, at: e.where.Load(), age: now - clock.Time(e.seen.Load()), static: e.static})
		}
	}
	return out
}

func (t *macTable[P]) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
