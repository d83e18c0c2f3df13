package verbs

import (
	"falconnic/falcon"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// The responder executes requests from the peer: WRITEs and SENDs arrive as
// pushes (acknowledged only once placed, so a push the responder cannot take
// is NACKed — RNR when no receive WQE is posted, complete-in-error with an
// IB syndrome for access and protocol errors); READs and atomics arrive as
// pulls whose request headers say what to read or update, answered with
// Pull Data (CE set and a syndrome on error).

// recvState is the receive WQE an incoming SEND is filling.
type recvState struct {
	active  bool
	wrID    uint64
	nsge    int
	sges    [maxSGE]sgeEnt
	cap     uint64
	off     uint32
	fromSRQ bool
	badSGE  bool
}

// grhLen is the Global Route Header a UD receive buffer starts with.
const grhLen = 40

// OnRequest is the falcon.ULP target callback.
func (e *Engine) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if r.Kind == tl.Pull {
		e.onPull(c, r)
		return
	}
	p := r.Payload
	if len(p) < wire.RBTHLen {
		e.Stats.RxParseErr.Inc()
		_ = c.NackPush(r.RSN, wire.NackCIE, wire.SyndromeInvalidReq, 0)
		return
	}
	m, err := wire.ParseRDMA(p, wire.TypePushData)
	if err != nil {
		e.Stats.RxParseErr.Inc()
		_ = c.NackPush(r.RSN, wire.NackCIE, wire.SyndromeInvalidReq, 0)
		return
	}
	qp := e.qps[m.RBTH.DestQP()]
	if qp == nil {
		e.Stats.RxNoQP.Inc()
		e.nack(c, r, m, wire.SyndromeInvalidReq)
		return
	}
	ud := m.Op == wire.OpUDSendOnly || m.Op == wire.OpUDSendOnlyImm
	if (qp.typ == QPTypeUD) != ud || !qp.state.receives() {
		e.Stats.RxBadQPState.Inc()
		e.nack(c, r, m, wire.SyndromeInvalidReq)
		return
	}
	if !ud {
		if (qp.conn == nil || qp.conn.Dead()) && e.cfg.Conns != nil {
			qp.conn = e.cfg.Conns.Lookup(qp.attr.AV.DMAC)
		}
		if qp.conn != c {
			e.Stats.RxInvalidCID.Inc()
			_ = c.NackPush(r.RSN, wire.NackInvalidCID, 0, 0)
			return
		}
	}
	switch {
	case ud:
		e.recvUD(c, r, qp, &m)
	case m.Ext.Has(wire.ExtRETH):
		e.recvWrite(c, r, qp, &m)
	default:
		e.recvSend(c, r, qp, &m)
	}
}

// nack completes a push in error with an IB syndrome; the requester's WQE
// fails with the matching status. UC requests are acknowledged and dropped
// (UC has no responder errors).
func (e *Engine) nack(c *falcon.Conn, r *falcon.Request, m wire.RDMA, syn uint8) {
	if qp := e.qps[m.RBTH.DestQP()]; qp != nil && qp.typ == QPTypeUC {
		_ = c.AckPush(r.RSN)
		return
	}
	_ = c.NackPush(r.RSN, wire.NackCIE, syn, 0)
}

// rkeyCheck finds the MR for a remote access and returns the MR-relative
// offset, or the syndrome to fail with.
func (e *Engine) rkeyCheck(qp *QP, rkey uint32, va, n uint64, access uint32) (*MR, uint64, bool) {
	mr := e.rkeys[rkey]
	// DMALKey names guest-physical memory for the local kernel only: it
	// is never an rkey, whatever the tables hold.
	if rkey == DMALKey || mr == nil || mr.PD != qp.pd || mr.state != MRValid || mr.Access&access != access ||
		qp.attr.Access&access != access {
		e.Stats.RxRKeyErr.Inc()
		return nil, 0, false
	}
	off, ok := mr.span(va, n)
	if !ok {
		e.Stats.RxBounds.Inc()
		return nil, 0, false
	}
	return mr, off, true
}

func (e *Engine) recvWrite(c *falcon.Conn, r *falcon.Request, qp *QP, m *wire.RDMA) {
	h, _ := m.RETH()
	imm := m.Op == wire.OpWriteLastImm || m.Op == wire.OpWriteOnlyImm
	if imm && !e.peekRecv(c, r, qp, m) {
		return
	}
	if len(m.Data) > 0 {
		mr, off, ok := e.rkeyCheck(qp, h.RKey(), h.VA(), uint64(len(m.Data)), AccessRemoteWrite)
		if !ok {
			e.nack(c, r, *m, wire.SyndromeRemoteAccess)
			e.qpError(qp, EvQPAccessErr)
			return
		}
		if mr.reg.write(e.cfg.Mem, off, m.Data) != nil {
			e.Stats.RxBounds.Inc()
			e.nack(c, r, *m, wire.SyndromeRemoteAccess)
			return
		}
		e.Stats.RxWriteBytes.Add(uint64(len(m.Data)))
	}
	if imm {
		v, _ := m.ImmDt()
		e.finishRecv(qp, &Completion{Opcode: WCRecvRDMAImm, Imm: v, Flags: WCFlagWithImm, ByteLen: h.Length()}, m.RBTH.SE())
	}
	_ = c.AckPush(r.RSN)
}

// peekRecv makes sure qp has a receive WQE for the message starting now,
// taking one from its RQ or SRQ; otherwise it NACKs the push (RNR, or
// complete-in-error once the requester's RNR retry count is spent).
func (e *Engine) peekRecv(c *falcon.Conn, r *falcon.Request, qp *QP, m *wire.RDMA) bool {
	if qp.recv.active {
		return true
	}
	if e.takeRecv(qp) {
		qp.rnrActive = false
		return true
	}
	e.Stats.RxNoRecvWQE.Inc()
	if qp.typ == QPTypeUC {
		_ = c.AckPush(r.RSN) // UC drops the message
		return false
	}
	rsn := uint32(r.RSN)
	if qp.rnrActive && qp.rnrRSN == rsn {
		qp.rnrCount++
	} else {
		qp.rnrActive, qp.rnrRSN, qp.rnrCount = true, rsn, 1
	}
	limit := m.RBTH.RNRRetry()
	if limit != 7 && qp.rnrCount > limit {
		e.Stats.RxRNRExhausted.Inc()
		qp.rnrActive = false
		_ = c.NackPush(r.RSN, wire.NackCIE, wire.SyndromeRNR, 0)
		return false
	}
	_ = c.NackPush(r.RSN, wire.NackRNR, 0, qp.attr.MinRNRTimer)
	return false
}

// takeRecv takes the next receive WQE from the QP's RQ or SRQ.
func (e *Engine) takeRecv(qp *QP) bool {
	mem := e.cfg.Mem
	ring, cons, maxS := qp.rq, &qp.rqCons, qp.rqMaxSGE
	if qp.srq != nil {
		ring, cons, maxS = qp.srq.ring, &qp.srq.cons, qp.srq.maxSGE
	}
	if ring == nil || mem == nil {
		return false
	}
	prod, err := ring.Producer(mem)
	if err != nil || ring.Pending(prod, *cons) == 0 {
		return false
	}
	hdr := e.rwqe[:]
	if ring.ReadSlot(mem, *cons, hdr) != nil {
		return false
	}
	w := RecvWQE(hdr)
	rs := &qp.recv
	*rs = recvState{active: true, wrID: w.WRID(), fromSRQ: qp.srq != nil}
	n := w.NumSGE()
	bad := n > maxS || n > maxSGE
	sb := e.sge[:]
	for i := 0; !bad && i < int(n); i++ {
		if ring.reg.read(mem, ring.slotOff(*cons)+RecvWQESize+uint64(i*SGESize), sb) != nil {
			bad = true
			break
		}
		s := SGE(sb)
		if s.Len() == 0 {
			continue
		}
		ent, ok := e.localSGE(qp, s, AccessLocalWrite)
		if !ok {
			bad = true
			break
		}
		rs.sges[rs.nsge] = ent
		rs.nsge++
		rs.cap += uint64(s.Len())
	}
	*cons++
	_ = ring.SetConsumer(mem, *cons)
	if qp.srq != nil && qp.srq.limit > 0 {
		if p2, err := ring.Producer(mem); err == nil && ring.Pending(p2, *cons) < qp.srq.limit {
			qp.srq.limit = 0
			e.event(EvSRQLimit, qp.srq.H, 0)
		}
	}
	if bad {
		e.Stats.LocalProtErr.Inc()
		rs.nsge, rs.cap = 0, 0
		rs.badSGE = true
	}
	return true
}

// finishRecv writes the receive completion of the current message.
func (e *Engine) finishRecv(qp *QP, c *Completion, solicited bool) {
	rs := &qp.recv
	c.WRID, c.QPN = rs.wrID, qp.H
	if rs.badSGE && c.Status == WCSuccess {
		c.Status = WCLocProtErr
	}
	rs.active = false
	e.Stats.RecvCQEs.Inc()
	if !e.post(qp.rcq, c, solicited) {
		e.qpError(qp, EvQPFatal)
		return
	}
	if c.Status != WCSuccess {
		e.qpError(qp, EvQPFatal)
	}
}

func (e *Engine) recvSend(c *falcon.Conn, r *falcon.Request, qp *QP, m *wire.RDMA) {
	info, _ := m.Op.Info()
	if info.First && !e.peekRecv(c, r, qp, m) {
		return
	}
	rs := &qp.recv
	if !rs.active {
		e.Stats.RxParseErr.Inc()
		e.nack(c, r, *m, wire.SyndromeInvalidReq)
		return
	}
	oh, _ := m.OETH()
	if oh.Offset() != rs.off {
		e.Stats.RxParseErr.Inc()
		e.nack(c, r, *m, wire.SyndromePSNSeqErr)
		return
	}
	if uint64(rs.off)+uint64(len(m.Data)) > rs.cap || rs.badSGE {
		e.Stats.RxLenErr.Inc()
		st := WCLocLenErr
		if rs.badSGE {
			st = WCLocProtErr
		}
		e.finishRecv(qp, &Completion{Status: st, Opcode: WCRecv}, false)
		e.nack(c, r, *m, wire.SyndromeInvalidReq)
		return
	}
	if len(m.Data) > 0 && e.scatter(rs.sges[:rs.nsge], rs.off, m.Data) != nil {
		e.Stats.RxBounds.Inc()
		e.finishRecv(qp, &Completion{Status: WCLocProtErr, Opcode: WCRecv}, false)
		e.nack(c, r, *m, wire.SyndromeRemoteOp)
		return
	}
	rs.off += uint32(len(m.Data))
	e.Stats.RxSendBytes.Add(uint64(len(m.Data)))
	if info.Last {
		cpl := Completion{Opcode: WCRecv, ByteLen: rs.off}
		if v, ok := m.ImmDt(); ok {
			cpl.Imm, cpl.Flags = v, WCFlagWithImm
		}
		if k, ok := m.IETH(); ok {
			if qp.typ != QPTypeRC || !e.remoteInvalidate(qp, k) {
				e.finishRecv(qp, &Completion{Status: WCRemInvReqErr, Opcode: WCRecv}, false)
				e.nack(c, r, *m, wire.SyndromeInvalidReq)
				return
			}
			cpl.InvRKey, cpl.Flags = k, WCFlagWithInv
		}
		e.finishRecv(qp, &cpl, m.RBTH.SE())
	}
	_ = c.AckPush(r.RSN)
}

func (e *Engine) recvUD(c *falcon.Conn, r *falcon.Request, qp *QP, m *wire.RDMA) {
	d, _ := m.DETH()
	// A UD message is acknowledged to the transport whatever happens to it:
	// UD is unreliable to the application [IB 9.8].
	defer func() { _ = c.AckPush(r.RSN) }()
	addr, data, ok := parseUDAddr(m.Data)
	if !ok {
		e.Stats.RxUDBadAddr.Inc()
		return
	}
	if d.QKey() != qp.attr.QKey {
		e.Stats.RxUDQKeyDrop.Inc()
		return
	}
	if !e.takeRecv(qp) {
		e.Stats.RxUDDrop.Inc()
		return
	}
	rs := &qp.recv
	if rs.badSGE || uint64(len(data))+grhLen > rs.cap {
		e.Stats.RxUDDrop.Inc()
		st := WCLocLenErr
		if rs.badSGE {
			st = WCLocProtErr
		}
		e.finishRecv(qp, &Completion{Status: st, Opcode: WCRecv}, false)
		return
	}
	grh := e.scratch[:grhLen]
	putGRH(grh, &addr, len(data))
	if e.scatter(rs.sges[:rs.nsge], 0, grh) != nil || e.scatter(rs.sges[:rs.nsge], grhLen, data) != nil {
		e.Stats.RxBounds.Inc()
		e.finishRecv(qp, &Completion{Status: WCLocProtErr, Opcode: WCRecv}, false)
		return
	}
	e.Stats.RxSendBytes.Add(uint64(len(data)))
	cpl := Completion{Opcode: WCRecv, ByteLen: uint32(len(data)) + grhLen, SrcQP: d.SrcQP(), Flags: WCFlagGRH,
		NetType: addr.net}
	if v, ok := m.ImmDt(); ok {
		cpl.Imm, cpl.Flags = v, cpl.Flags|WCFlagWithImm
	}
	e.finishRecv(qp, &cpl, m.RBTH.SE())
}

// onPull answers a READ or atomic pull from its request headers.
func (e *Engine) onPull(c *falcon.Conn, r *falcon.Request) {
	f := wire.RDMAFields{Op: wire.OpReadResponseOnly}
	m, err := wire.ParseRDMA(r.Payload, wire.TypePullRequest)
	if err != nil {
		e.Stats.RxParseErr.Inc()
		e.pullError(c, r, &f, wire.SyndromeInvalidReq)
		return
	}
	d := m.Fields()
	f.SN, f.SinkVA, f.SinkLKey, f.DestQP = d.SN, d.SinkVA, d.SinkLKey, d.DestQP
	if d.Op != wire.OpReadRequest {
		f.Op = wire.OpAtomicResponse
	}
	qp := e.qps[d.DestQP]
	if qp == nil {
		e.Stats.RxNoQP.Inc()
		e.pullError(c, r, &f, wire.SyndromeInvalidReq)
		return
	}
	if qp.typ != QPTypeRC || !qp.state.receives() {
		e.Stats.RxBadQPState.Inc()
		e.pullError(c, r, &f, wire.SyndromeInvalidReq)
		return
	}
	if (qp.conn == nil || qp.conn.Dead()) && e.cfg.Conns != nil {
		qp.conn = e.cfg.Conns.Lookup(qp.attr.AV.DMAC)
	}
	if qp.conn != c {
		e.Stats.RxInvalidCID.Inc()
		e.pullError(c, r, &f, wire.SyndromeInvalidReq)
		return
	}
	if d.Op == wire.OpReadRequest {
		hl := wire.OpReadResponseOnly.HeaderLen()
		if int(d.DMALength)+hl != int(r.Length) {
			e.Stats.RxBadPull.Inc()
			e.pullError(c, r, &f, wire.SyndromeInvalidReq)
			return
		}
		e.pkt = wire.AppendRDMA(e.pkt[:0], &f)
		if d.DMALength == 0 {
			e.Stats.ReadResponses.Inc()
			e.answer(c, r.RSN, e.pkt, 0, nil)
			return
		}
		mr, off, ok := e.rkeyCheck(qp, d.RKey, d.VA, uint64(d.DMALength), AccessRemoteRead)
		if !ok {
			e.pullError(c, r, &f, wire.SyndromeRemoteAccess)
			e.qpError(qp, EvQPAccessErr)
			return
		}
		// The data goes from memory straight into the packet.
		read := func(b []byte) error { return mr.reg.read(e.cfg.Mem, off, b) }
		if e.answer(c, r.RSN, e.pkt, int(d.DMALength), read) != nil {
			e.Stats.RxBounds.Inc()
			e.pullError(c, r, &f, wire.SyndromeRemoteAccess)
			return
		}
		e.Stats.ReadResponses.Inc()
		return
	}
	if int(r.Length) != wire.OpAtomicResponse.HeaderLen() {
		e.Stats.RxBadPull.Inc()
		e.pullError(c, r, &f, wire.SyndromeInvalidReq)
		return
	}
	if d.VA%8 != 0 {
		e.Stats.RxBounds.Inc()
		e.pullError(c, r, &f, wire.SyndromeInvalidReq)
		return
	}
	mr, off, ok := e.rkeyCheck(qp, d.RKey, d.VA, 8, AccessRemoteAtomic)
	if !ok {
		e.pullError(c, r, &f, wire.SyndromeRemoteAccess)
		e.qpError(qp, EvQPAccessErr)
		return
	}
	b := e.word[:]
	if mr.reg.read(e.cfg.Mem, off, b) != nil {
		e.pullError(c, r, &f, wire.SyndromeRemoteAccess)
		return
	}
	orig := le.Uint64(b)
	nv := orig
	if d.Op == wire.OpCompareSwap {
		if orig == d.Compare {
			nv = d.SwapAdd
		}
	} else {
		nv = orig + d.SwapAdd
	}
	le.PutUint64(b, nv)
	if mr.reg.write(e.cfg.Mem, off, b) != nil {
		e.pullError(c, r, &f, wire.SyndromeRemoteAccess)
		return
	}
	e.Stats.AtomicsDone.Inc()
	f.AtomicOrg = orig
	e.pkt = wire.AppendRDMA(e.pkt[:0], &f)
	e.answer(c, r.RSN, e.pkt, 0, nil)
}

// pullError answers a pull with a zero-data response, CE set and the
// syndrome in the RBTH [digest §9.2].
func (e *Engine) pullError(c *falcon.Conn, r *falcon.Request, f *wire.RDMAFields, syn uint8) {
	if f.Op != wire.OpAtomicResponse {
		f.Op = wire.OpReadResponseOnly
	}
	f.CE = true
	e.pkt = wire.AppendRDMA(e.pkt[:0], f)
	wire.RBTH(e.pkt).SetSyndrome(syn)
	if len(e.pkt) > int(r.Length) {
		e.pkt = e.pkt[:0]
	}
	e.answer(c, r.RSN, e.pkt, 0, nil)
}

// heldPull is a READ or atomic response Falcon had no Tx data room for
// (ErrXoff): an atomic has run, so its answer cannot be recomputed later.
type heldPull struct {
	c   *falcon.Conn
	rsn wire.RSN
	pkt []byte
}

// answer sends hdr and n bytes that fill writes (nil: none) as the Pull
// Data of pull rsn on c, or holds a copy while Falcon has no room for it
// or responses wait before it (OnXon sends them in order). It returns
// fill's error, and then sent and held nothing.
func (e *Engine) answer(c *falcon.Conn, rsn wire.RSN, hdr []byte, n int, fill func([]byte) error) error {
	err := falcon.ErrXoff
	if len(e.held) == 0 {
		err = c.PullDataFill(rsn, hdr, n, fill)
	}
	switch err {
	case nil:
	case falcon.ErrXoff:
		pkt := append(make([]byte, 0, len(hdr)+n), hdr...)[:len(hdr)+n]
		if fill != nil {
			if err := fill(pkt[len(hdr):]); err != nil {
				return err
			}
		}
		e.Stats.PullXoff.Inc()
		e.held = append(e.held, heldPull{c: c, rsn: rsn, pkt: pkt})
	case falcon.ErrDead, falcon.ErrNoSuchTxn, falcon.ErrTooLong:
		e.Stats.PullLost.Inc()
	default: // fill's
		return err
	}
	return nil
}

// sendHeld sends the held responses in order until Falcon refuses one.
func (e *Engine) sendHeld() {
	n := 0
	for ; n < len(e.held); n++ {
		h := &e.held[n]
		err := h.c.PullData(h.rsn, h.pkt)
		if err == falcon.ErrXoff {
			break
		}
		if err != nil {
			e.Stats.PullLost.Inc()
		}
	}
	e.dropHeld(n)
}

// dropHeld forgets the first n held responses.
func (e *Engine) dropHeld(n int) {
	k := copy(e.held, e.held[n:])
	clear(e.held[k:])
	e.held = e.held[:k]
}

// forgetHeld drops the held responses on c (nil: all), counted.
func (e *Engine) forgetHeld(c *falcon.Conn) {
	k := 0
	for _, h := range e.held {
		if c != nil && h.c != c {
			e.held[k] = h
			k++
			continue
		}
		e.Stats.PullLost.Inc()
	}
	clear(e.held[k:])
	e.held = e.held[:k]
}
