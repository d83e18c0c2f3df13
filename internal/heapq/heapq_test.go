package heapq

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct{ at, seq int }

func (a *item) Before(b *item) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// TestQueueOrders: whatever the push order, items leave by (at, seq), and
// interleaved pushes and pops keep the order.
func TestQueueOrders(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q Queue[item, *item]
	var want []item
	for i := 0; i < 1000; i++ {
		x := item{at: r.IntN(50), seq: i}
		q.Push(x)
		want = append(want, x)
		if i%7 == 6 { // pop the earliest now and then
			slices.SortFunc(want, func(a, b item) int {
				if a.Before(&b) {
					return -1
				}
				return 1
			})
			if got := q.Pop(); got != want[0] {
				t.Fatalf("pop %v, want %v", got, want[0])
			}
			want = want[1:]
		}
	}
	slices.SortFunc(want, func(a, b item) int {
		if a.Before(&b) {
			return -1
		}
		return 1
	})
	for i, w := range want {
		if q.Len() != len(want)-i || *q.Top() != w {
			t.Fatalf("at %d: len %d top %v, want %d %v", i, q.Len(), *q.Top(), len(want)-i, w)
		}
		if got := q.Pop(); got != w {
			t.Fatalf("pop %v, want %v", got, w)
		}
	}
}

// TestQueueSteadyStateDoesNotAllocate: once grown, push and pop allocate
// nothing.
func TestQueueSteadyStateDoesNotAllocate(t *testing.T) {
	var q Queue[item, *item]
	for i := 0; i < 64; i++ {
		q.Push(item{at: i})
	}
	n := 0
	if a := testing.AllocsPerRun(100, func() { n++; q.Push(item{at: n % 64}); q.Pop() }); a != 0 {
		t.Fatalf("%v allocations per push+pop", a)
	}
}
