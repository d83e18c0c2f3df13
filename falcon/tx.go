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
	} else if out >= min(c.fcwnd.Int(), rxWindowSize[i]) &&
		(!c.cfg.GateInFlight || out >= rxWindowSize[i] || w.Unsettled() >= c.fcwnd.Int()) {
		return false
	}
	if request && uint32(w.ORC) >= c.ncwnd {
		return false
	}
	return true
}

// txnFields fills the zeroed f with the header fields of a transaction
// packet psn/rsn. Field by field: a struct literal assigned through a
// pointer is built in a temporary and copied, and the copy's wide loads
// of the temporary's narrow stores stall (a cost per packet).
func (c *Conn) txnFields(f *wire.TxnFields, psn wire.PSN, rsn wire.RSN) {
	f.CID, f.DestFunction, f.Protocol, f.PSN, f.RSN = c.cfg.DCID, c.cfg.DestFn, c.cfg.Protocol, psn, rsn
}

// sendRequest gives an initiator transaction its PSN and sends it.
func (c *Conn) sendRequest(rsn wire.RSN, t *tl.ITxn, i int, now time.Duration) {
	w := &c.tx[i]
	psn, s := w.Alloc()
	s.RSN, s.Request, s.FirstAt, s.Flow = rsn, true, now, c.pickFlow()
	w.ORC++
	var f wire.TxnFields
	c.txnFields(&f, psn, rsn)
	switch {
	case t.Kind == tl.Push && t.Lent != nil:
		s.Type = wire.TypePushData
		frame := t.Lent
		s.Spare, s.Lent, t.Lent = s.Buf[:0], true, nil
		_, s.Buf = buildInPlace(frame, nil, wire.TypePushData, &f)
	case t.Kind == tl.Push && t.Mem != nil: // the slot takes the shared buffer over, its own parked
		s.Type = wire.TypePushData
		s.Spare, s.Mem = s.Buf[:0], t.Mem
		_, s.Buf = buildInPlace(t.Shared, nil, wire.TypePushData, &f)
		t.Shared, t.Mem = nil, nil
	case t.Kind == tl.Push:
		s.Type = wire.TypePushData
		t.Frame, s.Buf = buildInPlace(t.Frame, s.Buf, wire.TypePushData, &f)
	default:
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
	var f wire.TxnFields
	c.txnFields(&f, psn, rsn)
	if t.Mem != nil { // the slot takes the shared buffer over, its own parked
		s.Spare, s.Mem = s.Buf[:0], t.Mem
		_, s.Buf = buildInPlace(t.Shared, nil, wire.TypePullData, &f)
		t.Shared, t.Mem = nil, nil
	} else {
		t.Frame, s.Buf = buildInPlace(t.Frame, s.Buf, wire.TypePullData, &f)
	}
	t.DataPSN = psn
	c.transmit(dataW, psn, s, now, false)
}

// buildInPlace writes the header of a typ packet into the room gather left
// at the front of frame and returns the slot's old buffer (emptied, for the
// transaction's next use) and the packet, which becomes the slot's.
func buildInPlace(frame, slotBuf []byte, typ wire.PacketType, f *wire.TxnFields) (nextFrame, pkt []byte) {
	n := len(frame) - typ.HeaderLen()
	return slotBuf[:0], []byte(wire.AppendTxnHeader(frame[:0], typ, f, n))
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
	s.Resumed = false
	if s.State == pdl.SlotHeld {
		s.State = pdl.SlotInflight
	}
	c.armRTO(s.Deadline)
	if c.fcwnd < rue.One {
		c.nextSend = now + c.ipg
	}
	if !c.rx[reqW].HasState() && !c.rx[dataW].HasState() && !c.ackAR {
		if _, armed := c.co.Deadline(); armed {
			c.count(hotAckPiggyback)
		}
		c.co.Sent()
	}
	c.count(hotTxTxnPackets)
	if s.Resync {
		c.Stats.TxResync.Inc()
	}
	if c.cfg.TLP && !c.tlpArmed && !c.tlpFired {
		c.rearmTLP(now)
	}
	l := c.link()
	ref := false
	if (s.Lent || s.Mem != nil) && !retx { // only a first transmission goes by reference
		_, ref = l.(RefLink)
		s.Shared = ref
	}
	c.ep.sendOn(l, s.Buf, c.cfg.FlowLabels[s.Flow], ref, s.Mem)
}

// private gives a slot whose buffer went to a RefLink by reference a copy
// of its own to rewrite (a resend's header, a Resync): the receiver may
// still be reading the shared one, which the ULP therefore never gets
// back; a shared frame buffer's reference is let go.
func (c *Conn) private(s *pdl.TxSlot) {
	if !s.Shared {
		return
	}
	s.Buf = append(s.Spare[:0], s.Buf...)
	if s.Mem != nil {
		s.Mem.Release()
	}
	s.Spare, s.Lent, s.Shared, s.Mem = nil, false, false, nil
	c.Stats.SharedCopied.Inc()
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
	c.private(s)
	if s.Request && !s.Retx {
		s.Retx = true
		c.tx[i].ORRC++
	}
	c.transmit(i, psn, s, now, true)
}

// toResync replaces an outstanding packet by a Resync with the same PSN and
// RSN [S §9.1.8] and sends it.
func (c *Conn) toResync(i int, psn wire.PSN, s *pdl.TxSlot, code wire.ResyncCode, now time.Duration) {
	c.private(s)
	s.Resync, s.Code, s.Retries = true, code, 0
	var f wire.TxnFields
	c.txnFields(&f, psn, s.RSN)
	f.ResyncCode, f.ResyncPacketType = code, s.Type
	s.Buf = []byte(wire.AppendResync(s.Buf[:0], &f))
	c.retransmit(i, psn, s, now)
}
