package link

import (
	"falconnic/internal/clock"
	"falconnic/internal/heapq"
)

// dueEntry is one slot in Mem's due queue: slot indices ordered by (due
// time, send sequence), so packets due at the same instant keep their
// send order. Keys are copied in, so the queue never looks at the slots.
type dueEntry struct {
	at   clock.Time
	seq  uint64
	slot int32
}

// Before orders entries by (due, seq).
func (a *dueEntry) Before(b *dueEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// dueQueue is Mem's queue of slots by (due, seq). Packets mostly come in
// due order (a constant delay, no reordering), so an entry no earlier
// than the newest one of a FIFO ring joins the ring in O(1); only one
// that would overtake it (a reordered packet, a shorter delay) goes to a
// heap. The earlier of the two heads is the queue's top.
type dueQueue struct {
	ring    []dueEntry // a power of two long; entries in (due, seq) order
	head, n int
	heap    heapq.Queue[dueEntry, *dueEntry]
}

// Len returns the number of entries.
func (q *dueQueue) Len() int { return q.n + q.heap.Len() }

// Push adds x.
func (q *dueQueue) Push(x dueEntry) {
	if q.n > 0 && x.Before(&q.ring[(q.head+q.n-1)&(len(q.ring)-1)]) {
		q.heap.Push(x)
		return
	}
	if q.n == len(q.ring) {
		nr := make([]dueEntry, max(2*len(q.ring), 64))
		for i := 0; i < q.n; i++ {
			nr[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
		}
		q.ring, q.head = nr, 0
	}
	q.ring[(q.head+q.n)&(len(q.ring)-1)] = x
	q.n++
}

// fromRing reports whether the top is the ring's head (else the heap's).
func (q *dueQueue) fromRing() bool {
	return q.n > 0 && (q.heap.Len() == 0 || q.ring[q.head].Before(q.heap.Top()))
}

// Top returns the earliest entry; the queue must not be empty.
func (q *dueQueue) Top() *dueEntry {
	if q.fromRing() {
		return &q.ring[q.head]
	}
	return q.heap.Top()
}

// Pop removes and returns the earliest entry; the queue must not be empty.
func (q *dueQueue) Pop() dueEntry {
	if q.fromRing() {
		x := q.ring[q.head]
		q.head = (q.head + 1) & (len(q.ring) - 1)
		q.n--
		return x
	}
	return q.heap.Pop()
}
