package falcon

import (
	"time"

	"falconnic/falcon/pdl"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// receive runs the per-connection part of the receive pipeline: the replay
// check on the IV timestamp, then ACK, NACK or transaction processing.
func (c *Conn) receive(p wire.Packet, iv wire.Timestamp, flow uint32, mark Mark, now time.Duration) {
	if !c.remoteSet {
		// No CM time exchange: adopt the peer's clock from its first frame.
		c.remote, c.remoteAt, c.remoteSet = iv, now, true
	}
	// The peer's time now is at least its newest IV plus the time elapsed
	// here since (same tick rate), so an idle connection neither wraps the
	// 32-bit comparison nor lets a stale frame in after a long pause.
	proj := uint32(c.remote) + uint32(wire.TimestampAt(now-c.remoteAt))
	if int32(uint32(iv)-(proj-c.ep.replayMargin)) <= 0 {
		c.Stats.RxReplay.Inc()
		return
	}
	if lead := uint32(iv) - proj; int32(lead) > 0 && lead > c.ep.replayLead {
		c.Stats.RxIVAhead.Inc()
		return
	}
	if int32(uint32(iv)-uint32(c.remote)) > 0 {
		c.remote, c.remoteAt = iv, now
	}
	c.rxFlow = flow
	c.rxMark = mark
	switch p.Type() {
	case wire.TypeBACK, wire.TypeEACK:
		c.onAck(p.Ack(), iv, now)
	case wire.TypeNACK:
		c.onNack(p.Nack(), iv, now)
	default:
		c.onTxn(p.Txn(), iv, now)
	}
	c.flush(now)
}

// onTxn processes a transaction packet: piggy-backed ACK, sliding-window
// verdict, then admission [S §9.2.2.4].
func (c *Conn) onTxn(t wire.Txn, iv wire.Timestamp, now time.Duration) {
	c.count(hotRxTxnPackets)
	typ := t.Type()
	w := typ.Window()
	if typ == wire.TypeResync {
		w = t.ResyncWindow()
	}
	i := windowIndex(w)
	c.cumAck(t.DataBase(), t.ReqBase(), now, false)
	if c.dead {
		return
	}
	psn := t.PSN()
	rw := &c.rx[i]
	v := rw.Classify(psn)
	c.lastT1, c.lastT2 = iv, wire.TimestampAt(c.ep.rxTime(now))
	af := &c.ackFlows[c.rxFlow&3]
	af.t1, af.t2, af.label, af.pending = c.lastT1, c.lastT2, c.rxFlow, true
	c.lastHops = min(c.rxMark.Hops, wire.MaxHopCount)
	if c.rxMark.ECN {
		c.ecnCount = (c.ecnCount + 1) & wire.MaxECNCount
	}
	if c.cfg.GoBackN && v == pdl.VerdictNew {
		if exp := rw.NextExpected(); psn != exp {
			c.Stats.RxGBNOutOfOrder.Inc()
			if !c.gbnOK[i] || c.gbnExp[i] != exp {
				c.gbnOK[i], c.gbnExp[i] = true, exp
				c.sendNack(now, i, exp, wire.NackOutOfWindow, 0, 0)
			}
			return
		}
	}
	switch v {
	case pdl.VerdictOld:
		c.Stats.RxDupOld.Inc()
		c.co.Note(now, 2)
	case pdl.VerdictBeyond:
		c.Stats.RxOutOfWindow.Inc()
		rw.SetOWN()
		c.co.Note(now, 2)
	case pdl.VerdictDupAcked:
		if typ == wire.TypeResync {
			c.Stats.RxDupResync.Inc()
		} else {
			c.Stats.RxDupAcked.Inc()
		}
		c.co.Note(now, 2)
		if t.AR() {
			c.wantAck(now)
		}
	case pdl.VerdictDupRx:
		if typ == wire.TypeResync {
			c.admitResync(t, i, now)
			return
		}
		if m, ok := rw.Recall(psn); ok {
			c.Stats.RxDupNacked.Inc()
			c.sendNack(now, i, psn, m.Code, m.ULP, m.RNR)
			return
		}
		c.Stats.RxDupPending.Inc()
		c.co.Note(now, 2)
	case pdl.VerdictNew:
		exp := rw.NextExpected()
		admitters[typ](c, t, i, now)
		if c.cfg.AckHoles && (psn != exp || rw.NextExpected().Sub(exp) > 1) {
			// Beyond a hole, or filling one: the sender learns of the
			// loss, or of its repair, one coalescing interval sooner.
			c.Stats.AckByHole.Inc()
			c.co.Request(now)
		}
	}
}

// admitters is the admission step per transaction packet type.
var admitters = [16]func(*Conn, wire.Txn, int, time.Duration){
	wire.TypePullRequest: (*Conn).admitPullRequest,
	wire.TypePushData:    (*Conn).admitPush,
	wire.TypePullData:    (*Conn).admitPullData,
	wire.TypeResync:      (*Conn).admitResync,
}

// targetSlot finds room for a new request's RSN; false means the packet is
// refused (a resource NACK was sent, or it was dropped as a bad RSN).
func (c *Conn) targetSlot(t wire.Txn, i int, now time.Duration) bool {
	fits, old := c.tgt.Fits(t.RSN())
	if old || (fits && c.tgt.Slot(t.RSN()).State != tl.TFree) {
		c.Stats.RxBadRSN.Inc()
		return false
	}
	if !fits {
		c.Stats.RxNoResource.Inc()
		c.sendNack(now, i, t.PSN(), wire.NackInsufficientResources, 0, 0)
		return false
	}
	return true
}

// hol reports whether rsn is the head-of-line request of an ordered
// connection (it may use the HoL reserve, deadlock rule CR#3).
func (c *Conn) hol(rsn wire.RSN) bool { return c.cfg.Ordered && rsn == c.tgt.NextDeliver }

func (c *Conn) admitPush(t wire.Txn, i int, now time.Duration) {
	if !c.targetSlot(t, i, now) {
		return
	}
	rsn, psn, payload := t.RSN(), t.PSN(), t.Payload()
	if len(payload) > c.cfg.MTU {
		c.Stats.RxTooLong.Inc()
		return
	}
	cells := c.ep.res.Cells(len(payload))
	if !c.ep.res.RxNet.Take(cells, c.hol(rsn)) {
		c.Stats.RxNoResource.Inc()
		c.sendNack(now, i, psn, wire.NackInsufficientResources, 0, 0)
		return
	}
	s := c.tgt.Claim(rsn, tl.Push)
	s.PSN, s.Cells, s.AR, s.Length = psn, cells, t.AR(), uint32(len(payload))
	c.rx[i].Receive(psn)
	c.co.Note(now, 1)
	c.deliver(rsn, s, payload)
}

func (c *Conn) admitPullRequest(t wire.Txn, i int, now time.Duration) {
	if !c.targetSlot(t, i, now) {
		return
	}
	rsn, psn := t.RSN(), t.PSN()
	if len(t.Payload()) > c.cfg.MTU {
		c.Stats.RxTooLong.Inc()
		return
	}
	if !c.ep.res.RxNet.Take(1, c.hol(rsn)) {
		c.Stats.RxNoResource.Inc()
		c.sendNack(now, i, psn, wire.NackInsufficientResources, 0, 0)
		return
	}
	s := c.tgt.Claim(rsn, tl.Pull)
	s.PSN, s.Cells, s.Length = psn, 1, uint32(t.RequestLength())
	c.rx[i].Ack(psn)
	c.co.Note(now, 2)
	if t.AR() {
		c.wantAck(now)
	}
	hdr := t.Payload()
	if len(hdr) > 0 {
		// Kept for RNR redelivery and PullData reuses the buffer after.
		s.Payload = append(s.Payload[:0], hdr...)
	}
	c.deliver(rsn, s, hdr)
}

// admitPullData completes a pull at the initiator. Pull Data is never refused
// for resources: its Rx space was pre-allocated by the pull [S §8.2].
func (c *Conn) admitPullData(t wire.Txn, i int, now time.Duration) {
	rsn, psn := t.RSN(), t.PSN()
	c.rx[i].Ack(psn)
	c.co.Note(now, 2)
	if t.AR() {
		c.wantAck(now)
	}
	if !c.ini.Contains(rsn) {
		c.Stats.RxLatePullData.Inc()
		return
	}
	s := c.ini.Slot(rsn)
	if s.Kind != tl.Pull || s.State != tl.ISent {
		c.Stats.RxLatePullData.Inc()
		return
	}
	data := t.Payload()
	st := tl.CmplAck
	if uint32(len(data)) > s.Length {
		c.Stats.RxPullTooLong.Inc()
		st = tl.CmplOpErr
	}
	c.finish(rsn, s, st, 0, data)
}

// admitResync fills a PSN hole [S §9.2.5]: received ≡ acked, ACK at once; the
// transaction layer learns that the original will never arrive.
func (c *Conn) admitResync(t wire.Txn, i int, now time.Duration) {
	rsn, psn := t.RSN(), t.PSN()
	c.Stats.RxResync.Inc()
	c.rx[i].Ack(psn)
	c.wantAck(now)
	switch t.ResyncPacketType() {
	case wire.TypePushData, wire.TypePullRequest:
		fits, _ := c.tgt.Fits(rsn)
		if !fits {
			return
		}
		if s := c.tgt.Slot(rsn); s.State == tl.TFree {
			s = c.tgt.Claim(rsn, tl.Push)
			s.Void, s.State = true, tl.TFinished
			c.tgt.Advance()
			if c.cfg.Ordered {
				c.deliverHeld()
			}
		}
	case wire.TypePullData:
		if c.ini.Contains(rsn) {
			if s := c.ini.Slot(rsn); s.Kind == tl.Pull && s.State == tl.ISent {
				c.finish(rsn, s, tl.CmplRemoteErr, 0, nil)
			}
		}
	}
}

// deliver hands a new request to the ULP now (unordered, or next in RSN
// order) or holds it (a copy) until the RSNs before it are delivered.
func (c *Conn) deliver(rsn wire.RSN, s *tl.TTxn, payload []byte) {
	if !c.cfg.Ordered {
		c.hand(rsn, s, payload)
		return
	}
	if rsn != c.tgt.NextDeliver {
		s.Payload = append(s.Payload[:0], payload...)
		return
	}
	c.tgt.NextDeliver = rsn.Add(1)
	c.hand(rsn, s, payload)
	c.deliverHeld()
}

// deliverHeld delivers held requests of an ordered connection in RSN order,
// skipping those already delivered or voided by a Resync.
func (c *Conn) deliverHeld() {
	for !c.dead {
		rsn := c.tgt.NextDeliver
		if uint32(rsn.Sub(c.tgt.Base)) >= c.tgt.Cap() {
			return
		}
		s := c.tgt.Slot(rsn)
		if s.State == tl.TFree {
			return
		}
		c.tgt.NextDeliver = rsn.Add(1)
		if s.State == tl.TReceived {
			c.hand(rsn, s, s.Payload)
		}
	}
}

func (c *Conn) hand(rsn wire.RSN, s *tl.TTxn, payload []byte) {
	s.State = tl.TDelivered
	if s.Kind == tl.Pull && c.cfg.PullReclaim > 0 {
		s.Deadline = c.ep.now() + c.cfg.PullReclaim
		c.armRNR(s.Deadline)
	}
	c.count(hotDelivered)
	r := &c.req // field by field, as txnFields
	r.Kind, r.RSN, r.Payload, r.Length = s.Kind, rsn, payload, s.Length
	if u := c.ep.cfg.ULP; u != nil {
		in := c.inCB
		c.inCB = true
		u.OnRequest(c, &c.req)
		c.inCB = in
	}
}
