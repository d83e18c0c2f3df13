package verbs

import (
	"errors"

	"falconnic/falcon"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// The requester turns send WQEs into Falcon transactions [digest §9.2]:
// SEND and WRITE become pushes of at most the path MTU (RBTH+SETH+OETH,
// RBTH+RETH in every segment), READ and atomics become pulls whose Pull
// Request carries the RDMA request headers (ReadRequest: RETH, SETH, STETH;
// CompareSwap/FetchAdd: SETH, STETH, AtomicETH) and whose Pull Data
// carries the response (RBTH+STETH, +AtomicAckETH). Transactions complete
// in RSN order on an ordered connection; WQEs complete in SQ order.

// sendOp is a send WQE taken from the ring: a snapshot (the guest may
// rewrite the ring at any time) plus progress.
type sendOp struct {
	seq          uint32
	live, done   bool
	wrID         uint64
	op, flags    uint32
	imm          uint32
	raddr        uint64
	rkey         uint32
	cmpAdd, swap uint64
	length       uint32
	nsge         int
	sges         [maxSGE]sgeEnt
	inline       bool
	inl          []byte
	rqpn, qkey   uint32
	inv          uint32 // LOCAL_INV, SEND_WITH_INV: the key to invalidate
	reg          regWR  // REG_MR
	dest         MAC
	av           AV // UD: the address vector (GIDs for the receiver's GRH)
	conn         *falcon.Conn
	status       WCStatus

	sent       uint32 // bytes submitted
	segs, acks int    // transactions submitted / completed
	rdOff      uint32 // READ: bytes landed
}

type sgeEnt struct {
	mr   *MR
	off  uint64 // MR-relative
	n    uint32
	addr uint64
	lkey uint32
}

const maxSGE = 32

// wrOps is the send opcode table: which QP types may post it, whether it
// reads local memory into the message, its completion opcode, whether it
// is a local operation (no transaction; frwr.go) and whether only kernel
// QPs may post it.
var wrOps = [numWROpcodes]struct {
	name   string
	types  uint8 // bit per QP type
	pull   bool
	wc     uint32
	access uint32 // local access the SGEs need
	local  bool
	kernel bool
}{
	WRWrite:    {name: "WRITE", types: 1<<QPTypeRC | 1<<QPTypeUC, wc: WCWrite},
	WRWriteImm: {name: "WRITE_WITH_IMM", types: 1<<QPTypeRC | 1<<QPTypeUC, wc: WCWrite},
	WRSend:     {name: "SEND", types: 1<<QPTypeRC | 1<<QPTypeUC | 1<<QPTypeUD, wc: WCSend},
	WRSendImm:  {name: "SEND_WITH_IMM", types: 1<<QPTypeRC | 1<<QPTypeUC | 1<<QPTypeUD, wc: WCSend},
	WRRead:     {name: "READ", types: 1 << QPTypeRC, pull: true, wc: WCRead, access: AccessLocalWrite},
	WRCmpSwap:  {name: "CMP_SWAP", types: 1 << QPTypeRC, pull: true, wc: WCCmpSwap, access: AccessLocalWrite},
	WRFetchAdd: {name: "FETCH_ADD", types: 1 << QPTypeRC, pull: true, wc: WCFetchAdd, access: AccessLocalWrite},
	WRLocalInv: {name: "LOCAL_INV", types: 1<<QPTypeRC | 1<<QPTypeUC | 1<<QPTypeUD, wc: WCLocalInv, local: true, kernel: true},
	WRSendInv:  {name: "SEND_WITH_INV", types: 1 << QPTypeRC, wc: WCSend},
	WRRegMR:    {name: "REG_MR", types: 1<<QPTypeRC | 1<<QPTypeUC | 1<<QPTypeUD, wc: WCRegMR, local: true, kernel: true},
}

// connState is the engine's per-connection state.
type connState struct {
	sn uint32 // RBTH SN of the last packet we sent
}

// connOf returns c's state, creating it. Entries of connections that
// closed go with ConnDown; those the engine was not told about are swept
// here whenever the table has doubled since the last sweep, so replaced
// connections never accumulate [issue 18, finding 5].
func (e *Engine) connOf(c *falcon.Conn) *connState {
	cs := e.conns[c]
	if cs == nil {
		if len(e.conns) >= e.connSweepAt {
			e.sweepConns()
		}
		cs = &connState{}
		e.conns[c] = cs
	}
	return cs
}

// sweepConns drops the state of dead connections.
func (e *Engine) sweepConns() {
	for c := range e.conns {
		if c.Dead() {
			delete(e.conns, c)
		}
	}
	e.connSweepAt = 2*len(e.conns) + minConnSweep
}

// minConnSweep is the table size below which connOf does not sweep.
const minConnSweep = 16

// ConnDown forgets connection c (the connection manager closed or
// replaced it): its state goes, and QPs that used it look their peer up
// again on their next work request.
func (e *Engine) ConnDown(c *falcon.Conn) {
	delete(e.conns, c)
	e.forgetHeld(c)
	for _, qp := range e.qps {
		if qp.conn == c {
			qp.conn = nil
		}
	}
}

// ConnStates returns how many connections the engine keeps state for.
func (e *Engine) ConnStates() int { return len(e.conns) }

func cookie(qp *QP, seq uint32) uint64 {
	return uint64(qp.H)<<40 | uint64(qp.gen&0x7f)<<33 | uint64(seq)
}

// pump takes WQEs from the SQ and submits their transactions until the
// ring is empty, the transport says Xoff, or the QP may not send. With
// doorbell polling, an SQ found empty opens a polling window or clears
// the flag (sqEmpty), whose re-check may send it draining again.
func (e *Engine) pump(qp *QP) {
	if qp.pumping {
		return
	}
	qp.pumping = true
	defer func() { qp.pumping = false }()
	mem := e.cfg.Mem
	if mem == nil {
		return
	}
	switch qp.state {
	case QPSErr:
		e.flush(qp)
		return
	case QPSSQE:
		e.flushSQ(qp)
		return
	}
	if qp.state != QPSRTS {
		return
	}
	qp.blocked = false
	for {
		empty, took := e.drain(qp, mem)
		if !empty || !qp.poll.flag || !e.sqEmpty(qp, took) {
			return
		}
	}
}

// drain is pump's loop. It reports whether it stopped because the SQ was
// empty (not stalled, nor out of RTS) and whether it took WQEs.
func (e *Engine) drain(qp *QP, mem Memory) (empty, took bool) {
	for qp.state == QPSRTS {
		if qp.cur == nil {
			prod, err := qp.sq.Producer(mem)
			if err != nil || qp.sq.Pending(prod, qp.sqNext) == 0 {
				return true, took
			}
			if qp.sqNext-qp.sqDone >= uint32(len(qp.ops)) {
				return false, took
			}
			if !qp.poll.flag && e.poll.cfg.On && e.pollActive(e.now()) {
				// Before draining: posts from now on need no doorbell.
				e.setFlag(qp)
			}
			op := &qp.ops[qp.sqNext&(uint32(len(qp.ops))-1)]
			st := e.takeWQE(qp, op, qp.sqNext)
			qp.sqNext++
			took = true
			if st != WCSuccess {
				op.done, op.status = true, st
				e.complete(qp)
				continue
			}
			qp.cur = op
		}
		if err := e.submit(qp, qp.cur); err != nil {
			if err == errLocalWait {
				return false, took // an earlier WQE's completion pumps again
			}
			if errors.Is(err, falcon.ErrXoff) || errors.Is(err, errNoConn) {
				e.Stats.Xoff.Inc()
				qp.blocked = true
				return false, took
			}
			qp.cur.done, qp.cur.status = true, WCRetryExcErr
			qp.cur = nil
			e.complete(qp)
			continue
		}
		op := qp.cur
		qp.cur = nil
		if !op.done && op.sent >= op.length && op.acks == op.segs {
			op.done = true
			e.complete(qp)
		} else if op.done {
			e.complete(qp)
		}
	}
	return false, took
}

// takeWQE reads and validates send WQE seq into op.
func (e *Engine) takeWQE(qp *QP, op *sendOp, seq uint32) WCStatus {
	mem := e.cfg.Mem
	e.Stats.SendWQEs.Inc()
	inl := op.inl[:0]
	*op = sendOp{seq: seq, live: true, inl: inl}
	hdr := e.wqe[:]
	if qp.sq.ReadSlot(mem, seq, hdr) != nil {
		e.Stats.WQERead.Inc()
		return WCLocQPOpErr
	}
	w := SendWQE(hdr)
	op.wrID, op.op, op.flags, op.length = w.WRID(), w.Opcode(), w.Flags(), w.Length()
	if qp.sigAll {
		op.flags |= sendFlagSignal
	}
	if op.op >= numWROpcodes || wrOps[op.op].types&(1<<qp.typ) == 0 {
		e.Stats.WQEBadOpcode.Inc()
		return WCLocQPOpErr
	}
	info := wrOps[op.op]
	if info.kernel && !qp.kernel {
		e.Stats.WQEBadOpcode.Inc()
		return WCLocQPOpErr
	}
	switch op.op {
	case WRWriteImm, WRSendImm:
		op.imm = w.Imm()
	case WRLocalInv, WRSendInv:
		op.inv = w.InvRKey()
	case WRRegMR:
		r := &op.reg
		r.mr, r.key, r.access, r.npages, r.iova, r.length = w.RegWR()
	}
	if info.local {
		op.length = 0 // no data; executed by execLocal in SQ order
		return WCSuccess
	}
	switch op.op {
	case WRCmpSwap, WRFetchAdd:
		op.raddr, op.cmpAdd, op.swap, op.rkey = w.RemoteAddr(), w.CompareAdd(), w.Swap(), w.AtomicRKey()
	default:
		op.raddr, op.rkey = w.RemoteAddr(), w.RKey()
	}
	if qp.typ == QPTypeUD {
		op.rqpn, op.qkey = w.RemoteQPN()&0xffffff, w.RemoteQKey()
		if op.qkey&0x80000000 != 0 {
			op.qkey = qp.attr.QKey // a "controlled" Q_Key: use the QP's own [IB 10.2.5]
		}
		switch ah, ok := e.ahs[w.AHNum()]; {
		case ok && ah.PD == qp.pd:
			op.av = ah.AV
		case qp.kernel && w.AHNum() == 0:
			// The guest kernel's AHs live in the driver (ib_cm creates
			// them in atomic context): the WQE carries the AV.
			av, ok := inlineAV(w)
			if !ok {
				e.Stats.WQEBadAV.Inc()
				return WCLocQPOpErr
			}
			op.av = av
		default:
			// A user WQE naming no AH of its PD: only the DMAC of the
			// WQE's own copy is used, no GIDs (user memory is not a
			// source the receiver may trust for its GRH).
			op.av = AV{DMAC: w.AVDMAC()}
		}
		op.dest = op.av.DMAC
		if op.av.Net != NetNone && !e.ownGID(&op.av.SGID) {
			e.Stats.WQEForeignSGID.Inc()
			return WCLocQPOpErr
		}
		if int(op.length) > e.pmtu(qp) {
			e.Stats.WQETooLong.Inc()
			return WCLocLenErr
		}
	} else {
		op.dest = qp.attr.AV.DMAC
	}
	if op.op == WRCmpSwap || op.op == WRFetchAdd {
		if op.length != 8 {
			e.Stats.WQEBadSGE.Inc()
			return WCLocLenErr
		}
	}
	if op.flags&sendFlagInline != 0 && !info.pull {
		if op.length > qp.sqMaxInline || int(op.length) > qp.sq.ElemSize()-SendWQESize {
			e.Stats.WQETooLong.Inc()
			return WCLocLenErr
		}
		op.inline = true
		op.inl = op.inl[:op.length]
		if qp.sq.reg.read(mem, qp.sq.slotOff(seq)+SendWQESize, op.inl) != nil {
			e.Stats.WQERead.Inc()
			return WCLocQPOpErr
		}
		return WCSuccess
	}
	n := w.NumSGE()
	if n > qp.sqMaxSGE || n > maxSGE {
		e.Stats.WQEBadSGE.Inc()
		return WCLocLenErr
	}
	sb := e.sge[:]
	total := uint64(0)
	for i := range int(n) {
		if qp.sq.reg.read(mem, qp.sq.slotOff(seq)+SendWQESize+uint64(i*SGESize), sb) != nil {
			e.Stats.WQERead.Inc()
			return WCLocQPOpErr
		}
		s := SGE(sb)
		if s.Len() == 0 {
			continue
		}
		ent, ok := e.localSGE(qp, s, info.access)
		if !ok {
			e.Stats.LocalProtErr.Inc()
			return WCLocProtErr
		}
		op.sges[op.nsge] = ent
		op.nsge++
		total += uint64(s.Len())
	}
	// The message length is what the SGEs add up to (librxe sets
	// dma.length to that sum; a disagreeing WQE is malformed).
	if total != uint64(op.length) || total > 1<<31 {
		e.Stats.WQEBadSGE.Inc()
		return WCLocLenErr
	}
	return WCSuccess
}

// localSGE resolves an SGE of qp: an MR of the QP's PD with the access
// the operation needs, or for a kernel QP the DMALKey region (guest RAM).
func (e *Engine) localSGE(qp *QP, s SGE, access uint32) (sgeEnt, bool) {
	mr := e.lkeys[s.LKey()]
	if s.LKey() == DMALKey {
		if !qp.kernel || e.cfg.Mem == nil || !e.cfg.Mem.Check(s.Addr(), uint64(s.Len())) {
			return sgeEnt{}, false
		}
		mr = e.dma
	} else if mr == nil || mr.PD != qp.pd || mr.Access&access != access || mr.state != MRValid {
		return sgeEnt{}, false
	}
	off, ok := mr.span(s.Addr(), uint64(s.Len()))
	if !ok {
		return sgeEnt{}, false
	}
	return sgeEnt{mr: mr, off: off, n: s.Len(), addr: s.Addr(), lkey: s.LKey()}, true
}

// gather copies message bytes [off, off+len(b)) of op into b.
func (e *Engine) gather(op *sendOp, off uint32, b []byte) error {
	if op.inline {
		copy(b, op.inl[off:])
		return nil
	}
	return e.sgeWalk(op.sges[:op.nsge], off, len(b), func(s *sgeEnt, at uint64, lo, hi int) error {
		return s.mr.reg.read(e.cfg.Mem, at, b[lo:hi])
	})
}

// scatter copies b to message bytes [off, ...) of the SGEs.
func (e *Engine) scatter(sges []sgeEnt, off uint32, b []byte) error {
	return e.sgeWalk(sges, off, len(b), func(s *sgeEnt, at uint64, lo, hi int) error {
		return s.mr.reg.write(e.cfg.Mem, at, b[lo:hi])
	})
}

func (e *Engine) sgeWalk(sges []sgeEnt, off uint32, n int, fn func(s *sgeEnt, at uint64, lo, hi int) error) error {
	pos := uint64(0)
	done := 0
	for i := range sges {
		s := &sges[i]
		end := pos + uint64(s.n)
		if uint64(off)+uint64(done) < end && done < n {
			in := uint64(off) + uint64(done) - pos
			c := min(n-done, int(uint64(s.n)-in))
			if err := fn(s, s.off+in, done, done+c); err != nil {
				return err
			}
			done += c
		}
		pos = end
	}
	if done != n {
		return ErrBounds
	}
	return nil
}

var errNoConn = errors.New("verbs: connection not up yet")

// submit pushes op's remaining transactions.
func (e *Engine) submit(qp *QP, op *sendOp) error {
	if wrOps[op.op].local {
		return e.execLocal(qp, op)
	}
	if op.conn == nil {
		if e.cfg.Conns == nil {
			return errNoConn
		}
		if qp.typ != QPTypeUD {
			if qp.conn == nil || qp.conn.Dead() {
				qp.conn = e.cfg.Conns.Lookup(qp.attr.AV.DMAC)
			}
			op.conn = qp.conn
		} else {
			op.conn = e.cfg.Conns.Lookup(op.dest)
		}
		if op.conn == nil {
			return errNoConn
		}
	}
	c := op.conn
	cs := e.connOf(c)
	pmtu := uint32(e.segMTU(qp, c))
	info := wrOps[op.op]
	for op.sent < op.length || (op.length == 0 && op.segs == 0) {
		n := min(pmtu, op.length-op.sent)
		first, last := op.sent == 0, op.sent+n == op.length
		f := wire.RDMAFields{DestQP: qp.attr.DestQPN, SN: cs.sn + 1}
		if qp.typ == QPTypeUD {
			f.DestQP = op.rqpn
		}
		if info.pull {
			if first {
				qp.readMSN++
			}
			f.RMSN = qp.readMSN
			if op.nsge > 0 {
				f.SinkVA, f.SinkLKey = op.sges[0].addr+uint64(op.sent), op.sges[0].lkey
			}
			respLen := wire.OpAtomicResponse.HeaderLen()
			switch op.op {
			case WRRead:
				f.Op, f.VA, f.RKey, f.DMALength = wire.OpReadRequest, op.raddr+uint64(op.sent), op.rkey, n
				respLen = wire.OpReadResponseOnly.HeaderLen() + int(n)
			case WRCmpSwap:
				f.Op, f.VA, f.RKey, f.Compare, f.SwapAdd = wire.OpCompareSwap, op.raddr, op.rkey, op.cmpAdd, op.swap
			case WRFetchAdd:
				f.Op, f.VA, f.RKey, f.SwapAdd = wire.OpFetchAdd, op.raddr, op.rkey, op.cmpAdd
			}
			e.pkt = wire.AppendRDMA(e.pkt[:0], &f)
			if _, err := c.PullHeader(cookie(qp, op.seq), respLen, e.pkt); err != nil {
				if first {
					qp.readMSN--
				}
				return err
			}
			e.Stats.TxPull.Inc()
		} else {
			f.Op = segOpcode(qp.typ, op.op, first, last)
			f.VA, f.RKey, f.DMALength = op.raddr+uint64(op.sent), op.rkey, op.length
			f.Offset, f.Imm, f.QKey, f.SrcQP, f.InvRKey = op.sent, op.imm, op.qkey, qp.H, op.inv
			f.SE = last && op.flags&sendFlagSolic != 0
			if f.Op != wire.OpWriteFirst && f.Op != wire.OpWriteMiddle && f.Op != wire.OpWriteLast && f.Op != wire.OpWriteOnly {
				if first {
					qp.sendMSN++
				}
				f.RMSN = qp.sendMSN
			}
			e.pkt = wire.AppendRDMA(e.pkt[:0], &f)
			wire.RBTH(e.pkt).SetRNRRetry(qp.attr.RNRRetry)
			if qp.typ == QPTypeUD {
				e.pkt = appendUDAddr(e.pkt, &op.av)
			}
			// The data goes from memory straight into the packet.
			bad := false
			_, err := c.PushFill(cookie(qp, op.seq), e.pkt, int(n), func(b []byte) error {
				err := e.gather(op, op.sent, b)
				bad = err != nil
				return err
			})
			if bad {
				e.Stats.LocalProtErr.Inc()
				op.done, op.status = true, WCLocProtErr
				return nil
			}
			if err != nil {
				if first && f.RMSN != 0 {
					qp.sendMSN--
				}
				return err
			}
			e.Stats.TxPush.Inc()
			e.Stats.TxBytes.Add(uint64(n))
		}
		cs.sn++
		op.segs++
		op.sent += n
		if op.length == 0 {
			break
		}
	}
	return nil
}

// segOpcode picks the RBTH opcode of one segment.
func segOpcode(typ uint8, wr uint32, first, last bool) wire.RDMAOpcode {
	if typ == QPTypeUD {
		if wr == WRSendImm {
			return wire.OpUDSendOnlyImm
		}
		return wire.OpUDSendOnly
	}
	imm := wr == WRSendImm || wr == WRWriteImm
	if wr == WRWrite || wr == WRWriteImm {
		switch {
		case first && last && imm:
			return wire.OpWriteOnlyImm
		case first && last:
			return wire.OpWriteOnly
		case first:
			return wire.OpWriteFirst
		case last && imm:
			return wire.OpWriteLastImm
		case last:
			return wire.OpWriteLast
		}
		return wire.OpWriteMiddle
	}
	inv := wr == WRSendInv
	switch {
	case first && last && inv:
		return wire.OpSendOnlyInv
	case last && inv:
		return wire.OpSendLastInv
	case first && last && imm:
		return wire.OpSendOnlyImm
	case first && last:
		return wire.OpSendOnly
	case first:
		return wire.OpSendFirst
	case last && imm:
		return wire.OpSendLastImm
	case last:
		return wire.OpSendLast
	}
	return wire.OpSendMiddle
}

// OnCompletion is the falcon.ULP initiator callback.
func (e *Engine) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	qpn := uint32(cpl.Cookie >> 40)
	gen := uint8(cpl.Cookie>>33) & 0x7f
	seq := uint32(cpl.Cookie)
	qp := e.qps[qpn]
	if qp == nil || qp.gen&0x7f != gen {
		e.Stats.CplStale.Inc()
		return
	}
	op := &qp.ops[seq&(uint32(len(qp.ops))-1)]
	if !op.live || op.seq != seq || op.done || op.conn != c {
		e.Stats.CplStale.Inc()
		return
	}
	if cpl.Status != tl.CmplAck {
		op.done, op.status = true, e.transportStatus(cpl)
		e.complete(qp)
		return
	}
	if cpl.Kind == tl.Pull {
		if st := e.landResponse(qp, op, cpl.Data); st != WCSuccess {
			op.done, op.status = true, st
			e.complete(qp)
			return
		}
	}
	op.acks++
	if op.sent >= op.length && op.acks == op.segs && qp.cur != op {
		op.done = true
		e.complete(qp)
	}
}

// transportStatus maps a failed transaction to a completion status.
func (e *Engine) transportStatus(cpl *falcon.Completion) WCStatus {
	switch cpl.Status {
	case tl.CmplTargetNackCIE, tl.CmplTargetNackNRE:
		e.Stats.CplRemoteErr.Inc()
		return syndromeStatus(cpl.ULPCode)
	case tl.CmplTargetNackCID:
		e.Stats.CplRemoteErr.Inc()
		return WCRemInvReqErr
	case tl.CmplOpErr:
		e.Stats.CplBadResponse.Inc()
		return WCBadRespErr
	}
	e.Stats.CplRetryExc.Inc()
	return WCRetryExcErr
}

// syndromeStatus maps a responder's IB syndrome to the requester's status.
func syndromeStatus(s uint8) WCStatus {
	switch s {
	case wire.SyndromeRNR:
		return WCRNRRetryExcErr
	case wire.SyndromeRemoteAccess:
		return WCRemAccessErr
	case wire.SyndromeRemoteOp:
		return WCRemOpErr
	}
	return WCRemInvReqErr
}

// landResponse places READ data or an atomic's original value.
func (e *Engine) landResponse(qp *QP, op *sendOp, data []byte) WCStatus {
	t := wire.TypePullData
	r, err := wire.ParseRDMA(data, t)
	if err != nil {
		e.Stats.CplBadResponse.Inc()
		return WCBadRespErr
	}
	if r.RBTH.CE() {
		e.Stats.CplRemoteErr.Inc()
		return syndromeStatus(r.RBTH.Syndrome())
	}
	if op.op == WRRead {
		want := min(uint32(e.segMTU(qp, op.conn)), op.length-op.rdOff)
		if r.Op == wire.OpAtomicResponse || uint32(len(r.Data)) != want {
			e.Stats.CplBadResponse.Inc()
			return WCBadRespErr
		}
		if e.scatter(op.sges[:op.nsge], op.rdOff, r.Data) != nil {
			e.Stats.LocalProtErr.Inc()
			return WCLocProtErr
		}
		op.rdOff += want
		return WCSuccess
	}
	orig, ok := r.AtomicAckETH()
	if !ok {
		e.Stats.CplBadResponse.Inc()
		return WCBadRespErr
	}
	b := e.word[:]
	le.PutUint64(b, orig)
	if e.scatter(op.sges[:op.nsge], 0, b) != nil {
		e.Stats.LocalProtErr.Inc()
		return WCLocProtErr
	}
	return WCSuccess
}

// complete retires finished ops in SQ order; an error moves the QP to ERR.
func (e *Engine) complete(qp *QP) {
	mem := e.cfg.Mem
	mask := uint32(len(qp.ops)) - 1
	moved := false
	for qp.sqDone != qp.sqNext {
		op := &qp.ops[qp.sqDone&mask]
		if !op.done || qp.cur == op {
			break
		}
		failed := op.status != WCSuccess
		e.retire(qp, op)
		moved = true
		if failed {
			ev := EvQPReqErr
			if op.status == WCRemAccessErr || op.status == WCLocProtErr {
				ev = EvQPAccessErr
			}
			if op.status == WCRetryExcErr || op.status == WCRNRRetryExcErr || op.status == WCRemInvReqErr || op.status == WCRemOpErr {
				ev = 0 // reported in the CQE; IB raises no async event
			}
			if qp.typ != QPTypeRC && qp.state == QPSRTS {
				e.sqError(qp)
				return
			}
			e.qpError(qp, ev)
			return
		}
	}
	if moved && mem != nil {
		_ = qp.sq.SetConsumer(mem, qp.sqDone)
		if !qp.pumping {
			e.pump(qp)
		}
	}
}

// retire writes op's CQE (if signaled or failed) and frees its slot.
func (e *Engine) retire(qp *QP, op *sendOp) {
	qp.sqDone++
	op.live = false
	if op.status == WCFlushErr {
		e.Stats.Flushed.Inc()
	}
	if op.flags&sendFlagSignal == 0 && op.status == WCSuccess {
		return
	}
	// The slot is free before its CQE is visible, as in rxe: an
	// application that posts again as soon as it polls the completion
	// (perftest's latency loops with a one-entry SQ) must find room.
	if mem := e.cfg.Mem; mem != nil {
		_ = qp.sq.SetConsumer(mem, qp.sqDone)
	}
	c := Completion{WRID: op.wrID, Status: op.status, QPN: qp.H}
	if op.op < numWROpcodes {
		c.Opcode = wrOps[op.op].wc
	}
	if op.status == WCSuccess {
		switch op.op {
		case WRRead, WRCmpSwap, WRFetchAdd:
			c.ByteLen = op.length
		}
	}
	e.Stats.SendCQEs.Inc()
	if !e.post(qp.scq, &c, false) && qp.state != QPSErr {
		qp.state = QPSErr
		e.Stats.QPErrors.Inc()
		e.event(EvQPFatal, qp.H, 0)
	}
}

// OnXon resumes QPs the transport refused.
func (e *Engine) OnXon(c *falcon.Conn) {
	e.sendHeld()
	for _, qp := range e.qps {
		if qp.blocked {
			e.pump(qp)
		}
	}
}
