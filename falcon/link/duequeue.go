package link

import "falconnic/internal/clock"

// dueEntry is one slot in Mem's due queue (a heapq.Queue): slot indices
// ordered by (due time, send sequence), so packets due at the same instant
// keep their send order. Keys are copied in, so the heap never looks at
// the slots.
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
