package falcon

import (
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
)

// rueEventTimeout bounds how long an unanswered event blocks the next one
// (an asynchronous RUE may drop events when its queue is full).
const rueEventTimeout = time.Millisecond

// rueEvent posts a congestion-control event for one flow [S §10.6]. At most one
// event per flow is outstanding; while one is, acked counts accumulate and
// further events are folded in (Isekai's rule).
func (c *Conn) rueEvent(now time.Duration, flow uint8, typ rue.EventType, t1, t2, t3, t4 wire.Timestamp, level, hops uint8,
	meta uint32, nack uint8, eack, drop bool, retx uint8, reason rue.RetxReason) {
	eng := c.ep.cfg.RUE
	if eng == nil {
		return
	}
	f := &c.flows[flow]
	if f.pending && now-f.evAt < rueEventTimeout {
		c.Stats.RUESuppressed.Inc()
		return
	}
	f.pending, f.evAt = true, now
	c.Stats.RUEEvents.Inc()
	acked := f.acked
	f.acked = 0
	ev := &c.ev // zeroed, then field by field, as txnFields
	*ev = rue.Event{}
	ev.Conn, ev.Flow, ev.Type = c.cfg.SCID, flow, typ
	ev.T1, ev.T2, ev.T3, ev.T4 = uint32(t1), uint32(t2), uint32(t3), uint32(t4)
	ev.RetxCount, ev.RetxReason, ev.NackCode, ev.ForwardHop, ev.RxBufLevel = retx, reason, nack, hops, level
	ev.CCMetadata, ev.NumAcked, ev.EACK, ev.EACKDrop = meta, acked, eack, drop
	ev.ConnFcwnd, ev.Fcwnd, ev.Ncwnd, ev.IPG, ev.RTO = c.fcwnd, f.fcwnd, c.ncwnd, c.ipg, c.rto
	ev.FabricMarker, ev.NICMarker, ev.NcwndUp = f.fabricMarker, c.nicMark, c.ncwndUp
	ev.DelayState, ev.RTTState, ev.BaseDelay, ev.CCOpaque, ev.PLBState = f.delayState, f.rttState, f.baseDelay, c.ccOpaque, f.plbState
	ev.Now = uint32(wire.TimestampAt(now)) & (1<<24 - 1)
	if typ == rue.EventUndo {
		ev.UndoFcwnd = f.undoFcwnd
	}
	if r, ok := eng.Handle(ev); ok {
		c.applyRUE(&r)
	}
}

// applyRUE installs a response's values: they apply to pending and future
// packets at once.
func (c *Conn) applyRUE(r *rue.Response) {
	c.Stats.RUEResponses.Inc()
	f := &c.flows[r.Flow%uint8(c.cfg.Flows)]
	f.pending = false
	f.fabricMarker, c.nicMark, c.ncwndUp = r.FabricMarker, r.NICMarker, r.NcwndUp
	f.delayState, f.rttState, f.baseDelay, c.ccOpaque = r.DelayState, r.RTTState, r.BaseDelay, r.CCOpaque
	f.ccMetadata, f.plbState = r.CCMetadata, r.PLBState
	f.fcwnd = max(r.Fcwnd, 1)
	if m := c.cfg.MaxFcwnd; m > 0 {
		f.fcwnd = min(f.fcwnd, m)
	}
	c.sumFcwnd()
	if r.RandomizePath {
		c.plbRepath(r.Flow, c.ep.now())
	}
	c.ncwnd = max(r.Ncwnd, 1)
	if m := c.cfg.MaxNcwnd; m > 0 {
		c.ncwnd = min(c.ncwnd, m)
	}
	if r.AlphaRequest != 0 {
		c.alpha = r.AlphaRequest
	}
	c.ipg = max(r.IPG, 0)
	if r.RTO > 0 {
		c.rto = min(max(r.RTO, c.cfg.MinRTO), c.cfg.MaxRTO)
	}
}

// ApplyRUE hands an asynchronous RUE's response to the datapath.
func (e *Endpoint) ApplyRUE(r rue.Response) {
	c := e.conns[r.Conn]
	if c == nil || c.dead {
		return
	}
	now, outer := e.enter()
	defer e.leave(outer)
	c.applyRUE(&r)
	c.flush(now)
}

// rxBufferLevel reports the larger of the network-request Rx pools'
// quantised occupancy EMAs [S §10.2].
func (e *Endpoint) rxBufferLevel() uint8 {
	p := &e.res.RxNet
	return max(p.Pkt.Level(), p.Buf.Level())
}
