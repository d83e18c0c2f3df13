package falcon

import (
	"math/bits"
	"time"

	"falconnic/falcon/pdl"
	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// sendAck emits a BACK, or an EACK when the receive state needs one
// [S §9.1.6]. It carries both window bases, t1/t2 of the most recently
// received packet and the rx-buffer level.
func (c *Conn) sendAck(now time.Duration, byTimer bool) {
	switch {
	case byTimer && !c.ackAR:
		c.Stats.AckByTimeout.Inc()
	case c.ackAR:
		c.count(hotAckByAR)
	default:
		c.count(hotAckByCount)
	}
	c.ackAR = false
	c.co.Sent()
	f := &c.ackf
	f.CID = c.cfg.DCID
	f.DataBase, f.ReqBase = c.rx[dataW].Base(), c.rx[reqW].Base()
	f.T1, f.T2 = c.lastT1, c.lastT2
	f.CC.HopCount, f.CC.RxBufferLevel, f.CC.ECNCount = c.lastHops, c.ep.rxBufferLevel(), c.ecnCount
	f.CC.RUEValue = c.flows[0].ccMetadata & (1<<22 - 1)
	f.OWNRequest, f.OWNData = c.rx[reqW].OWN(), c.rx[dataW].OWN()
	eack := c.rx[reqW].NeedsEACK(true) || c.rx[dataW].NeedsEACK(true)
	var pkt []byte
	if eack {
		f.Req = wire.NewBitmap(wire.ReqBitmapBits)
		f.DataAck = wire.NewBitmap(wire.DataBitmapBits)
		f.DataRx = wire.NewBitmap(wire.DataBitmapBits)
		fill(&f.Req, c.rx[reqW].AckBits())
		fill(&f.DataAck, c.rx[dataW].AckBits())
		fill(&f.DataRx, c.rx[dataW].RxBits())
		pkt = wire.AppendEACK(c.ep.ctl[:0], f)
		c.rx[reqW].ClearOWN()
		c.rx[dataW].ClearOWN()
		c.Stats.TxEACK.Inc()
	} else {
		pkt = wire.AppendBACK(c.ep.ctl[:0], f)
		c.count(hotTxBACK)
	}
	// Per flow [digest §7]: the other flows with unreported packets get
	// the same ACK with their own latest packet's timestamps, on their
	// own label, so each flow's path is timed by its own packets.
	latest := c.rxFlow & 3
	for i := range c.ackFlows {
		a := &c.ackFlows[i]
		if !a.pending {
			continue
		}
		a.pending = false
		if uint32(i) == latest || c.cfg.AckPerConn {
			continue
		}
		v := wire.Ack(pkt)
		v.SetT1(a.t1)
		v.SetT2(a.t2)
		c.Stats.AckPerFlow.Inc()
		c.send(pkt, a.label)
	}
	v := wire.Ack(pkt)
	v.SetT1(c.lastT1)
	v.SetT2(c.lastT2)
	c.send(pkt, c.rxFlow)
}

func fill(dst *wire.Bitmap, src pdl.Bits) {
	for w := 0; w < 2; w++ {
		for x := src[w]; x != 0; x &= x - 1 {
			dst.Set(w*64 + bits.TrailingZeros64(x))
		}
	}
}

// sendNack emits a NACK for psn of window i [S §7.8].
func (c *Conn) sendNack(now time.Duration, i int, psn wire.PSN, code wire.NackCode, ulp, rnr uint8) {
	f := wire.NackFields{CID: c.cfg.DCID, DataBase: c.rx[dataW].Base(), ReqBase: c.rx[reqW].Base(),
		T1: c.lastT1, T2: c.lastT2, CC: wire.CCInfo{HopCount: c.lastHops, RxBufferLevel: c.ep.rxBufferLevel(), ECNCount: c.ecnCount},
		NackPSN: psn, Code: code, RNRTimeoutCode: rnr, RequestWindow: i == reqW, ULPCode: ulp}
	c.Stats.TxNACK.Inc()
	if !c.rx[reqW].NeedsEACK(false) && !c.rx[dataW].NeedsEACK(false) {
		c.ackAR = false
		c.co.Sent() // the NACK carried both bases: all the state a BACK would
	}
	c.send(wire.AppendNACK(c.ep.ctl[:0], &f), c.rxFlow)
}

// cumAck applies the peer's cumulative receiver bases (W2/W3) to our TX
// windows. A standalone ACK/NACK whose base is behind ours is stale and
// discarded whole [S §9.2.3]; piggy-backed bases behind ours (reordered
// packets) are ignored silently. It reports whether the ACK was accepted.
func (c *Conn) cumAck(dbase, rbase wire.PSN, now time.Duration, standalone bool) bool {
	nb := [2]wire.PSN{rbase, dbase}
	use := [2]bool{true, true}
	for i := range nb {
		w := &c.tx[i]
		d := nb[i].Sub(w.Base())
		switch {
		case d < 0:
			if standalone {
				c.Stats.RxStaleAck.Inc()
				return false
			}
			use[i] = false
		case uint32(d) > w.Outstanding():
			c.Stats.RxAckBeyondNext.Inc()
			if standalone {
				return false
			}
			use[i] = false
		case d == 0:
			use[i] = false
		}
	}
	for i := range nb {
		if !use[i] {
			continue
		}
		w := &c.tx[i]
		for psn := w.Base(); psn != nb[i] && w.Contains(psn); psn = psn.Add(1) {
			if s := w.Slot(psn); w.MarkAcked(s) {
				c.acked(i, psn, s, now)
			}
		}
		w.Advance()
	}
	return true
}

// acked runs when the peer acknowledged an outstanding packet.
func (c *Conn) acked(i int, psn wire.PSN, s *pdl.TxSlot, now time.Duration) {
	f := &c.flows[s.Flow]
	f.acked++
	if f.undoArmed && f.undoPSN == psn && int(f.undoWin) == i {
		f.undoAcked = true
	}
	c.landed(s.Flow)
	if s.SentAt > c.rackXmit {
		c.rackXmit = s.SentAt
	}
	rsn := s.RSN
	var lent []byte
	switch {
	case s.Lent: // acknowledged: no packet is sent from a PushFrame's buffer again
		lent, s.Buf, s.Spare, s.Lent, s.Shared = s.Buf, s.Spare, nil, false, false
	case s.Mem != nil: // nor from a shared frame buffer: the slot's reference goes
		s.Mem.Release()
		s.Buf, s.Spare, s.Mem, s.Shared = s.Spare, nil, nil, false
	}
	switch s.Type {
	case wire.TypePushData, wire.TypePullRequest:
		if !c.ini.Contains(rsn) {
			return
		}
		t := c.ini.Slot(rsn)
		if t.State != tl.ISent {
			return
		}
		t.Lent = lent
		switch {
		case s.Resync:
			c.finish(rsn, t, t.Status, t.ULPCode, nil)
		case s.Type == wire.TypePushData:
			c.finish(rsn, t, tl.CmplAck, 0, nil)
		default:
			t.ReqAckd = true
		}
	case wire.TypePullData:
		if fits, _ := c.tgt.Fits(rsn); !fits {
			return
		}
		t := c.tgt.Slot(rsn)
		if t.State == tl.TResponding && t.DataPSN == psn {
			c.releaseTarget(t)
			t.State = tl.TFinished
			c.tgt.Advance()
		}
	}
}

// onAck processes a BACK or EACK.
func (c *Conn) onAck(a wire.Ack, iv wire.Timestamp, now time.Duration) {
	eack := a.IsEACK()
	if eack {
		c.Stats.RxEACK.Inc()
	} else {
		c.count(hotRxBACK)
	}
	if !c.cumAck(a.DataBase(), a.ReqBase(), now, true) {
		return
	}
	t1, t2 := c.delaySample(a.T1(), a.T2(), now)
	t4 := wire.TimestampAt(c.ep.rxTime(now))
	rtt := t4.Sub(t1)
	if (t1 != 0 || t2 != 0) && rtt > 0 && rtt < time.Second {
		c.rtt.Sample(rtt)
	}
	drop := false
	if eack {
		drop = c.onEACK(a, now)
	}
	c.rearmTLP(now)
	c.rueEvent(now, c.flowOf(c.rxFlow), rue.EventACK, t1, t2, iv, t4, a.RxBufferLevel(), a.HopCount(), a.RUEValue(), 0, eack, drop, 0, rue.RetxRTO)
	c.judgeTimeouts(a.T1(), now)
}

// delaySample returns an ACK's or NACK's timestamps t1 (the newest packet's
// send time, echoed) and t2 (its arrival at the peer), or zeros — no
// sample — when that packet left before the host last resumed this
// endpoint from a stall (Endpoint.Resumed): its round trip then measured
// the host not running the endpoint, not the fabric nor the peer. As
// Resumed keeps a stall from firing loss timers, this keeps it from
// cutting the window and from inflating the RTO. A stall is judged for a
// second after it (the RTT estimate's bound), so the timestamps, which
// wrap after 9 minutes, compare safely.
func (c *Conn) delaySample(t1, t2 wire.Timestamp, now time.Duration) (wire.Timestamp, wire.Timestamp) {
	e := c.ep
	if !e.stalled || t1 == 0 && t2 == 0 {
		return t1, t2
	}
	if now-e.stallEnd >= time.Second {
		e.stalled = false
		return t1, t2
	}
	if t1.Sub(wire.TimestampAt(e.stallEnd)) >= 0 {
		return t1, t2
	}
	c.Stats.DelayStalled.Inc()
	return 0, 0
}

// judgeTimeouts ends each RTO episode whose first resent packet is now
// acknowledged. t1 is the ACK's: the send time of the newest packet the
// peer had received when it acknowledged. If that left before the resend,
// the ACK answers the original, which was not lost: the timeouts were
// spurious (Eifel detection, RFC 3522; the links of one daemon and the UDP
// fabric keep a flow's packets in order, and a reordering that fooled it
// would only undo a cut). The RUE then gets the window from before them
// (EventUndo). An ACK without timestamps, or a piggybacked one, proves
// nothing: the next standalone ACK judges, with a later t1.
func (c *Conn) judgeTimeouts(t1 wire.Timestamp, now time.Duration) {
	for fl := range c.flows[:c.cfg.Flows] {
		f := &c.flows[fl]
		if !f.undoArmed || !f.undoAcked {
			continue
		}
		f.undoArmed = false
		if t1 == 0 || t1.Sub(wire.TimestampAt(f.undoAt)) >= 0 {
			c.Stats.RTOGenuine.Inc()
			continue
		}
		c.Stats.RTOSpurious.Inc()
		c.rueEvent(now, uint8(fl), rue.EventUndo, 0, 0, 0, wire.TimestampAt(now), 0, 0, 0, 0, false, false, 0, rue.RetxRTO)
	}
}

// onEACK merges the EACK's bitmaps into the TX windows, then runs early
// retransmission by OOO distance, EACK-OWN and RACK [S §9.1.4, §9.2.3]. It
// reports whether the EACK showed a hole.
func (c *Conn) onEACK(a wire.Ack, now time.Duration) bool {
	var req, dack, drx wire.Bitmap
	a.ReqBitmap(&req)
	a.DataAckBitmap(&dack)
	a.DataRxBitmap(&drx)
	rb, db := a.ReqBase(), a.DataBase()
	c.mergeBitmap(reqW, rb, &req, true, now)
	c.mergeBitmap(dataW, db, &dack, true, now)
	c.mergeBitmap(dataW, db, &drx, false, now)
	c.tx[reqW].Advance()
	c.tx[dataW].Advance()
	hole := false
	if h := req.Highest(); h >= 0 {
		hole = true
		c.oooRetx(reqW, rb, h, now)
	}
	if h := drx.Highest(); h >= 0 {
		hole = hole || drx.HasHole()
		c.oooRetx(dataW, db, h, now)
	}
	if a.OWNRequest() {
		c.ownRetx(reqW, now)
	}
	if a.OWNData() {
		c.ownRetx(dataW, now)
	}
	if c.cfg.RACK {
		c.rackScan(now)
	}
	return hole
}

func (c *Conn) mergeBitmap(i int, base wire.PSN, b *wire.Bitmap, ack bool, now time.Duration) {
	w := &c.tx[i]
	for n := 0; n < b.Size(); n++ {
		if !b.Test(n) {
			continue
		}
		psn := base.Add(uint32(n))
		if !w.Contains(psn) {
			continue
		}
		s := w.Slot(psn)
		if ack {
			if w.MarkAcked(s) {
				c.acked(i, psn, s, now)
			}
		} else {
			w.MarkReceived(s)
		}
	}
}

// onNack processes a NACK [S §9.2.4].
func (c *Conn) onNack(n wire.Nack, iv wire.Timestamp, now time.Duration) {
	c.Stats.RxNACK.Inc()
	if !c.cumAck(n.DataBase(), n.ReqBase(), now, true) {
		return
	}
	i := windowIndex(n.Window())
	psn, code := n.NackPSN(), n.Code()
	w := &c.tx[i]
	if !w.Contains(psn) {
		c.Stats.RxStaleNack.Inc()
		return
	}
	s := w.Slot(psn)
	if s.State == pdl.SlotAcked || s.State == pdl.SlotFree {
		c.Stats.RxStaleNack.Inc()
		return
	}
	h, ok := nackHandlers[code]
	if !ok {
		c.Stats.RxNackBadCode.Inc()
		return
	}
	t1, t2 := c.delaySample(n.T1(), n.T2(), now)
	c.rueEvent(now, c.flowOf(c.rxFlow), rue.EventNACK, t1, t2, iv, wire.TimestampAt(c.ep.rxTime(now)), n.RxBufferLevel(), n.HopCount(), n.RUEValue(), uint8(code), false, false, 0, rue.RetxRTO)
	h(c, n, i, psn, s, now)
}

// nackHandlers is the transmitter's reaction per NACK code [S §9.2.4, §11].
var nackHandlers = map[wire.NackCode]func(*Conn, wire.Nack, int, wire.PSN, *pdl.TxSlot, time.Duration){
	wire.NackInsufficientResources: (*Conn).nackResource,
	wire.NackRNR:                   (*Conn).nackRNR,
	wire.NackXLR:                   (*Conn).nackResync,
	wire.NackCIE:                   (*Conn).nackResync,
	wire.NackNRE:                   (*Conn).nackResync,
	wire.NackInvalidCID:            (*Conn).nackResync,
	wire.NackOutOfWindow:           (*Conn).nackOutOfWindow,
}

// nackResource: the receiver had no room; retransmit after an RTO (the RUE
// heard about it and may cut ncwnd).
func (c *Conn) nackResource(n wire.Nack, i int, psn wire.PSN, s *pdl.TxSlot, now time.Duration) {
	c.tx[i].ClearReceived(s)
	s.Refused, s.Retries = true, 0 // the NACK proves the path works: no backoff
	s.Deadline = now + c.rto
	c.armRTO(s.Deadline)
}

// nackRNR: the target ULP was not ready; resend after max(RTO, RNR timeout).
func (c *Conn) nackRNR(n wire.Nack, i int, psn wire.PSN, s *pdl.TxSlot, now time.Duration) {
	c.Stats.RNRWaits.Inc()
	c.tx[i].ClearReceived(s)
	s.Refused, s.Retries = true, 0
	d := max(c.rto, n.RNRTimeout())
	s.Deadline = now + d
	c.armRTO(s.Deadline)
}

// nackResyncTable maps a NACK code to the initiator status and Resync code.
var nackResyncTable = map[wire.NackCode]struct {
	status tl.Status
	code   wire.ResyncCode
}{
	wire.NackXLR:        {tl.CmplRemoteErr, wire.ResyncRemoteXLR},
	wire.NackCIE:        {tl.CmplTargetNackCIE, wire.ResyncTargetCIE},
	wire.NackNRE:        {tl.CmplTargetNackNRE, wire.ResyncTargetNRE},
	wire.NackInvalidCID: {tl.CmplTargetNackCID, wire.ResyncTargetInvalidCID},
}

// nackResync: the packet will never be accepted; fill its PSN with a Resync
// and complete the transaction with the error once the Resync is acked.
func (c *Conn) nackResync(n wire.Nack, i int, psn wire.PSN, s *pdl.TxSlot, now time.Duration) {
	if s.Resync {
		c.Stats.RxDupNack.Inc()
		return
	}
	m := nackResyncTable[n.Code()]
	if (s.Type == wire.TypePushData || s.Type == wire.TypePullRequest) && c.ini.Contains(s.RSN) {
		t := c.ini.Slot(s.RSN)
		t.Status, t.ULPCode = m.status, n.ULPCode()
	}
	c.toResync(i, psn, s, m.code, now)
}

// nackOutOfWindow: a Go-Back-N receiver wants everything from psn again;
// a selective-repeat peer (Isekai's window-drop NACK) gets that packet again.
func (c *Conn) nackOutOfWindow(n wire.Nack, i int, psn wire.PSN, s *pdl.TxSlot, now time.Duration) {
	if c.cfg.GoBackN {
		c.goBack(i, psn, now)
		return
	}
	c.Stats.RetxNack.Inc()
	c.retransmit(i, psn, s, now)
}
