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

// Arrived tells the endpoint when the frames it receives from now on
// reached its NIC — the link's delivery, earlier than the event that
// handles them when they waited in the NIC's receive queue — until the
// next call (0: unknown, the event's time). Their receive timestamps are
// taken then: t2, which this endpoint's ACKs echo, and t4, the receive
// time of an ACK or NACK [S §7.1: T2/T4 are local receive times]. So the
// time a frame waits inside a busy NIC counts as the receiver's (the hold,
// t3 − t2) or is left out (t4), not as fabric delay: an emulated NIC whose
// goroutine is behind is not network congestion, as Swift's NIC
// timestamps keep host delay out of its fabric signal. Call on the
// endpoint's goroutine, between events.
func (e *Endpoint) Arrived(at time.Duration) { e.arrived = at }

// rxTime is the receive time of a frame handled at now: its arrival, if
// known and earlier.
func (e *Endpoint) rxTime(now time.Duration) time.Duration {
	if at := e.arrived; at > 0 && at < now {
		return at
	}
	return now
}

// now returns the time of the event being handled, or the clock's
// reading outside one.
func (e *Endpoint) now() time.Duration {
	if e.atSet {
		return e.at
	}
	return e.clk.Now()
}
