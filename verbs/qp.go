package verbs

import (
	"falconnic/falcon"
)

// QPState is a QP state, the IB_QPS_* values.
type QPState uint8

// QP states [IB 10.3].
const (
	QPSReset QPState = iota
	QPSInit
	QPSRTR
	QPSRTS
	QPSSQD
	QPSSQE
	QPSErr
	numQPStates
)

var qpStateNames = [numQPStates]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String names the state.
func (s QPState) String() string {
	if s < numQPStates {
		return qpStateNames[s]
	}
	return "QPState(" + itoa(int(s)) + ")"
}

// receives reports whether a QP in state s executes incoming requests.
func (s QPState) receives() bool {
	return s == QPSRTR || s == QPSRTS || s == QPSSQD || s == QPSSQE
}

// QP attribute mask bits, the IB_QP_* values.
const (
	AttrState          = 1 << 0
	AttrCurState       = 1 << 1
	AttrAccessFlags    = 1 << 3
	AttrPKeyIndex      = 1 << 4
	AttrPort           = 1 << 5
	AttrQKey           = 1 << 6
	AttrAV             = 1 << 7
	AttrPathMTU        = 1 << 8
	AttrTimeout        = 1 << 9
	AttrRetryCnt       = 1 << 10
	AttrRNRRetry       = 1 << 11
	AttrRQPSN          = 1 << 12
	AttrMaxQPRdAtomic  = 1 << 13
	AttrMinRNRTimer    = 1 << 15
	AttrSQPSN          = 1 << 16
	AttrMaxDestRdAtom  = 1 << 17
	AttrDestQPN        = 1 << 20
	attrSupportedMask  = 1<<21 - 1
	attrAlwaysOptional = AttrState | AttrCurState
)

// transition is one row of the QP state machine: the attributes a
// transition requires and those it may carry, per QP type [IB 11.2.4.2,
// Linux ib_modify_qp_is_ok].
type transition struct {
	req, opt [5]uint32 // indexed by QP type (RC=2, UC=3, UD=4)
	notRC    bool      // SQE exists only for UC and UD
}

var (
	rcUC = func(rc, uc, ud uint32) [5]uint32 { return [5]uint32{0, 0, rc, uc, ud} }
	// qpTransitions[from][to]; a zero row (with ok=false) is not allowed.
	qpTransitions = map[[2]QPState]transition{
		{QPSReset, QPSInit}: {
			req: rcUC(AttrPKeyIndex|AttrPort|AttrAccessFlags, AttrPKeyIndex|AttrPort|AttrAccessFlags, AttrPKeyIndex|AttrPort|AttrQKey)},
		{QPSInit, QPSInit}: {
			opt: rcUC(AttrPKeyIndex|AttrPort|AttrAccessFlags, AttrPKeyIndex|AttrPort|AttrAccessFlags, AttrPKeyIndex|AttrPort|AttrQKey)},
		{QPSInit, QPSRTR}: {
			req: rcUC(AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtom|AttrMinRNRTimer, AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN, 0),
			opt: rcUC(AttrAccessFlags|AttrPKeyIndex, AttrAccessFlags|AttrPKeyIndex, AttrPKeyIndex|AttrQKey)},
		{QPSRTR, QPSRTS}: {
			req: rcUC(AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic, AttrSQPSN, AttrSQPSN),
			opt: rcUC(AttrCurState|AttrAccessFlags|AttrMinRNRTimer, AttrCurState|AttrAccessFlags, AttrCurState|AttrQKey)},
		{QPSRTS, QPSRTS}: {
			opt: rcUC(AttrCurState|AttrAccessFlags|AttrMinRNRTimer, AttrCurState|AttrAccessFlags, AttrCurState|AttrQKey)},
		{QPSRTS, QPSSQD}: {},
		{QPSSQD, QPSRTS}: {
			opt: rcUC(AttrCurState|AttrAccessFlags|AttrMinRNRTimer, AttrCurState|AttrAccessFlags, AttrCurState|AttrQKey)},
		{QPSSQD, QPSSQD}: {
			opt: rcUC(AttrAV|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrAccessFlags|AttrMinRNRTimer|AttrMaxQPRdAtomic|AttrMaxDestRdAtom,
				AttrAV|AttrAccessFlags, AttrQKey|AttrPKeyIndex)},
		{QPSSQE, QPSRTS}: {notRC: true,
			opt: rcUC(0, AttrCurState|AttrAccessFlags, AttrCurState|AttrQKey)},
	}
)

// TransitionOK reports whether a QP of type typ may go from cur to next
// with the attributes in mask (any state may go to RESET or ERR).
//
// A GSI QP follows UD's rows without the port attribute (ib_mad never
// sends it; Linux's ib_modify_qp_is_ok has the same table).
func TransitionOK(typ uint8, cur, next QPState, mask uint32) bool {
	gsi := typ == QPTypeGSI
	if gsi {
		typ = QPTypeUD
	}
	if typ < QPTypeRC || typ > QPTypeUD || cur >= numQPStates || next >= numQPStates {
		return false
	}
	if next == QPSReset || next == QPSErr {
		return mask&^attrAlwaysOptional == 0
	}
	t, ok := qpTransitions[[2]QPState{cur, next}]
	if !ok || (t.notRC && typ == QPTypeRC) {
		return false
	}
	req, opt := t.req[typ], t.opt[typ]
	if gsi {
		req, opt = req&^AttrPort, opt&^AttrPort
	}
	mask &^= attrAlwaysOptional
	return mask&req == req && mask&^(req|opt) == 0
}

// QPSpec is a CREATE_QP request.
type QPSpec struct {
	H, PD, SendCQ, RecvCQ, SRQ uint32
	Type                       uint8
	SigAll                     bool
	// Kernel marks a guest-kernel consumer's QP (FALCONNIC_QP_F_KERNEL):
	// its SGEs may use DMALKey and its UD WQEs carry their AV inline.
	Kernel bool
	SQ, RQ RingSpec
}

// QPAttr is a MODIFY_QP request and a QUERY_QP answer.
type QPAttr struct {
	Mask              uint32
	State, CurState   QPState
	PathMTU           uint32 // IB_MTU_* (1 = 256 .. 5 = 4096)
	QKey              uint32
	RQPSN, SQPSN      uint32
	DestQPN           uint32
	Access            uint32
	PKeyIndex         uint16
	Port              uint8
	MaxRdAtomic       uint8
	MaxDestRdAtomic   uint8
	MinRNRTimer       uint8
	Timeout, RetryCnt uint8
	RNRRetry          uint8
	SQDraining        bool
	AV                AV
}

// QP is a queue pair.
type QP struct {
	H      uint32
	typ    uint8
	pd     uint32
	scq    *CQ
	rcq    *CQ
	srq    *SRQ
	sigAll bool
	gsi    bool // QP1: typ is QPTypeUD
	kernel bool // Kernel in its QPSpec
	state  QPState
	attr   QPAttr
	gen    uint8

	sq            *Ring
	sqMaxSGE      uint32
	sqMaxInline   uint32
	sqNext        uint32 // next WQE index to take from the ring
	sqDone        uint32 // next WQE index to complete (= ring consumer)
	ops           []sendOp
	cur           *sendOp // op with segments still to submit
	pumping       bool
	blocked       bool
	sendMSN       uint32
	readMSN       uint32
	rq            *Ring
	rqMaxSGE      uint32
	rqCons        uint32
	recv          recvState
	rnrRSN        uint32
	rnrCount      uint8
	rnrActive     bool
	conn          *falcon.Conn
	lastWQEEvSent bool
	poll          sqPoll // doorbell polling (poll.go)
}

// opsWindow bounds the send WQEs a QP has taken from its ring and not yet
// completed (a power of two). It bounds the NIC memory a guest can make a
// QP hold, whatever its ring size.
const opsWindow = 128

// CreateQP creates a QP in RESET.
func (e *Engine) CreateQP(s QPSpec) error {
	_, ok := e.qps[s.H]
	if err := e.checkNew(s.H, ok, len(e.qps), e.cfg.Limits.MaxQP); err != nil {
		return err
	}
	if s.H >= 1<<24 {
		return ErrBadHandle
	}
	gsi := s.Type == QPTypeGSI
	if gsi != (s.H == GSIQPN) || (gsi && !s.Kernel) {
		return ErrBadParam
	}
	if gsi {
		s.Type = QPTypeUD
	}
	if s.Type < QPTypeRC || s.Type > QPTypeUD {
		return ErrBadParam
	}
	p, ok1 := e.pds[s.PD]
	scq, ok2 := e.cqs[s.SendCQ]
	rcq, ok3 := e.cqs[s.RecvCQ]
	if !ok1 || !ok2 || !ok3 {
		return ErrBadHandle
	}
	var srq *SRQ
	if s.SRQ != 0 {
		if srq, ok = e.srqs[s.SRQ]; !ok {
			return ErrBadHandle
		}
	}
	if e.cfg.Mem == nil {
		return ErrNoMemory
	}
	lim := e.cfg.Limits
	if s.SQ.MaxSGE > lim.MaxSGE || s.SQ.MaxInline > lim.MaxInline ||
		SendWQESize+int(max(s.SQ.MaxSGE*SGESize, s.SQ.MaxInline)) > 1<<min(s.SQ.Log2Elem, 31) {
		return ErrBadParam
	}
	sq, err := e.loadRing(s.SQ, SendWQESize)
	if err != nil {
		return err
	}
	qp := &QP{H: s.H, typ: s.Type, gsi: gsi, kernel: s.Kernel, pd: s.PD, scq: scq, rcq: rcq, srq: srq, sigAll: s.SigAll, sq: sq,
		sqMaxSGE: s.SQ.MaxSGE, sqMaxInline: s.SQ.MaxInline, ops: make([]sendOp, min(s.SQ.Slots, opsWindow))}
	if srq == nil {
		if s.RQ.MaxSGE > lim.MaxSGE || RecvWQESize+int(s.RQ.MaxSGE)*SGESize > 1<<min(s.RQ.Log2Elem, 31) {
			e.dropRing(sq)
			return ErrBadParam
		}
		if qp.rq, err = e.loadRing(s.RQ, RecvWQESize); err != nil {
			e.dropRing(sq)
			return err
		}
		qp.rqMaxSGE = s.RQ.MaxSGE
	}
	for i := range qp.ops {
		qp.ops[i].inl = make([]byte, 0, s.SQ.MaxInline)
	}
	e.initPoll(qp)
	if old, ok := e.qpGen[s.H]; ok {
		qp.gen = old + 1
	}
	e.qpGen[s.H] = qp.gen
	e.qps[s.H] = qp
	p.refs++
	scq.refs++
	rcq.refs++
	if srq != nil {
		srq.refs++
	}
	return nil
}

// DestroyQP destroys a QP; its outstanding transactions are forgotten.
func (e *Engine) DestroyQP(h uint32) error {
	qp, ok := e.qps[h]
	if !ok {
		return ErrBadHandle
	}
	e.stopPolling(qp)
	delete(e.qps, h)
	e.dropRing(qp.sq)
	e.dropRing(qp.rq)
	qp.state = QPSReset
	if p := e.pds[qp.pd]; p != nil {
		p.refs--
	}
	qp.scq.refs--
	qp.rcq.refs--
	if qp.srq != nil {
		qp.srq.refs--
	}
	return nil
}

// QueryQP returns a QP's attributes.
func (e *Engine) QueryQP(h uint32) (QPAttr, error) {
	qp, ok := e.qps[h]
	if !ok {
		return QPAttr{}, ErrBadHandle
	}
	a := qp.attr
	a.State, a.CurState = qp.state, qp.state
	a.SQDraining = qp.state == QPSSQD && qp.sqDone != qp.sqNext
	return a, nil
}

// State returns a QP's state.
func (e *Engine) State(h uint32) (QPState, bool) {
	qp, ok := e.qps[h]
	if !ok {
		return 0, false
	}
	return qp.state, true
}

// ModifyQP applies a MODIFY_QP request.
func (e *Engine) ModifyQP(h uint32, a QPAttr) error {
	qp, ok := e.qps[h]
	if !ok {
		return ErrBadHandle
	}
	if a.Mask&^attrSupportedMask != 0 {
		return ErrBadParam
	}
	next := qp.state
	if a.Mask&AttrState != 0 {
		next = a.State
	}
	if a.Mask&AttrCurState != 0 && a.CurState != qp.state {
		return ErrBadState
	}
	if !TransitionOK(qp.transitionType(), qp.state, next, a.Mask) {
		return ErrBadState
	}
	if qp.gsi && a.Mask&AttrQKey != 0 && a.QKey != GSIQKey {
		return ErrBadParam // QP1's Q_Key is fixed [IB 10.2.5]
	}
	if a.Mask&AttrPathMTU != 0 && (a.PathMTU < 1 || a.PathMTU > 5) {
		return ErrBadParam
	}
	if a.Mask&AttrAccessFlags != 0 && a.Access&^(AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic|AccessLocalWrite|AccessMWBind) != 0 {
		return ErrBadAccess
	}
	if a.Mask&AttrDestQPN != 0 && a.DestQPN >= 1<<24 {
		return ErrBadParam
	}
	m := a.Mask
	t := &qp.attr
	set := func(bit uint32, f func()) {
		if m&bit != 0 {
			f()
		}
	}
	set(AttrAccessFlags, func() { t.Access = a.Access })
	set(AttrPKeyIndex, func() { t.PKeyIndex = a.PKeyIndex })
	set(AttrPort, func() { t.Port = a.Port })
	set(AttrQKey, func() { t.QKey = a.QKey })
	set(AttrAV, func() { t.AV = a.AV; t.AV.Valid = true; qp.conn = nil })
	set(AttrPathMTU, func() { t.PathMTU = a.PathMTU })
	set(AttrTimeout, func() { t.Timeout = a.Timeout })
	set(AttrRetryCnt, func() { t.RetryCnt = a.RetryCnt & 7 })
	set(AttrRNRRetry, func() { t.RNRRetry = a.RNRRetry & 7 })
	set(AttrRQPSN, func() { t.RQPSN = a.RQPSN & 0xffffff })
	set(AttrSQPSN, func() { t.SQPSN = a.SQPSN & 0xffffff })
	set(AttrMaxQPRdAtomic, func() { t.MaxRdAtomic = a.MaxRdAtomic })
	set(AttrMaxDestRdAtom, func() { t.MaxDestRdAtomic = a.MaxDestRdAtomic })
	set(AttrMinRNRTimer, func() { t.MinRNRTimer = a.MinRNRTimer & 31 })
	set(AttrDestQPN, func() { t.DestQPN = a.DestQPN })
	prev := qp.state
	switch {
	case next == QPSReset:
		e.resetQP(qp)
	case next == QPSErr && prev != QPSErr:
		e.qpError(qp, 0)
		return nil
	case prev == QPSReset && next == QPSInit:
		mem := e.cfg.Mem
		if mem == nil {
			return ErrNoMemory
		}
		c, err := qp.sq.Consumer(mem)
		if err != nil {
			return ErrBadParam
		}
		qp.sqNext, qp.sqDone = c, c
		if qp.rq != nil {
			if qp.rqCons, err = qp.rq.Consumer(mem); err != nil {
				return ErrBadParam
			}
		}
	}
	qp.state = next
	if next == QPSRTS && (prev == QPSRTR || prev == QPSSQD || prev == QPSSQE) {
		e.pump(qp)
	}
	return nil
}

// transitionType is the column of qpTransitions the QP follows.
func (qp *QP) transitionType() uint8 {
	if qp.gsi {
		return QPTypeGSI
	}
	return qp.typ
}

func (e *Engine) resetQP(qp *QP) {
	e.stopPolling(qp)
	qp.state = QPSReset
	qp.cur = nil
	qp.recv = recvState{}
	qp.rnrActive = false
	qp.sendMSN, qp.readMSN = 0, 0
	qp.conn = nil
	qp.lastWQEEvSent = false
	qp.gen++
	e.qpGen[qp.H] = qp.gen
	for i := range qp.ops {
		qp.ops[i].done, qp.ops[i].live = false, false
	}
}

// pmtu returns the QP's path MTU in bytes, capped by the transport.
func (e *Engine) pmtu(qp *QP) int {
	m := 4096
	if qp.attr.PathMTU >= 1 && qp.attr.PathMTU <= 5 {
		m = 128 << qp.attr.PathMTU
	}
	return min(m, e.cfg.PMTUCap)
}

// segMTU is the size the requester segments a QP's messages at on the
// connection c. A UD message is bounded by the QP's path MTU (a limit the
// application sees). RC and UC messages are segmented at the transport's
// MTU whatever path MTU the guest set: the segments never travel the path
// that MTU describes (the guest's Ethernet), and rdma_cm derives it from
// the netdev's 1500-byte MTU (IB_MTU_1024), which would make the NIC
// submit four times the transactions for the same data. The transport's
// MTU is PMTUCap, or more where the connection carries more (connSeg).
func (e *Engine) segMTU(qp *QP, c *falcon.Conn) int {
	if qp.typ == QPTypeUD {
		return e.pmtu(qp)
	}
	return e.connSeg(c)
}

// connSeg is the payload an RC or UC segment carries on c: PMTUCap, or
// the largest whole number of KiB that c's MTU holds with the headers
// (RDMAHeaderRoom) where that is more — a connection between two NICs of
// one daemon, whose link has no wire MTU (cm.Proto.Local).
func (e *Engine) connSeg(c *falcon.Conn) int {
	if c == nil {
		return e.cfg.PMTUCap
	}
	return max(e.cfg.PMTUCap, (c.MTU()-RDMAHeaderRoom)&^1023)
}

// RDMAHeaderRoom is what a connection's MTU must hold beside a segment's
// payload: the RDMA headers (RBTH and the largest extension headers) with
// room to spare, as the default MTU (4096 + 256) holds a 4 KiB segment.
const RDMAHeaderRoom = 256

// qpError moves qp to the error state: outstanding and posted send WQEs
// and posted receive WQEs complete with a flush error [IB 10.3.1]. code is
// the async event to raise (0 for none).
func (e *Engine) qpError(qp *QP, ev EventKind) {
	if qp.state == QPSErr {
		return
	}
	e.Stats.QPErrors.Inc()
	qp.state = QPSErr
	qp.cur = nil
	if ev != 0 {
		e.event(ev, qp.H, 0)
	}
	e.flush(qp)
}

// flush completes everything the QP holds with a flush error.
func (e *Engine) flush(qp *QP) {
	if e.cfg.Mem == nil {
		return
	}
	e.flushSQ(qp)
	if qp.recv.active {
		qp.recv.active = false
	}
	if qp.rq != nil {
		e.flushRQ(qp)
	} else if qp.srq != nil && !qp.lastWQEEvSent {
		qp.lastWQEEvSent = true
		e.event(EvQPLastWQE, qp.H, 0)
	}
}

// sqError moves a UC or UD QP to SQE after a send-side error: its send
// queue flushes, its receive side keeps working, and MODIFY_QP to RTS
// resumes it [IB 10.3.1 "Send Queue Error"].
func (e *Engine) sqError(qp *QP) {
	e.Stats.QPErrors.Inc()
	qp.state = QPSSQE
	qp.cur = nil
	e.flushSQ(qp)
}

// flushSQ completes every send WQE with a flush error.
func (e *Engine) flushSQ(qp *QP) {
	mem := e.cfg.Mem
	if mem == nil {
		return
	}
	// The flag goes before the producer index is read: a post after that
	// read rings, and the doorbell flushes it.
	e.stopPolling(qp)
	// Ops already taken from the ring complete with a flush error too,
	// even those the transport finished: they come after the failure.
	for qp.sqDone != qp.sqNext {
		op := &qp.ops[qp.sqDone&(uint32(len(qp.ops))-1)]
		op.done, op.status = true, WCFlushErr
		e.retire(qp, op)
	}
	if prod, err := qp.sq.Producer(mem); err == nil {
		n := qp.sq.Pending(prod, qp.sqNext)
		var w [8]byte
		for range n {
			if qp.sq.ReadSlot(mem, qp.sqNext, w[:]) != nil {
				break
			}
			e.Stats.Flushed.Inc()
			e.post(qp.scq, &Completion{WRID: le.Uint64(w[:]), Status: WCFlushErr, QPN: qp.H}, false)
			qp.sqNext++
		}
		qp.sqDone = qp.sqNext
		_ = qp.sq.SetConsumer(mem, qp.sqDone)
	}
}

func (e *Engine) flushRQ(qp *QP) {
	mem := e.cfg.Mem
	prod, err := qp.rq.Producer(mem)
	if err != nil {
		return
	}
	n := qp.rq.Pending(prod, qp.rqCons)
	var w [8]byte
	for range n {
		if qp.rq.ReadSlot(mem, qp.rqCons, w[:]) != nil {
			return
		}
		e.Stats.Flushed.Inc()
		if !e.post(qp.rcq, &Completion{WRID: le.Uint64(w[:]), Status: WCFlushErr, Opcode: WCRecv, QPN: qp.H}, false) {
			break
		}
		qp.rqCons++
	}
	_ = qp.rq.SetConsumer(mem, qp.rqCons)
}

// KickSQ is the SQ doorbell of QP h.
func (e *Engine) KickSQ(h uint32) {
	if qp, ok := e.qps[h]; ok {
		if e.poll.cfg.On {
			e.doorbell(qp)
		}
		e.pump(qp)
	}
}

// KickRQ is the RQ doorbell: in the error state new receive WQEs flush.
func (e *Engine) KickRQ(h uint32) {
	if qp, ok := e.qps[h]; ok && qp.state == QPSErr && qp.rq != nil {
		e.flushRQ(qp)
	}
}

// KickAll pumps every QP (a connection came up, or transport room freed).
func (e *Engine) KickAll() {
	for _, qp := range e.qps {
		e.pump(qp)
	}
}
