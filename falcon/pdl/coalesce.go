package pdl

import "time"

// Coalescer decides when the receiver sends a standalone ACK [S §9.1.6]:
// immediately when a packet asked for one (AR) once that packet is
// acknowledged, when the coalescing count reaches its threshold, or when the
// coalescing timer started by the first unreported event expires.
// Isekai's counting (digest §5.2): an admitted, acknowledged packet counts 2,
// a push awaiting its ULP ack 1, a duplicate or out-of-window packet 2.
type Coalescer struct {
	Threshold int
	Timeout   time.Duration
	count     int
	deadline  time.Duration
	armed     bool
	now       bool // an ACK is due at once
}

// Note records n units of unreported receive state at time t.
func (c *Coalescer) Note(t time.Duration, n int) {
	c.count += n
	if !c.armed {
		c.armed, c.deadline = true, t+c.Timeout
	}
	if c.Threshold > 0 && c.count >= c.Threshold {
		c.now = true
	}
}

// Request asks for an immediate ACK (an AR packet got acknowledged).
func (c *Coalescer) Request(t time.Duration) {
	if !c.armed {
		c.armed, c.deadline = true, t
	}
	c.now = true
}

// Due reports whether an ACK must go out at t.
func (c *Coalescer) Due(t time.Duration) bool { return c.now || (c.armed && t >= c.deadline) }

// Deadline returns the timer deadline, if armed.
func (c *Coalescer) Deadline() (time.Duration, bool) {
	if c.now {
		return 0, c.armed
	}
	return c.deadline, c.armed
}

// Sent resets the state: an ACK (or a piggy-back that carried all state)
// went out.
func (c *Coalescer) Sent() { c.count, c.armed, c.now = 0, false, false }
