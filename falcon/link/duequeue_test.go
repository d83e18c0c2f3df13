package link

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDueQueueOrders mixes in-order entries (the ring) with ones that
// overtake them (the heap) and pops in (due, seq) order throughout.
func TestDueQueueOrders(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var q dueQueue
	var want []dueEntry
	at := time.Duration(0)
	for seq := uint64(1); seq <= 5000; seq++ {
		at += time.Duration(r.IntN(3))
		x := dueEntry{at: at, seq: seq, slot: int32(seq)}
		if r.IntN(5) == 0 { // reordered: due earlier than the latest
			x.at -= time.Duration(r.IntN(20))
		}
		q.Push(x)
		want = append(want, x)
		for r.IntN(3) == 0 && len(want) > 0 {
			slices.SortFunc(want, func(a, b dueEntry) int {
				if a.Before(&b) {
					return -1
				}
				return 1
			})
			if top := q.Top(); *top != want[0] {
				t.Fatalf("Top = %+v, want %+v", *top, want[0])
			}
			if got := q.Pop(); got != want[0] {
				t.Fatalf("Pop = %+v, want %+v", got, want[0])
			}
			want = want[1:]
		}
		if q.Len() != len(want) {
			t.Fatalf("Len = %d, want %d", q.Len(), len(want))
		}
	}
}
