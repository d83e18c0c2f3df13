package verbs

import (
	"bytes"
	"testing"

	"falconnic/falcon"
	"falconnic/falcon/link"
)

// The QP state machine table [IB 11.2.4.2]: allowed transitions with
// their required attributes, per QP type.
func TestTransitionTable(t *testing.T) {
	rcInit := uint32(AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags)
	udInit := uint32(AttrState | AttrPKeyIndex | AttrPort | AttrQKey)
	rcRTR := uint32(AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtom | AttrMinRNRTimer)
	ucRTR := uint32(AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN)
	rcRTS := uint32(AttrState | AttrSQPSN | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic)
	cases := []struct {
		typ       uint8
		cur, next QPState
		mask      uint32
		ok        bool
	}{
		{QPTypeRC, QPSReset, QPSInit, rcInit, true},
		{QPTypeRC, QPSReset, QPSInit, AttrState | AttrPort, false}, // missing required
		{QPTypeUD, QPSReset, QPSInit, udInit, true},
		{QPTypeUD, QPSReset, QPSInit, rcInit, false}, // UD has no access flags, needs Q_Key
		{QPTypeRC, QPSReset, QPSRTR, rcRTR, false},   // skipping INIT
		{QPTypeRC, QPSInit, QPSRTR, rcRTR, true},
		{QPTypeUC, QPSInit, QPSRTR, ucRTR, true},
		{QPTypeUC, QPSInit, QPSRTR, rcRTR, false}, // UC takes no rd_atomic/min_rnr_timer
		{QPTypeUD, QPSInit, QPSRTR, AttrState, true},
		{QPTypeRC, QPSRTR, QPSRTS, rcRTS, true},
		{QPTypeUC, QPSRTR, QPSRTS, AttrState | AttrSQPSN, true},
		{QPTypeRC, QPSRTR, QPSRTS, AttrState | AttrSQPSN, false},
		{QPTypeRC, QPSRTS, QPSSQD, AttrState, true},
		{QPTypeRC, QPSSQD, QPSRTS, AttrState, true},
		{QPTypeRC, QPSSQE, QPSRTS, AttrState, false}, // RC never in SQE
		{QPTypeUD, QPSSQE, QPSRTS, AttrState, true},
		{QPTypeRC, QPSRTS, QPSInit, AttrState, false},
		{QPTypeRC, QPSRTS, QPSErr, AttrState, true},
		{QPTypeRC, QPSErr, QPSReset, AttrState, true},
		{QPTypeRC, QPSErr, QPSRTS, AttrState, false},
		{QPTypeRC, QPSInit, QPSReset, AttrState | AttrQKey, false},
		{QPTypeGSI, QPSReset, QPSInit, rcInit, false},
		// GSI is UD without the port, as ib_mad drives QP1.
		{QPTypeGSI, QPSReset, QPSInit, AttrState | AttrPKeyIndex | AttrQKey, true},
		{QPTypeGSI, QPSReset, QPSInit, udInit, false},
		{QPTypeGSI, QPSRTR, QPSRTS, AttrState | AttrSQPSN, true},
		{QPTypeGSI, QPSSQE, QPSRTS, AttrState | AttrCurState, true}, // ib_mad's recovery after a send error
		{0, QPSReset, QPSInit, udInit, false},
	}
	for _, c := range cases {
		if got := TransitionOK(c.typ, c.cur, c.next, c.mask); got != c.ok {
			t.Errorf("type %d %v→%v mask %#x: got %v want %v", c.typ, c.cur, c.next, c.mask, got, c.ok)
		}
	}
}

func TestEveryStateHasAName(t *testing.T) {
	for s := QPSReset; s < numQPStates; s++ {
		if s.String() == "" || s.String()[0] == 'Q' {
			t.Errorf("state %d has no name", s)
		}
	}
	for _, op := range []uint32{WRWrite, WRWriteImm, WRSend, WRSendImm, WRRead, WRCmpSwap, WRFetchAdd,
		WRLocalInv, WRSendInv, WRRegMR} {
		if wrOps[op].name == "" || wrOps[op].types == 0 {
			t.Errorf("WR opcode %d has no row", op)
		}
	}
	for op := range uint32(numWROpcodes) {
		if r := wrOps[op]; r.name == "" && r.types != 0 {
			t.Errorf("WR opcode %d has a row without a name", op)
		}
	}
}

func TestModifyQPRejectsBadTransitions(t *testing.T) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	_ = w.a.CreatePD(1)
	q := w.ga.makeQP(16, 1, QPTypeRC, 0)
	if err := w.a.ModifyQP(q.qpn, QPAttr{Mask: AttrState, State: QPSRTS}); err != ErrBadState {
		t.Fatalf("RESET→RTS: %v", err)
	}
	q.connect(macB, 17, 7, 1)
	if s, _ := w.a.State(16); s != QPSRTS {
		t.Fatalf("state %v", s)
	}
	a, _ := w.a.QueryQP(16)
	if a.DestQPN != 17 || a.PathMTU != 5 || a.RNRRetry != 7 || a.State != QPSRTS {
		t.Fatalf("query %+v", a)
	}
	if err := w.a.ModifyQP(q.qpn, QPAttr{Mask: AttrState | AttrCurState, State: QPSSQD, CurState: QPSInit}); err != ErrBadState {
		t.Fatalf("wrong cur state accepted: %v", err)
	}
	if err := w.a.ModifyQP(q.qpn, QPAttr{Mask: AttrState, State: QPSReset}); err != nil {
		t.Fatal(err)
	}
}

func TestModifyToErrorFlushesPostedWQEs(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	rb := w.gb.reg(1, 64, AccessLocalWrite)
	qb.postRecv(1, rb)
	qb.postRecv(2, rb)
	if err := w.b.ModifyQP(17, QPAttr{Mask: AttrState, State: QPSErr}); err != nil {
		t.Fatal(err)
	}
	wcs := qb.rcq.poll()
	if len(wcs) != 2 || wcs[0].Status() != WCFlushErr || wcs[1].WRID() != 2 {
		t.Fatalf("recv flush: %d CQEs", len(wcs))
	}
	// A SEND to a QP in ERR fails at the requester.
	src := w.ga.reg(1, 64, AccessLocalWrite)
	qa.postSend(wqe{id: 3, op: WRSend, sges: []buf{src}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCRemInvReqErr {
		t.Fatalf("send to ERR QP: %v", wc.Status())
	}
}

func TestCQOverflowRaisesErrorEvent(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	src := w.ga.reg(1, 8, AccessLocalWrite)
	dst := w.gb.reg(1, 8, rwAll)
	// The send CQ has 64 slots: 63 usable. Post 31 twice without polling.
	for range 2 {
		for i := range 31 {
			qa.postSend(wqe{id: uint64(i), op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
		}
		w.run()
	}
	qa.postSend(wqe{id: 99, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	qa.postSend(wqe{id: 100, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	w.run()
	if w.a.Stats.CQOverflow.Load() == 0 {
		t.Fatal("no overflow counted")
	}
	found := false
	for _, e := range w.evA {
		if e.Kind == EvCQErr && e.Handle == 16*10+1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no CQ error event: %v", w.evA)
	}
	if s, _ := w.a.State(16); s != QPSErr {
		t.Fatalf("QP %v after CQ overflow", s)
	}
	if n := len(qa.scq.poll()); n != 63 {
		t.Fatalf("%d CQEs, want a full CQ of 63", n)
	}
}

func TestArmedCQRaisesOneEvent(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	if err := w.b.ArmCQ(172, ArmNext); err != nil {
		t.Fatal(err)
	}
	rb := w.gb.reg(1, 64, AccessLocalWrite)
	src := w.ga.reg(1, 8, AccessLocalWrite)
	qb.postRecv(1, rb)
	qb.postRecv(2, rb)
	qa.postSend(wqe{id: 1, op: WRSend, sges: []buf{src}})
	qa.postSend(wqe{id: 2, op: WRSend, sges: []buf{src}})
	w.run()
	n := 0
	for _, e := range w.evB {
		if e.Kind == EvCQComp && e.Handle == 172 {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d completion events, want 1", n)
	}
}

func TestUDSendAndQKey(t *testing.T) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	_ = w.a.CreatePD(1)
	_ = w.b.CreatePD(1)
	qa := w.ga.makeQP(20, 1, QPTypeUD, 0)
	qb := w.gb.makeQP(21, 1, QPTypeUD, 0)
	qa.connect(MAC{}, 0, 0, 0)
	qb.connect(MAC{}, 0, 0, 0)
	if err := w.a.CreateAH(5, 1, AV{DMAC: macB}); err != nil {
		t.Fatal(err)
	}
	src := w.ga.reg(1, 1000, AccessLocalWrite)
	rb := w.gb.reg(1, 2048, AccessLocalWrite)
	fill(w.ga.bytes(src), 9)
	qb.postRecv(1, rb)
	qa.postSend(wqe{id: 1, op: WRSendImm, imm: 5, ah: 5, rqpn: 21, qkey: 0x11111111, sges: []buf{src}})
	qa.postSend(wqe{id: 2, op: WRSend, ah: 5, rqpn: 21, qkey: 0x22222222, sges: []buf{src}}) // wrong Q_Key
	qb.postRecv(3, rb)
	qa.postSend(wqe{id: 3, op: WRSend, ah: 5, rqpn: 21, qkey: 0x80000000, sges: []buf{src}}) // the QP's Q_Key
	w.run()
	wcs := qa.scq.poll()
	if len(wcs) != 3 || wcs[0].Status() != WCSuccess || wcs[1].Status() != WCSuccess {
		t.Fatalf("UD sends: %d", len(wcs))
	}
	rcqes := qb.rcq.poll()
	if len(rcqes) != 2 || rcqes[1].WRID() != 3 {
		t.Fatalf("UD receives: %d", len(rcqes))
	}
	wc := rcqes[0]
	if wc.ByteLen() != 1000+grhLen || wc.SrcQP() != 20 || wc.Flags()&WCFlagGRH == 0 || wc.Imm() != 5 {
		t.Fatalf("UD recv: len %d src %d flags %x", wc.ByteLen(), wc.SrcQP(), wc.Flags())
	}
	if !bytes.Equal(w.gb.bytes(rb)[grhLen:grhLen+1000], w.ga.bytes(src)) {
		t.Fatal("UD payload differs")
	}
	if w.b.Stats.RxUDQKeyDrop.Load() != 1 {
		t.Fatal("wrong Q_Key not dropped")
	}
	// Over the MTU fails locally.
	big := w.ga.reg(1, 5000, AccessLocalWrite)
	qa.postSend(wqe{id: 3, op: WRSend, ah: 5, rqpn: 21, qkey: 0x11111111, sges: []buf{big}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCLocLenErr {
		t.Fatalf("UD over MTU: %v", wc.Status())
	}
}

func TestSRQSharedByTwoQPs(t *testing.T) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	_ = w.a.CreatePD(1)
	_ = w.b.CreatePD(1)
	srq := w.gb.ring(16, 7, 2, 0)
	if err := w.b.CreateSRQ(3, 1, 2, srq.spec); err != nil {
		t.Fatal(err)
	}
	qa1 := w.ga.makeQP(16, 1, QPTypeRC, 0)
	qa2 := w.ga.makeQP(18, 1, QPTypeRC, 0)
	qb1 := w.gb.makeQP(17, 1, QPTypeRC, 3)
	qb2 := w.gb.makeQP(19, 1, QPTypeRC, 3)
	qa1.connect(macB, 17, 7, 1)
	qa2.connect(macB, 19, 7, 1)
	qb1.connect(macA, 16, 7, 1)
	qb2.connect(macA, 18, 7, 1)
	rb := w.gb.reg(1, 256, AccessLocalWrite)
	for i := range 3 {
		srq.post(func(b []byte) {
			r := RecvWQE(b)
			r.SetWRID(uint64(100 + i))
			r.SGE(0).Set(rb.va, 256, rb.lkey)
			r.SetNumSGE(1)
			r.SetLength(256)
		})
	}
	src := w.ga.reg(1, 10, AccessLocalWrite)
	qa1.postSend(wqe{id: 1, op: WRSend, sges: []buf{src}})
	qa2.postSend(wqe{id: 2, op: WRSend, sges: []buf{src}})
	w.run()
	if a, b := len(qb1.rcq.poll()), len(qb2.rcq.poll()); a != 1 || b != 1 {
		t.Fatalf("recv CQEs %d/%d", a, b)
	}
	if srq.cons() != 2 {
		t.Fatalf("SRQ consumer %d", srq.cons())
	}
	limit := false
	for _, e := range w.evB {
		limit = limit || (e.Kind == EvSRQLimit && e.Handle == 3)
	}
	if !limit {
		t.Fatal("SRQ limit event not raised")
	}
	if err := w.b.DestroySRQ(3); err != ErrBusy {
		t.Fatalf("destroy SRQ in use: %v", err)
	}
}

func TestUCSendAndWrite(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeUC, 0)
	src := w.ga.reg(1, 5000, AccessLocalWrite)
	dst := w.gb.reg(1, 5000, rwAll)
	rb := w.gb.reg(1, 5000, AccessLocalWrite)
	fill(w.ga.bytes(src), 2)
	qb.postRecv(1, rb)
	qa.postSend(wqe{id: 1, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	qa.postSend(wqe{id: 2, op: WRSend, sges: []buf{src}})
	qa.postSend(wqe{id: 3, op: WRRead, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	w.run()
	wcs := qa.scq.poll()
	if len(wcs) != 3 || wcs[0].Status() != WCSuccess || wcs[1].Status() != WCSuccess || wcs[2].Status() != WCLocQPOpErr {
		t.Fatalf("UC wcs %d", len(wcs))
	}
	if !bytes.Equal(w.gb.bytes(dst), w.ga.bytes(src)) || !bytes.Equal(w.gb.bytes(rb), w.ga.bytes(src)) {
		t.Fatal("UC data differs")
	}
}

func TestResetReclaimsEverything(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	src := w.ga.reg(1, 100, AccessLocalWrite)
	dst := w.gb.reg(1, 100, rwAll)
	qa.postSend(wqe{id: 1, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	n := w.a.Reset() // with the WRITE in flight
	if n != 1+1+2+1 || w.a.Objects() != 0 || w.a.Stats.Reclaimed.Load() != uint64(n) {
		t.Fatalf("reclaimed %d, objects left %d", n, w.a.Objects())
	}
	w.run()
	if w.a.Stats.CplStale.Load() == 0 {
		t.Fatal("the in-flight completion should be ignored as stale")
	}
}

func TestBadPBLRejected(t *testing.T) {
	g := newGuest(t, 1<<20)
	g.e = New(Config{Mem: g.mem})
	_ = g.e.CreatePD(1)
	root := g.alloc(PageSize)
	le.PutUint64(g.mem.B[root-guestBase:], 0x1_0000_0000) // outside guest RAM
	err := g.e.RegMR(MRSpec{H: 1, PD: 1, LKey: 1, IOVA: 0, Len: 100, Access: AccessLocalWrite,
		PBL: PBL{Root: root, NPages: 1, Levels: 1, Shift: PageShift}})
	if err != ErrBadGPA {
		t.Fatalf("page outside RAM: %v", err)
	}
	err = g.e.RegMR(MRSpec{H: 1, PD: 1, LKey: 1, IOVA: 0, Len: 2 * PageSize, Access: AccessLocalWrite,
		PBL: g.pbl(g.alloc(PageSize), PageSize)})
	if err != ErrBadParam {
		t.Fatalf("MR longer than its pages: %v", err)
	}
	if err := g.e.RegMR(MRSpec{H: 2, PD: 1, LKey: 2, RKey: 3, Len: 10, Access: AccessRemoteWrite,
		PBL: g.pbl(g.alloc(PageSize), PageSize)}); err != ErrBadAccess {
		t.Fatalf("remote write without local write: %v", err)
	}
}

// A UD send error moves the QP to SQE, not ERR: receives keep working and
// MODIFY_QP back to RTS resumes sending.
func TestUDSendErrorGoesToSQE(t *testing.T) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	_ = w.a.CreatePD(1)
	_ = w.b.CreatePD(1)
	qa := w.ga.makeQP(20, 1, QPTypeUD, 0)
	qb := w.gb.makeQP(21, 1, QPTypeUD, 0)
	qa.connect(MAC{}, 0, 0, 0)
	qb.connect(MAC{}, 0, 0, 0)
	_ = w.a.CreateAH(5, 1, AV{DMAC: macB})
	_ = w.b.CreateAH(6, 1, AV{DMAC: macA})
	src := w.ga.reg(1, 100, AccessLocalWrite)
	bad := src
	bad.lkey = 0xdead
	qa.postSend(wqe{id: 1, op: WRSend, ah: 5, rqpn: 21, qkey: 0x11111111, sges: []buf{bad}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCLocProtErr {
		t.Fatalf("status %v", wc.Status())
	}
	if s, _ := w.a.State(20); s != QPSSQE {
		t.Fatalf("state %v, want SQE", s)
	}
	// The receive side still works.
	rb := w.ga.reg(1, 256, AccessLocalWrite)
	qa.postRecv(7, rb)
	bsrc := w.gb.reg(1, 10, AccessLocalWrite)
	qb.postSend(wqe{id: 1, op: WRSend, ah: 6, rqpn: 20, qkey: 0x11111111, sges: []buf{bsrc}})
	w.run()
	if wc := oneWC(t, qa.rcq); wc.Status() != WCSuccess || wc.WRID() != 7 {
		t.Fatalf("receive in SQE: %v", wc.Status())
	}
	if err := w.a.ModifyQP(20, QPAttr{Mask: AttrState, State: QPSRTS}); err != nil {
		t.Fatal(err)
	}
	qa.postSend(wqe{id: 2, op: WRSend, ah: 5, rqpn: 21, qkey: 0x11111111, sges: []buf{src}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess {
		t.Fatalf("after SQE→RTS: %v", wc.Status())
	}
}

// The NIC's MTT is bounded: page lists cannot make it hold more entries
// than MaxMTTPages (a guest may list one page many times, so its RAM is no
// bound), and entries come back when objects go.
func TestMTTIsBounded(t *testing.T) {
	g := newGuest(t, 1<<20)
	lim := DefaultLimits()
	lim.MaxMTTPages = 3
	g.e = New(Config{Mem: g.mem, Limits: lim})
	_ = g.e.CreatePD(1)
	pg := g.alloc(PageSize)
	reg := func(h uint32, pages int) error {
		return g.e.RegMR(MRSpec{H: h, PD: 1, LKey: h, Len: uint64(pages * PageSize), Access: AccessLocalWrite,
			PBL: g.pbl(pg, pages*PageSize)})
	}
	if err := reg(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := reg(2, 2); err != ErrNoResources {
		t.Fatalf("over the MTT: %v", err)
	}
	if err := g.e.DeregMR(1); err != nil {
		t.Fatal(err)
	}
	if err := reg(3, 3); err != nil {
		t.Fatalf("after dereg: %v", err)
	}
}
