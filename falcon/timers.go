package falcon

import "time"

// The endpoint keeps its connections with a pending timer in a min-heap
// keyed by each one's earliest deadline, so OnTimer visits only the
// connections that are due and NextDeadline is the heap's top: an endpoint
// with thousands of connections costs per due timer, not per connection.
//
// A key may be early (a timer was pushed back or disarmed since), never
// late: every entry point that can arm a timer ends in Conn.touch, which
// lowers the key. OnTimer re-reads the deadline of each connection it pops
// and files it again under its exact next deadline. Ties go to the older
// connection, so the order of a run does not depend on the heap's history.

// touch files c under its earliest deadline if that is earlier than its
// key (or it has none).
func (c *Conn) touch() {
	if d, has := c.deadline(); has && (c.tIdx < 0 || d < c.tAt) {
		c.ep.timerSet(c, d)
	}
}

// NextDeadline returns the earliest time OnTimer has work, if any. It is
// O(1) and may be early, never late.
func (e *Endpoint) NextDeadline() (time.Duration, bool) {
	if len(e.timers) == 0 {
		return 0, false
	}
	return e.timers[0].tAt, true
}

// OnTimer runs every deadline due at now (normally the clock's reading at
// NextDeadline) and files each visited connection under its next one.
func (e *Endpoint) OnTimer(now time.Duration) {
	if len(e.timers) == 0 || e.timers[0].tAt > now {
		return
	}
	_, outer := e.enter() // packets it sends carry the clock's reading
	defer e.leave(outer)
	e.visit = e.visit[:0]
	for len(e.timers) > 0 && e.timers[0].tAt <= now {
		c := e.timers[0]
		e.timerRemove(c)
		if d, has := c.deadline(); has && d <= now {
			c.onTimer(now)
		}
		e.visit = append(e.visit, c)
	}
	for i, c := range e.visit {
		e.visit[i] = nil
		if d, has := c.deadline(); has {
			e.timerSet(c, d)
		} else if c.tIdx >= 0 {
			e.timerRemove(c)
		}
	}
}

func (a *Conn) timerBefore(b *Conn) bool {
	if a.tAt != b.tAt {
		return a.tAt < b.tAt
	}
	return a.order < b.order
}

// timerSet files c under key d (inserting it or moving it).
func (e *Endpoint) timerSet(c *Conn, d time.Duration) {
	if c.tIdx < 0 {
		c.tAt = d
		c.tIdx = int32(len(e.timers))
		e.timers = append(e.timers, c)
		e.timerUp(int(c.tIdx))
		return
	}
	c.tAt = d
	e.timerUp(int(c.tIdx))
	e.timerDown(int(c.tIdx))
}

func (e *Endpoint) timerRemove(c *Conn) {
	i := int(c.tIdx)
	if i < 0 {
		return
	}
	last := len(e.timers) - 1
	e.timerSwap(i, last)
	e.timers[last] = nil
	e.timers = e.timers[:last]
	c.tIdx = -1
	if i < last {
		e.timerUp(i)
		e.timerDown(i)
	}
}

func (e *Endpoint) timerSwap(i, j int) {
	h := e.timers
	h[i], h[j] = h[j], h[i]
	h[i].tIdx, h[j].tIdx = int32(i), int32(j)
}

func (e *Endpoint) timerUp(j int) {
	h := e.timers
	for j > 0 {
		p := (j - 1) / 2
		if !h[j].timerBefore(h[p]) {
			break
		}
		e.timerSwap(j, p)
		j = p
	}
}

func (e *Endpoint) timerDown(j int) {
	h := e.timers
	for {
		c := 2*j + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h[r].timerBefore(h[c]) {
			c = r
		}
		if !h[c].timerBefore(h[j]) {
			return
		}
		e.timerSwap(j, c)
		j = c
	}
}
