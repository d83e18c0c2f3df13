package falcon

import (
	"time"

	"falconnic/falcon/pdl"
	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// pump sends queued work while the gates allow: target Pull Data first
// (responses never wait behind requests), then initiator requests in RSN
// order [S §8.3 connection scheduler, §9.1.2 gating].
func (c *Conn) pump(now time.Duration) {
	for c.pullQ.n > 0 && !c.dead {
		rsn := c.pullQ.front()
		if !c.gate(dataW, false, now) {
			break
		}
		c.pullQ.pop()
		if fits, _ := c.tgt.Fits(rsn); fits {
			if s := c.tgt.Slot(rsn); s.State == tl.TResponding {
				c.sendPullData(rsn, s, now)
			}
		}
	}
	for c.ini.SendNext != c.ini.Next && !c.dead {
		rsn := c.ini.SendNext
		s := c.ini.Slot(rsn)
		i := reqW
		if s.Kind == tl.Push {
			i = dataW
		}
		if !c.gate(i, true, now) {
			break
		}
		c.ini.SendNext = rsn.Add(1)
		c.sendRequest(rsn, s, i, now)
	}
}

// gate is the transmit gating function for a new packet on window i
// [S §9.1.2]: PSN < base + min(fcwnd, receiver window), requests also
// ORC < ncwnd; below one packet of fcwnd, one packet in flight and
// departures paced by the inter-packet gap [S §10.3.5].
func (c *Conn) gate(i int, request bool, now time.Duration) bool {
	w := &c.tx[i]
	if w.Full() {
		return false
	}
	out := w.Outstanding()
	if c.fcwnd < rue.One {
		if out > 0 {
			return false
		}
		if now < c.nextSend {
			c.paceArmed = true
			return false
		}
	} else if out >= min(c.fcwnd.Int(), rxWindowSize[i]) {
		return false
	}
	if request && uint32(w.ORC) >= c.ncwnd {
		return false
	}
	return true
}

func (c *Conn) txnFields(psn wire.PSN, rsn wire.RSN) wire.TxnFields {
	return wire.TxnFields{CID: c.cfg.DCID, DestFunction: c.cfg.DestFn, Protocol: c.cfg.Protocol, PSN: psn, RSN: rsn}
}

// sendRequest gives an initiator transaction its PSN and sends it.
func (c *Conn) sendRequest(rsn wire.RSN, t *tl.ITxn, i int, now time.Duration) {
	w := &c.tx[i]
	psn, s := w.Alloc()
	s.RSN, s.Request, s.FirstAt, s.Flow = rsn, true, now, c.pickFlow()
	w.ORC++
	f := c.txnFields(psn, rsn)
	if t.Kind == tl.Push {
		s.Type = wire.TypePushData
		reserve(s, wire.PushDataHeaderLen+len(t.Payload))
		s.Buf = []byte(wire.AppendPushData(s.Buf[:0], &f, t.Payload))
	} else {
		if c.cfg.PullTimeout > 0 {
			t.Deadline = now + c.cfg.PullTimeout
			c.armTxn(t.Deadline)
		}
		s.Type = wire.TypePullRequest
		f.RequestLength = uint16(t.Length)
		reserve(s, wire.PullRequestLen+len(t.Payload))
		s.Buf = []byte(wire.AppendTxn(s.Buf[:0], wire.TypePullRequest, &f, t.Payload))
	}
	t.State, t.PSN = tl.ISent, psn
	c.transmit(i, psn, s, now, false)
}

// sendPullData sends the target ULP's answer to a pull.
func (c *Conn) sendPullData(rsn wire.RSN, t *tl.TTxn, now time.Duration) {
	w := &c.tx[dataW]
	psn, s := w.Alloc()
	s.RSN, s.Type, s.FirstAt, s.Flow = rsn, wire.TypePullData, now, c.pickFlow()
	f := c.txnFields(psn, rsn)
	reserve(s, wire.PullDataHeaderLen+len(t.Payload))
	s.Buf = []byte(wire.AppendPullData(s.Buf[:0], &f, t.Payload))
	t.DataPSN = psn
	c.transmit(dataW, psn, s, now, false)
}

// pickFlow chooses the path of a new packet: round robin over the flows.
func (c *Conn) pickFlow() uint8 {
	f := c.nextFlow
	c.nextFlow = (f + 1) % uint8(c.cfg.Flows)
	return f
}

// reserve makes sure a slot's buffer holds n bytes plus the envelope, so
// building and sealing the packet never allocates once the buffer grew.
func reserve(s *pdl.TxSlot, n int) {
	if cap(s.Buf) < n+envelopeLen {
		s.Buf = make([]byte, 0, n+envelopeLen+64)
	}
}

// transmit (re)sends a slot's packet with fresh piggy-backed bases and AR.
func (c *Conn) transmit(i int, psn wire.PSN, s *pdl.TxSlot, now time.Duration, retx bool) {
	p := wire.Txn(s.Buf)
	p.SetDataBase(c.rx[dataW].Base())
	p.SetReqBase(c.rx[reqW].Base())
	p.SetAR(retx || c.wantAR())
	s.SentAt = now
	s.Deadline = now + c.backoff(s.Retries)
	if s.State == pdl.SlotHeld {
		s.State = pdl.SlotInflight
	}
	c.armRTO(s.Deadline)
	if c.fcwnd < rue.One {
		c.nextSend = now + c.ipg
	}
	if !c.rx[reqW].HasState() && !c.rx[dataW].HasState() && !c.ackAR {
		if _, armed := c.co.Deadline(); armed {
			c.Stats.AckPiggyback.Inc()
		}
		c.co.Sent()
	}
	c.Stats.TxTxnPackets.Inc()
	if s.Resync {
		c.Stats.TxResync.Inc()
	}
	if c.cfg.TLP && !c.tlpArmed && !c.tlpFired {
		c.rearmTLP(now)
	}
	c.send(s.Buf, c.cfg.FlowLabels[s.Flow])
}

// wantAR is the sender's AR policy [S §9.1.3.1]: every packet while fcwnd
// is at most the threshold, else ARPercent of them.
func (c *Conn) wantAR() bool {
	if c.fcwnd.Int() <= c.cfg.ARFcwndThreshold {
		return true
	}
	c.arN += c.cfg.ARPercent
	if c.arN >= 100 {
		c.arN -= 100
		return true
	}
	return false
}

// backoff is the RTO after n retransmissions: exponential, capped.
func (c *Conn) backoff(n uint8) time.Duration {
	d := c.rto << min(n, 10)
	return min(d, c.cfg.MaxRTO)
}

// retransmit resends an outstanding packet (same PSN) and keeps ORRC.
func (c *Conn) retransmit(i int, psn wire.PSN, s *pdl.TxSlot, now time.Duration) {
	if s.Request && !s.Retx {
		s.Retx = true
		c.tx[i].ORRC++
	}
	c.transmit(i, psn, s, now, true)
}

// toResync replaces an outstanding packet by a Resync with the same PSN and
// RSN [S §9.1.8] and sends it.
func (c *Conn) toResync(i int, psn wire.PSN, s *pdl.TxSlot, code wire.ResyncCode, now time.Duration) {
	s.Resync, s.Code, s.Retries = true, code, 0
	f := c.txnFields(psn, s.RSN)
	f.ResyncCode, f.ResyncPacketType = code, s.Type
	s.Buf = []byte(wire.AppendResync(s.Buf[:0], &f))
	c.retransmit(i, psn, s, now)
}

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
		c.Stats.RetxRTO.Inc()
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
	c.retransmit(i, psn, s, now)
	c.rueEvent(now, s.Flow, rue.EventRetx, 0, 0, 0, wire.TimestampAt(now), 0, 0, 0, false, false, s.Retries, rue.RetxRTO)
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
		if s := w.Slot(psn); c.early(s, now) {
			s.Early++
			c.Stats.RetxEarly.Inc()
			c.retransmit(i, psn, s, now)
			c.rueEvent(now, s.Flow, rue.EventRetx, 0, 0, 0, wire.TimestampAt(now), 0, 0, 0, false, false, s.Early, rue.RetxEarly)
		}
	}
}

// ownRetx resends what the receiver dropped beyond its window (EACK-OWN),
// at most once per RTT per packet [S §9.1.4].
func (c *Conn) ownRetx(i int, now time.Duration) {
	w := &c.tx[i]
	for psn := w.Base(); psn != w.Next(); psn = psn.Add(1) {
		if s := w.Slot(psn); c.early(s, now) {
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
				s.Early < c.cfg.EarlyRetxCap {
				s.Early++
				c.Stats.RetxRACK.Inc()
				c.retransmit(i, psn, s, now)
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
	c.tlpFired = false
	if c.tx[reqW].Outstanding() == 0 && c.tx[dataW].Outstanding() == 0 {
		c.tlpArmed = false
		return
	}
	pto := max(2*c.rtt.Or(c.rto/2)+c.cfg.AckCoalesceTimeout, 50*time.Microsecond)
	c.tlpAt, c.tlpArmed = now+pto, true
}

// tlpProbe retransmits the oldest unreceived packet, once until an ACK
// re-arms the probe.
func (c *Conn) tlpProbe(now time.Duration) {
	c.tlpFired = true
	for i := range c.tx {
		w := &c.tx[i]
		for psn := w.Base(); psn != w.Next(); psn = psn.Add(1) {
			s := w.Slot(psn)
			if s.State == pdl.SlotInflight && !s.Received && s.Early < c.cfg.EarlyRetxCap {
				s.Early++
				c.Stats.RetxTLP.Inc()
				c.retransmit(i, psn, s, now)
				return
			}
		}
	}
}

// txnScan completes pulls whose transaction timeout passed with
// kCmplLocalTO; Pull Data arriving later is acknowledged and discarded.
func (c *Conn) txnScan(now time.Duration) {
	c.txnArmed = false
	for rsn := c.ini.Base; rsn != c.ini.SendNext; rsn = rsn.Add(1) {
		t := c.ini.Slot(rsn)
		if t.Kind != tl.Pull || t.State != tl.ISent {
			continue
		}
		if t.Deadline <= now {
			c.finish(rsn, t, tl.CmplLocalTO, 0, nil)
			continue
		}
		c.armTxn(t.Deadline)
	}
}

// rnrScan redelivers pulls whose RNR delay passed.
func (c *Conn) rnrScan(now time.Duration) {
	c.rnrArmed = false
	for rsn, n := c.tgt.Base, uint32(0); n < c.tgt.Cap(); rsn, n = rsn.Add(1), n+1 {
		s := c.tgt.Slot(rsn)
		if s.State != tl.TRNRWait {
			continue
		}
		if s.Deadline <= now {
			c.hand(rsn, s, s.Payload)
			continue
		}
		c.armRNR(s.Deadline)
	}
}

// finish records an initiator transaction's outcome and completes it: now on
// an unordered connection, in RSN order on an ordered one (holding a copy of
// Pull Data meanwhile).
func (c *Conn) finish(rsn wire.RSN, t *tl.ITxn, st tl.Status, ulp uint8, data []byte) {
	t.State, t.Status, t.ULPCode = tl.IDone, st, ulp
	if t.RxCells > 0 {
		c.ep.res.RxReq.Give(t.RxCells)
		t.RxCells = 0
	}
	if !c.cfg.Ordered {
		c.reportOne(rsn, t, st, ulp, data)
		c.ini.Advance()
		c.ep.xonScan()
		return
	}
	if rsn != c.cplNext {
		t.Data = append(t.Data[:0], data...)
		return
	}
	c.reportOne(rsn, t, st, ulp, data)
	c.cplNext = rsn.Add(1)
	for c.cplNext != c.ini.Next {
		h := c.ini.Slot(c.cplNext)
		if h.State != tl.IDone {
			break
		}
		r := c.cplNext
		c.cplNext = r.Add(1)
		c.reportOne(r, h, h.Status, h.ULPCode, h.Data)
	}
	c.ini.Advance()
	c.ep.xonScan()
}

// reportOne hands one completion to the ULP and frees its Tx resources.
func (c *Conn) reportOne(rsn wire.RSN, t *tl.ITxn, st tl.Status, ulp uint8, data []byte) {
	res := c.ep.res
	if t.Cells > 0 {
		res.TxReq.Give(t.Cells)
		t.Cells = 0
		c.txHeld--
	}
	if t.RxCells > 0 {
		res.RxReq.Give(t.RxCells)
		t.RxCells = 0
	}
	t.State = tl.ICompleted
	c.Stats.Completed.Inc()
	if st != tl.CmplAck {
		c.Stats.CompletedError.Inc()
	}
	if t.Kind == tl.Push {
		data = nil
	}
	c.cpl = Completion{Kind: t.Kind, RSN: rsn, Cookie: t.Cookie, Status: st, ULPCode: ulp, Data: data}
	if u := c.ep.cfg.ULP; u != nil {
		in := c.inCB
		c.inCB = true
		u.OnCompletion(c, &c.cpl)
		c.inCB = in
	}
}
