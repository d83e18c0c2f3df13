package link

import "falconnic/internal/clock"

// dueQueue is the event queue of Mem: a binary min-heap of slot
// indices ordered by (due time, send sequence), so packets due at the same
// instant keep their send order. Keys are copied in, so the heap never looks
// at the slots; it allocates only while it grows.
type dueQueue struct{ e []dueEntry }

type dueEntry struct {
	at   clock.Time
	seq  uint64
	slot int32
}

func (a dueEntry) before(b dueEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *dueQueue) len() int { return len(q.e) }

// top returns the earliest entry; the queue must not be empty.
func (q *dueQueue) top() dueEntry { return q.e[0] }

func (q *dueQueue) push(at clock.Time, seq uint64, slot int32) {
	q.e = append(q.e, dueEntry{at, seq, slot})
	h := q.e
	for j := len(h) - 1; j > 0; {
		p := (j - 1) / 2
		if !h[j].before(h[p]) {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
}

// pop removes the earliest entry and returns its slot; the queue must not
// be empty.
func (q *dueQueue) pop() int32 {
	h := q.e
	top := h[0].slot
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	q.e = h
	for j := 0; ; {
		c := 2*j + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].before(h[c]) {
			c = r
		}
		if !h[c].before(h[j]) {
			break
		}
		h[j], h[c] = h[c], h[j]
		j = c
	}
	return top
}
