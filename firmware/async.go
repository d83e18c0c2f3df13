package firmware

import "falconnic/falcon/rue"

// Async makes an engine asynchronous: events queue (up to Limit; beyond it
// they are dropped and counted, as a full RUE event queue drops) and are
// answered by Drain.
type Async struct {
	Engine  rue.Engine
	Limit   int
	Dropped uint64
	q       []rue.Event
}

// Handle queues a copy of ev and answers later.
func (a *Async) Handle(ev *rue.Event) (rue.Response, bool) {
	if a.Limit > 0 && len(a.q) >= a.Limit {
		a.Dropped++
		return rue.Response{}, false
	}
	a.q = append(a.q, *ev)
	return rue.Response{}, false
}

// Pending returns the queued events.
func (a *Async) Pending() int { return len(a.q) }

// Drain computes every queued event's response and passes it to apply (the
// endpoint's ApplyRUE); it returns how many it answered.
func (a *Async) Drain(apply func(rue.Response)) int {
	n := 0
	for len(a.q) > 0 {
		ev := a.q[0]
		a.q = a.q[1:]
		if r, ok := a.Engine.Handle(&ev); ok {
			apply(r)
			n++
		}
	}
	a.q = a.q[:0]
	return n
}
