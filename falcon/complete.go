package falcon

import (
	"time"

	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

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

// rnrScan runs the target's pull timers: it redelivers pulls whose RNR
// delay passed and reclaims delivered pulls the ULP never answered.
func (c *Conn) rnrScan(now time.Duration) {
	c.rnrArmed = false
	reclaimed := false
	for rsn, n := c.tgt.Base, uint32(0); n < c.tgt.Cap(); rsn, n = rsn.Add(1), n+1 {
		s := c.tgt.Slot(rsn)
		waiting := s.State == tl.TRNRWait
		if !waiting && (s.State != tl.TDelivered || s.Kind != tl.Pull || c.cfg.PullReclaim <= 0) {
			continue
		}
		switch {
		case s.Deadline > now:
			c.armRNR(s.Deadline)
		case waiting:
			c.hand(rsn, s, s.Payload)
		default:
			c.Stats.PullReclaimed.Inc()
			c.releaseTarget(s)
			s.State = tl.TFinished
			reclaimed = true
		}
	}
	if reclaimed {
		c.tgt.Advance()
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
// The transaction's slot is free before the callback runs when it is at
// the table's base (always, on an ordered connection), so a ULP that
// submits from OnCompletion finds room for it rather than ErrXoff and an
// OnXon right after; data (a held copy in the slot) stays valid during
// the callback, since nothing written there can complete before it ends.
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
	c.count(hotCompleted)
	if st != tl.CmplAck {
		c.Stats.CompletedError.Inc()
	}
	if t.Kind == tl.Push {
		data = nil
	}
	cpl := &c.cpl // field by field, as txnFields
	cpl.Kind, cpl.RSN, cpl.Cookie, cpl.Status, cpl.ULPCode = t.Kind, rsn, t.Cookie, st, ulp
	cpl.Data, cpl.Frame = data, t.Lent
	t.Lent = nil
	if rsn == c.ini.Base {
		c.ini.Advance()
	}
	if u := c.ep.cfg.ULP; u != nil {
		in := c.inCB
		c.inCB = true
		u.OnCompletion(c, &c.cpl)
		c.inCB = in
	}
}
