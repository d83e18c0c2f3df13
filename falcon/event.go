package falcon

import "time"

// An event enters the endpoint through one of its doors — a frame
// (Receive and its variants), a timer run (OnTimer), a ULP call made
// outside a callback, an RUE response, Close — and everything it causes
// happens at one instant: the clock is read once when the event enters,
// and the packets it sends (their IV timestamps), the deadlines it arms
// and the ULP's calls back into the endpoint from its callbacks all use
// that reading: one clock call per event, not one per packet sent.

// enter starts handling an event: it returns the event's time, reading
// the clock unless an event is already being handled (a ULP call from a
// callback joins the event that made the callback), and whether this
// call is the outermost, which the caller passes to leave when done.
func (e *Endpoint) enter() (now time.Duration, outer bool) {
	if e.atSet {
		return e.at, false
	}
	e.at, e.atSet = e.clk.Now(), true
	return e.at, true
}

// leave ends the event enter started if outer.
func (e *Endpoint) leave(outer bool) {
	if outer {
		e.atSet = false
	}
}

// now returns the time of the event being handled, or the clock's
// reading outside one.
func (e *Endpoint) now() time.Duration {
	if e.atSet {
		return e.at
	}
	return e.clk.Now()
}
