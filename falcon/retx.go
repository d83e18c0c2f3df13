package falcon

import (
	"time"

	"falconnic/falcon/pdl"
	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// rtoScan retransmits every packet whose deadline passed [S §9.1.1] and
// re-arms the RTO timer at the earliest remaining deadline.
func (c *Conn) rtoScan(now time.Duration) {
	c.rtoArmed = false
	if c.cfg.Ordered && !c.cfg.GoBackN {
		c.rtoScanOrdered(now)
		return
	}
	for i := range c.tx {
		w := &c.tx[i]
		for psn := w.Base(); psn != w.Next(); psn = psn.Add(1) {
			s := w.Slot(psn)
			if s.State != pdl.SlotInflight && s.State != pdl.SlotHeld {
				continue
			}
			if s.Deadline <= now {
				if c.cfg.GoBackN {
					if s.Retries < c.cfg.MaxRetries {
						s.Retries++
					}
					c.goBack(i, psn, now)
					break
				}
				c.rtoFire(i, psn, s, now)
				if c.dead {
					return
				}
			}
			c.armRTO(s.Deadline)
		}
	}
}

// live reports whether s waits for an ACK (and so has a deadline).
func live(s *pdl.TxSlot) bool { return s.State == pdl.SlotInflight || s.State == pdl.SlotHeld }

// rtoScanOrdered is rtoScan for an ordered connection: expired requests
// (Pull Requests in the request window, Push Data in the data window) are
// resent in RSN order across both windows, the UR deadlock rule [S §8.1];
// target-generated Pull Data goes as met. Each window is already in RSN
// order, so this merges the two.
func (c *Conn) rtoScanOrdered(now time.Duration) {
	rq, dt := &c.tx[reqW], &c.tx[dataW]
	i, j := rq.Base(), dt.Base()
	for !c.dead {
		for ; i != rq.Next(); i = i.Add(1) {
			s := rq.Slot(i)
			if live(s) && s.Deadline <= now {
				break
			}
			if live(s) {
				c.armRTO(s.Deadline)
			}
		}
		for ; j != dt.Next() && !c.dead; j = j.Add(1) {
			s := dt.Slot(j)
			if live(s) && s.Deadline <= now {
				if s.Request {
					break
				}
				c.rtoFire(dataW, j, s, now)
			}
			if live(s) {
				c.armRTO(s.Deadline)
			}
		}
		ri, rj := i != rq.Next(), j != dt.Next()
		switch {
		case c.dead || !ri && !rj:
			return
		case ri && (!rj || rq.Slot(i).RSN.Less(dt.Slot(j).RSN)):
			c.rtoFire(reqW, i, rq.Slot(i), now)
			i = i.Add(1)
		default:
			c.rtoFire(dataW, j, dt.Slot(j), now)
			j = j.Add(1)
		}
	}
}

// rtoFire handles one expired packet: retransmit, or after MaxRetries turn it
// into a Resync (code 0x3), or fail the connection when a Resync exhausts
// its attempts [S §11].
func (c *Conn) rtoFire(i int, psn wire.PSN, s *pdl.TxSlot, now time.Duration) {
	if c.retxGated(i, s) {
		c.Stats.RetxDeferred.Inc()
		s.Deadline = now + max(c.rto/4, time.Microsecond)
		c.armRTO(s.Deadline)
		return
	}
	if s.Refused {
		// The receiver saw it and asked for a later resend (resource or RNR
		// NACK): not a lost attempt, no backoff.
		s.Refused = false
		c.Stats.RetxNack.Inc()
		c.retransmit(i, psn, s, now)
		return
	}
	if s.Received && !s.Resync {
		// The peer holds it and waits for its ULP: poke at the ULP-RTO pace
		// (the resend draws a fresh ACK) without spending an attempt.
		c.Stats.RetxULPPoke.Inc()
		c.retransmit(i, psn, s, now)
		s.Deadline = now + max(c.cfg.ULPRTO, c.rto)
		c.armRTO(s.Deadline)
		return
	}
	if s.Retries >= c.cfg.MaxRetries {
		if s.Resync {
			c.fail(now)
			return
		}
		c.Stats.RetryExhausted.Inc()
		if (s.Type == wire.TypePushData || s.Type == wire.TypePullRequest) && c.ini.Contains(s.RSN) {
			c.ini.Slot(s.RSN).Status = tl.CmplLocalTO
		}
		c.toResync(i, psn, s, wire.ResyncRetransmitError, now)
		return
	}
	s.Retries++
	c.Stats.RetxRTO.Inc()
	if f := &c.flows[s.Flow]; !f.undoArmed {
		f.undoArmed, f.undoAcked, f.undoWin, f.undoPSN, f.undoFcwnd, f.undoAt = true, false, uint8(i), psn, f.fcwnd, now
	}
	moved := c.reroute(s.Flow, now)
	c.retransmit(i, psn, s, now)
	if moved {
		// The loss was blamed on the path, which is new: wait one RTO, not
		// a backed-off one (the attempt still counts toward MaxRetries).
		s.Deadline = now + c.rto
	}
	c.retxEvent(s, rue.RetxRTO, now)
}

// goBack resends every unacknowledged packet from psn on (Go-Back-N). Only
// the RTO path counts an attempt (for the timed-out packet).
func (c *Conn) goBack(i int, from wire.PSN, now time.Duration) {
	w := &c.tx[i]
	for psn := from; w.Contains(psn); psn = psn.Add(1) {
		s := w.Slot(psn)
		if s.State == pdl.SlotInflight || s.State == pdl.SlotHeld {
			c.Stats.RetxGBN.Inc()
			c.retransmit(i, psn, s, now)
		}
	}
}

// retxGated reports whether resending request s must wait: a request not
// yet counted in ORRC while ORRC ≥ ncwnd [S §9.1.2] (this bites when the
// RUE shrank ncwnd below what is outstanding).
func (c *Conn) retxGated(i int, s *pdl.TxSlot) bool {
	return s.Request && !s.Retx && !s.Resync && uint32(c.tx[i].ORRC) >= c.ncwnd
}

// early reports whether s may be retransmitted early now: not acked or
// received, under the cap, and not (re)sent within the last RTT.
func (c *Conn) early(s *pdl.TxSlot, now time.Duration) bool {
	return s.State == pdl.SlotInflight && !s.Received && s.Early < c.cfg.EarlyRetxCap &&
		now-s.SentAt > c.rtt.Or(0)
}

// oooRetx presumes lost every unreceived packet more than OOODistance below
// the highest received one [S §9.1.4].
func (c *Conn) oooRetx(i int, base wire.PSN, highest int, now time.Duration) {
	w := &c.tx[i]
	limit := highest - int(c.cfg.OOODistance)
	for n := 0; n < limit; n++ {
		psn := base.Add(uint32(n))
		if !w.Contains(psn) {
			continue
		}
		if s := w.Slot(psn); c.early(s, now) && !c.retxGated(i, s) {
			s.Early++
			c.Stats.RetxEarly.Inc()
			c.retransmit(i, psn, s, now)
			c.retxEvent(s, rue.RetxEarly, now)
		}
	}
}

// ownRetx resends what the receiver dropped beyond its window (EACK-OWN),
// at most once per RTT per packet [S §9.1.4].
func (c *Conn) ownRetx(i int, now time.Duration) {
	w := &c.tx[i]
	for psn := w.Base(); psn != w.Next(); psn = psn.Add(1) {
		if s := w.Slot(psn); c.early(s, now) && !c.retxGated(i, s) {
			s.Early++
			c.Stats.RetxOWN.Inc()
			c.retransmit(i, psn, s, now)
		}
	}
}

// rackScan is RACK (digest §5.7): an unreceived packet sent before the newest
// acknowledged one, and older than RTT plus a quarter-RTT reorder window, is
// lost.
func (c *Conn) rackScan(now time.Duration) {
	rtt := c.rtt.Or(c.rto)
	wait := rtt + rtt/4
	if wait > c.rto {
		return
	}
	for i := range c.tx {
		w := &c.tx[i]
		for psn := w.Base(); psn != w.Next(); psn = psn.Add(1) {
			s := w.Slot(psn)
			if s.State == pdl.SlotInflight && !s.Received && s.SentAt < c.rackXmit && now-s.SentAt >= wait &&
				s.Early < c.cfg.EarlyRetxCap && !c.retxGated(i, s) {
				s.Early++
				c.Stats.RetxRACK.Inc()
				if c.cfg.RerouteOnProbe {
					c.reroute(s.Flow, now)
				}
				c.retransmit(i, psn, s, now)
				c.retxEvent(s, rue.RetxRACK, now)
			}
		}
	}
}

// rearmTLP sets the tail-loss probe timer: PTO = max(2·RTT + coalescing
// timeout, 50 µs) (digest §5.7).
func (c *Conn) rearmTLP(now time.Duration) {
	if !c.cfg.TLP {
		return
	}
	c.tlpFired, c.tlpProbes, c.tlpResumed = false, 0, false
	if c.tx[reqW].Outstanding() == 0 && c.tx[dataW].Outstanding() == 0 {
		c.tlpArmed = false
		return
	}
	c.tlpAt, c.tlpArmed = now+c.pto(), true
}

// pto is the probe timeout.
func (c *Conn) pto() time.Duration {
	return max(2*c.rtt.Or(c.rto/2)+c.cfg.AckCoalesceTimeout, 50*time.Microsecond)
}

// maxRerouteProbes bounds the probes sent without an ACK in between when
// probes reroute: each goes out on a new path (either direction of the
// last one may be dead, so its ACK may be lost too); the RTO covers the
// rest.
const maxRerouteProbes = 4

// maxProbes is how many probes go out without an ACK in between.
func (c *Conn) maxProbes() uint8 {
	if c.cfg.RerouteOnProbe {
		return maxRerouteProbes
	}
	return max(c.cfg.TLPProbes, 1)
}

// tlpProbe retransmits the oldest unreceived packet, up to maxProbes times
// a PTO apart until an ACK re-arms the probe; when probes reroute, each
// goes out on a new path.
func (c *Conn) tlpProbe(now time.Duration) {
	if c.fcwnd < rue.One && now < c.nextSend {
		// Below one packet of fcwnd every departure, a probe too, leaves
		// through the pacing gap [S §10.3.5]: a probe sent a PTO after
		// a paced packet would outrun the rate the RUE set.
		c.Stats.TLPPaced.Inc()
		c.tlpAt, c.tlpArmed = c.nextSend, true
		return
	}
	c.tlpFired, c.tlpResumed = true, false
	c.tlpProbes++
	if c.tlpProbes < c.maxProbes() {
		c.tlpAt, c.tlpArmed = now+c.pto(), true
	}
	for i := range c.tx {
		w := &c.tx[i]
		for psn := w.Base(); psn != w.Next(); psn = psn.Add(1) {
			s := w.Slot(psn)
			if s.State == pdl.SlotInflight && !s.Received && s.Early < c.cfg.EarlyRetxCap && !c.retxGated(i, s) {
				s.Early++
				c.Stats.RetxTLP.Inc()
				if c.cfg.RerouteOnProbe {
					c.reroute(s.Flow, now)
				}
				c.retransmit(i, psn, s, now)
				c.retxEvent(s, rue.RetxTLP, now)
				return
			}
		}
	}
}

// retxEvent tells the RUE about a retransmission of s [S §10.6]: RTO ones
// carry the packet's attempt count, early (OOO distance), RACK and TLP ones
// its early-retransmission count.
func (c *Conn) retxEvent(s *pdl.TxSlot, reason rue.RetxReason, now time.Duration) {
	if c.ep.cfg.RUE == nil {
		return
	}
	n := s.Early
	if reason == rue.RetxRTO {
		n = s.Retries
	}
	c.Stats.RUERetxEvents[reason].Inc()
	c.rueEvent(now, s.Flow, rue.EventRetx, 0, 0, 0, wire.TimestampAt(now), 0, 0, 0, 0, false, false, n, reason)
}

// Resumed tells the endpoint that its host had stopped running it until
// now: its I/O loop woke a millisecond or more past a due deadline. For
// that time no acknowledgement could be handled here, nor, when the peer
// shares the host, sent there, so a timeout that expired in it says
// nothing about loss; firing it would resend a window the peer holds, and
// the RUE would cut the window for a congestion that never was. Every loss
// timer due sooner than one timeout from now (a packet's RTO deadline, the
// tail-loss probe) is pushed out to one timeout from now: after a stall a packet is
// resent only when the endpoint has run for a whole timeout without its
// acknowledgement. A real loss inside a stall is recovered one timeout
// later, and a timer restarts once per transmission (a packet's) or per
// arming (the probe's): a host that stalls the endpoint again and again
// delays a resend by one timeout, never indefinitely. The delay samples
// of packets sent before now measured the stall too, and are kept from
// the RUE (Conn.delaySample). Call before OnTimer(now); the I/O loop, which alone
// sees its wake-ups, decides what a stall is.
func (e *Endpoint) Resumed(now time.Duration) {
	e.stallEnd, e.stalled = now, true
	// Deadlines only move later: every heap key stays early, never late
	// (timers.go), so the heap needs no refiling.
	for _, c := range e.timers {
		if !c.dead {
			c.resumed(now)
		}
	}
}

// resumed restarts c's loss timers due before one timeout from now.
func (c *Conn) resumed(now time.Duration) {
	if c.rtoArmed {
		c.rtoArmed = false
		restart := now + c.rto
		for i := range c.tx {
			w := &c.tx[i]
			for psn := w.Base(); psn != w.Next(); psn = psn.Add(1) {
				s := w.Slot(psn)
				if !live(s) {
					continue
				}
				if s.Deadline < restart && !s.Resumed {
					if s.Deadline <= now {
						c.Stats.RTOResumed.Inc()
					}
					s.Deadline, s.Resumed = restart, true
				}
				c.armRTO(s.Deadline)
			}
		}
	}
	if c.tlpArmed && !c.tlpResumed && c.tlpAt < now+c.pto() {
		if c.tlpAt <= now {
			c.Stats.TLPResumed.Inc()
		}
		c.tlpAt, c.tlpResumed = now+c.pto(), true
	}
}
