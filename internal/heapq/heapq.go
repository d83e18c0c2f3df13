// Package heapq is the binary min-heap the event-driven emulators share
// (the in-memory link's due queue, the fabric's and the simulator's event
// queues): items are stored by value, ordered by their Before method, and
// the heap allocates only while it grows.
package heapq

// Queue is a min-heap of T by (*T).Before. The zero value is empty and
// ready. Items that compare equal leave in no particular order: give them
// a sequence number in Before to keep an order.
type Queue[T any, P interface {
	*T
	Before(*T) bool
}] struct {
	e []T
}

// Len returns the number of items.
func (q *Queue[T, P]) Len() int { return len(q.e) }

// Top returns the first item, in place; the queue must not be empty.
func (q *Queue[T, P]) Top() *T { return &q.e[0] }

// Push adds x.
func (q *Queue[T, P]) Push(x T) {
	q.e = append(q.e, x)
	h := q.e
	for j := len(h) - 1; j > 0; {
		p := (j - 1) / 2
		if !P(&h[j]).Before(&h[p]) {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
}

// Pop removes and returns the first item; the queue must not be empty.
func (q *Queue[T, P]) Pop() T {
	h := q.e
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	q.e = h
	for j := 0; ; {
		c := 2*j + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && P(&h[r]).Before(&h[c]) {
			c = r
		}
		if !P(&h[c]).Before(&h[j]) {
			break
		}
		h[j], h[c] = h[c], h[j]
		j = c
	}
	return top
}
