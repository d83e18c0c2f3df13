// Package clock is the one source of time for falconnic's protocol engines.
//
// Engines never call time.Now: they take a Clock in their options and read
// Now from it. Production code passes Real; tests pass a *Manual, whose
// Advance moves time forward and fires due timers in deadline order, so a
// test that loses packets and waits for retransmission runs in microseconds
// and the same way every time.
//
// Time is a monotonic Duration since the clock's epoch. Engines that need
// wall time (pcap timestamps) convert at their edge.
package clock

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
)

// Time is a monotonic instant: the time elapsed since the clock's epoch.
type Time = time.Duration

// Clock reads the current time and schedules callbacks.
type Clock interface {
	// Now returns the current monotonic time.
	Now() Time
	// AfterFunc calls f once, at or after Now()+d. f runs on a goroutine of
	// the clock's choosing (Manual runs it inside Advance).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled callback.
type Timer interface {
	// Stop cancels the callback; it reports whether it was still pending.
	Stop() bool
}

// Real is the wall clock, measured from the moment the process started.
var Real Clock = realClock{}

var epoch = time.Now()

type realClock struct{}

func (realClock) Now() Time { return time.Since(epoch) }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Manual is a clock that moves only when told to. It is safe for concurrent
// use; callbacks run on the goroutine that calls Advance or Set, without the
// clock's lock held, so they may schedule further timers. The reading is
// written under the lock and read without it: Now, which engines and
// links call per packet, takes no lock.
type Manual struct {
	mu     sync.Mutex
	now    atomic.Int64 // a Time
	seq    uint64
	timers timerHeap
}

// NewManual returns a manual clock reading start.
func NewManual(start Time) *Manual {
	m := &Manual{}
	m.now.Store(int64(start))
	return m
}

// Now returns the clock's current reading.
func (m *Manual) Now() Time { return Time(m.now.Load()) }

// AfterFunc schedules f at Now()+d. A non-positive d fires on the next Advance
// (including Advance(0)).
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	t := &manualTimer{m: m, at: m.Now() + d, seq: m.seq, f: f, index: -1}
	heap.Push(&m.timers, t)
	return t
}

// Advance moves the clock forward by d, firing every timer due on the way in
// deadline order (ties in scheduling order). The clock reads each timer's
// deadline while its callback runs.
func (m *Manual) Advance(d time.Duration) { m.Set(m.Now() + d) }

// Set moves the clock to t (never backwards), firing due timers in order.
func (m *Manual) Set(t Time) {
	for {
		m.mu.Lock()
		if now := m.Now(); t < now {
			t = now
		}
		if len(m.timers) == 0 || m.timers[0].at > t {
			m.now.Store(int64(t))
			m.mu.Unlock()
			return
		}
		next := heap.Pop(&m.timers).(*manualTimer)
		if next.at > m.Now() {
			m.now.Store(int64(next.at))
		}
		m.mu.Unlock()
		next.f()
	}
}

// Next reports the deadline of the earliest pending timer.
func (m *Manual) Next() (Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.timers) == 0 {
		return 0, false
	}
	return m.timers[0].at, true
}

type manualTimer struct {
	m     *Manual
	at    Time
	seq   uint64
	f     func()
	index int
}

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.m.timers, t.index)
	return true
}

type timerHeap []*manualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*manualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
