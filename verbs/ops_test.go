package verbs

import (
	"bytes"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/tl"
)

const rwAll = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

// rcPair sets up an RC (or UC) QP 16 on NIC A and QP 17 on NIC B, in RTS.
func rcPair(t *testing.T, typ uint8, rnrRetry uint8) (*world, *qpEnds, *qpEnds) {
	return rcPairLink(t, typ, rnrRetry, falcon.ConnConfig{}, link.MemConfig{})
}

func rcPairLink(t *testing.T, typ uint8, rnrRetry uint8, cc falcon.ConnConfig, ab link.MemConfig) (*world, *qpEnds, *qpEnds) {
	w := newWorld(t, cc, ab)
	for _, g := range []*guest{w.ga, w.gb} {
		if err := g.e.CreatePD(1); err != nil {
			t.Fatal(err)
		}
	}
	qa := w.ga.makeQP(16, 1, typ, 0)
	qb := w.gb.makeQP(17, 1, typ, 0)
	qa.connect(macB, 17, rnrRetry, 1)
	qb.connect(macA, 16, rnrRetry, 1)
	return w, qa, qb
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func oneWC(t *testing.T, r *gring) WC {
	t.Helper()
	wcs := r.poll()
	if len(wcs) != 1 {
		t.Fatalf("got %d CQEs, want 1", len(wcs))
	}
	return wcs[0]
}

func TestWriteMultiSegmentMultiSGE(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	src1 := w.ga.reg(1, 10000, AccessLocalWrite)
	src2 := w.ga.reg(1, 5000, AccessLocalWrite)
	dst := w.gb.reg(1, 15000, rwAll)
	fill(w.ga.bytes(src1), 1)
	fill(w.ga.bytes(src2), 99)
	qa.postSend(wqe{id: 42, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src1, src2}})
	w.run()
	wc := oneWC(t, qa.scq)
	if wc.Status() != WCSuccess || wc.WRID() != 42 || wc.Opcode() != WCWrite {
		t.Fatalf("wc status %v id %d op %d", wc.Status(), wc.WRID(), wc.Opcode())
	}
	want := append(append([]byte{}, w.ga.bytes(src1)...), w.ga.bytes(src2)...)
	if !bytes.Equal(w.gb.bytes(dst), want) {
		t.Fatal("remote buffer differs from the gathered SGEs")
	}
	if got := w.a.Stats.TxPush.Load(); got != 4 { // 15000 B at 4096 per segment
		t.Fatalf("pushes = %d, want 4", got)
	}
	if qa.sq.cons() != qa.sq.prod() {
		t.Fatal("SQ consumer index not advanced")
	}
}

func TestWriteWithImmConsumesRecv(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	src := w.ga.reg(1, 6000, AccessLocalWrite)
	dst := w.gb.reg(1, 6000, rwAll)
	rb := w.gb.reg(1, 64, AccessLocalWrite)
	qb.postRecv(7, rb)
	fill(w.ga.bytes(src), 3)
	qa.postSend(wqe{id: 1, op: WRWriteImm, imm: 0xdeadbeef, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess {
		t.Fatalf("send status %v", wc.Status())
	}
	wc := oneWC(t, qb.rcq)
	if wc.Status() != WCSuccess || wc.Opcode() != WCRecvRDMAImm || wc.Imm() != 0xdeadbeef || wc.WRID() != 7 ||
		wc.ByteLen() != 6000 || wc.Flags()&WCFlagWithImm == 0 || wc.QPNum() != 17 {
		t.Fatalf("recv wc: status %v op %d imm %x id %d len %d", wc.Status(), wc.Opcode(), wc.Imm(), wc.WRID(), wc.ByteLen())
	}
	if !bytes.Equal(w.gb.bytes(dst), w.ga.bytes(src)) {
		t.Fatal("data differs")
	}
}

func TestSendScattersIntoRecvSGEs(t *testing.T) {
	for _, imm := range []bool{false, true} {
		w, qa, qb := rcPair(t, QPTypeRC, 7)
		src := w.ga.reg(1, 9000, AccessLocalWrite)
		r1 := w.gb.reg(1, 4000, AccessLocalWrite)
		r2 := w.gb.reg(1, 6000, AccessLocalWrite)
		qb.postRecv(9, r1, r2)
		fill(w.ga.bytes(src), 5)
		op := uint32(WRSend)
		if imm {
			op = WRSendImm
		}
		qa.postSend(wqe{id: 2, op: op, imm: 77, sges: []buf{src}})
		w.run()
		if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess || wc.Opcode() != WCSend {
			t.Fatalf("send wc %v", wc.Status())
		}
		wc := oneWC(t, qb.rcq)
		if wc.Status() != WCSuccess || wc.Opcode() != WCRecv || wc.ByteLen() != 9000 || wc.WRID() != 9 {
			t.Fatalf("recv wc %v len %d", wc.Status(), wc.ByteLen())
		}
		if imm != (wc.Flags()&WCFlagWithImm != 0) || (imm && wc.Imm() != 77) {
			t.Fatalf("imm flag %x imm %d", wc.Flags(), wc.Imm())
		}
		got := append(append([]byte{}, w.gb.bytes(r1)...), w.gb.bytes(r2)[:5000]...)
		if !bytes.Equal(got, w.ga.bytes(src)) {
			t.Fatal("scattered data differs")
		}
	}
}

func TestInlineSend(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	rb := w.gb.reg(1, 128, AccessLocalWrite)
	qb.postRecv(1, rb)
	msg := []byte("inline data travels in the WQE")
	qa.postSend(wqe{id: 3, op: WRSend, inline: msg})
	w.run()
	oneWC(t, qa.scq)
	if wc := oneWC(t, qb.rcq); wc.ByteLen() != uint32(len(msg)) || !bytes.Equal(w.gb.bytes(rb)[:len(msg)], msg) {
		t.Fatalf("inline recv len %d", wc.ByteLen())
	}
}

func TestReadMultiSegment(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	remote := w.gb.reg(1, 10000, rwAll)
	l1 := w.ga.reg(1, 3000, AccessLocalWrite)
	l2 := w.ga.reg(1, 7000, AccessLocalWrite)
	fill(w.gb.bytes(remote), 11)
	qa.postSend(wqe{id: 4, op: WRRead, raddr: remote.va, rkey: remote.rkey, sges: []buf{l1, l2}})
	w.run()
	wc := oneWC(t, qa.scq)
	if wc.Status() != WCSuccess || wc.Opcode() != WCRead || wc.ByteLen() != 10000 {
		t.Fatalf("read wc %v op %d len %d", wc.Status(), wc.Opcode(), wc.ByteLen())
	}
	got := append(append([]byte{}, w.ga.bytes(l1)...), w.ga.bytes(l2)...)
	if !bytes.Equal(got, w.gb.bytes(remote)) {
		t.Fatal("read data differs")
	}
	if w.a.Stats.TxPull.Load() != 3 {
		t.Fatalf("pulls = %d, want 3", w.a.Stats.TxPull.Load())
	}
}

func TestAtomics(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	remote := w.gb.reg(1, 64, rwAll)
	res := w.ga.reg(1, 8, AccessLocalWrite)
	le.PutUint64(w.gb.bytes(remote), 100)
	qa.postSend(wqe{id: 5, op: WRFetchAdd, raddr: remote.va, rkey: remote.rkey, cmp: 23, sges: []buf{res}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess || wc.Opcode() != WCFetchAdd {
		t.Fatalf("fetch-add wc %v", wc.Status())
	}
	if le.Uint64(w.ga.bytes(res)) != 100 || le.Uint64(w.gb.bytes(remote)) != 123 {
		t.Fatalf("fetch-add: orig %d now %d", le.Uint64(w.ga.bytes(res)), le.Uint64(w.gb.bytes(remote)))
	}
	qa.postSend(wqe{id: 6, op: WRCmpSwap, raddr: remote.va, rkey: remote.rkey, cmp: 123, swap: 7, sges: []buf{res}})
	qa.postSend(wqe{id: 7, op: WRCmpSwap, raddr: remote.va, rkey: remote.rkey, cmp: 123, swap: 9, sges: []buf{res}})
	w.run()
	wcs := qa.scq.poll()
	if len(wcs) != 2 || wcs[0].Status() != WCSuccess || wcs[1].Status() != WCSuccess || wcs[0].WRID() != 6 {
		t.Fatalf("cmp-swap wcs %d", len(wcs))
	}
	if le.Uint64(w.gb.bytes(remote)) != 7 || le.Uint64(w.ga.bytes(res)) != 7 {
		t.Fatalf("cmp-swap: remote %d last orig %d", le.Uint64(w.gb.bytes(remote)), le.Uint64(w.ga.bytes(res)))
	}
}

func TestUnsignaledCompletions(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	src := w.ga.reg(1, 100, AccessLocalWrite)
	dst := w.gb.reg(1, 100, rwAll)
	qa.sq.post(func(b []byte) {
		s := SendWQE(b)
		s.SetWRID(1)
		s.SetOpcode(WRWrite)
		s.SetRemoteAddr(dst.va)
		s.SetRKey(dst.rkey)
		s.SGE(0).Set(src.va, 100, src.lkey)
		s.SetNumSGE(1)
		s.SetLength(100)
	})
	qa.postSend(wqe{id: 2, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.WRID() != 2 {
		t.Fatalf("only the signaled WQE completes, got id %d", wc.WRID())
	}
	if qa.sq.cons() != 2 {
		t.Fatalf("both WQEs retired, consumer %d", qa.sq.cons())
	}
}

func TestRemoteAccessErrors(t *testing.T) {
	cases := []struct {
		name   string
		op     uint32
		access uint32
		off    uint64
		n      int
	}{
		{"write without remote write", WRWrite, AccessLocalWrite | AccessRemoteRead, 0, 64},
		{"write past the MR", WRWrite, rwAll, 4000, 200},
		{"read without remote read", WRRead, AccessLocalWrite | AccessRemoteWrite, 0, 64},
		{"read past the MR", WRRead, rwAll, 4090, 64},
		{"atomic without remote atomic", WRFetchAdd, AccessLocalWrite | AccessRemoteRead, 0, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, qa, qb := rcPair(t, QPTypeRC, 7)
			remote := w.gb.reg(1, 4096, c.access)
			local := w.ga.reg(1, c.n, AccessLocalWrite)
			fill(w.ga.bytes(local), 1)
			before := append([]byte{}, w.gb.bytes(remote)...)
			qa.postSend(wqe{id: 9, op: c.op, raddr: remote.va + c.off, rkey: remote.rkey, sges: []buf{local}})
			qa.postSend(wqe{id: 10, op: WRWrite, raddr: remote.va, rkey: remote.rkey, sges: []buf{local}})
			w.run()
			wcs := qa.scq.poll()
			if len(wcs) != 2 || wcs[0].Status() != WCRemAccessErr || wcs[1].Status() != WCFlushErr {
				t.Fatalf("wcs %d: %v", len(wcs), wcs)
			}
			if s, _ := w.a.State(16); s != QPSErr {
				t.Fatalf("requester QP %v, want ERR", s)
			}
			if s, _ := w.b.State(17); s != QPSErr {
				t.Fatalf("responder QP %v, want ERR", s)
			}
			if !bytes.Equal(w.gb.bytes(remote), before) {
				t.Fatal("a refused access changed remote memory")
			}
			_ = qb
		})
	}
}

func TestLocalProtectionError(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	local := w.ga.reg(1, 100, AccessLocalWrite)
	dst := w.gb.reg(1, 4096, rwAll)
	local.n = 200 // SGE longer than the MR
	qa.postSend(wqe{id: 1, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{local}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCLocProtErr {
		t.Fatalf("status %v, want local-protection", wc.Status())
	}
	if w.b.Stats.RxWriteBytes.Load() != 0 {
		t.Fatal("data reached the responder")
	}
}

func TestRNRRetryExhaustion(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeRC, 2)
	src := w.ga.reg(1, 100, AccessLocalWrite)
	qa.postSend(wqe{id: 1, op: WRSend, sges: []buf{src}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCRNRRetryExcErr {
		t.Fatalf("status %v, want rnr-retry-exceeded", wc.Status())
	}
	if n := w.b.Stats.RxNoRecvWQE.Load(); n != 3 {
		t.Fatalf("RNR NACKs %d, want rnr_retry+1 = 3", n)
	}
	_ = qb
}

func TestRNRThenRecvPosted(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	src := w.ga.reg(1, 100, AccessLocalWrite)
	rb := w.gb.reg(1, 100, AccessLocalWrite)
	qa.postSend(wqe{id: 1, op: WRSend, sges: []buf{src}})
	for range 200 {
		w.p.Step()
		if w.b.Stats.RxNoRecvWQE.Load() >= 2 {
			break
		}
	}
	if w.b.Stats.RxNoRecvWQE.Load() < 2 {
		t.Fatal("no RNR seen")
	}
	qb.postRecv(5, rb)
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess {
		t.Fatalf("status %v", wc.Status())
	}
	if wc := oneWC(t, qb.rcq); wc.WRID() != 5 || wc.ByteLen() != 100 {
		t.Fatal("recv completion wrong")
	}
}

func TestRetryExhaustionMovesQPToError(t *testing.T) {
	w, qa, _ := rcPairLink(t, QPTypeRC, 7, falcon.ConnConfig{MaxRetries: 3, MaxRTO: time.Millisecond},
		link.MemConfig{DropProb: 1})
	src := w.ga.reg(1, 100, AccessLocalWrite)
	dst := w.gb.reg(1, 100, rwAll)
	qa.postSend(wqe{id: 1, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	qa.postSend(wqe{id: 2, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	w.run()
	wcs := qa.scq.poll()
	if len(wcs) != 2 || wcs[0].Status() != WCRetryExcErr || wcs[1].Status() != WCFlushErr {
		t.Fatalf("wcs %v", wcs)
	}
	if s, _ := w.a.State(16); s != QPSErr {
		t.Fatalf("QP %v", s)
	}
}

// Indices wrap the way librxe keeps them (masked): many more WQEs and
// CQEs than slots go through the rings.
func TestRingsWrap(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	src := w.ga.reg(1, 64, AccessLocalWrite)
	rb := w.gb.reg(1, 64, AccessLocalWrite)
	fill(w.ga.bytes(src), 1)
	got := 0
	for round := range 20 {
		for i := range 10 {
			qb.postRecv(uint64(round*10+i), rb)
			qa.postSend(wqe{id: uint64(round*10 + i), op: WRSend, sges: []buf{src}})
		}
		w.run()
		for _, wc := range qa.scq.poll() {
			if wc.Status() != WCSuccess || wc.WRID() != uint64(got) {
				t.Fatalf("CQE %d: status %v id %d", got, wc.Status(), wc.WRID())
			}
			got++
		}
		if n := len(qb.rcq.poll()); n != 10 {
			t.Fatalf("round %d: %d receive CQEs", round, n)
		}
	}
	if got != 200 {
		t.Fatalf("%d send CQEs", got)
	}
	if qa.sq.prod() >= qa.sq.slots || qa.sq.cons() != qa.sq.prod() {
		t.Fatalf("SQ indices prod %d cons %d", qa.sq.prod(), qa.sq.cons())
	}
}

// Under loss, reordering and duplication the transport recovers and every
// WQE completes once, in order, with the right data in place.
func TestOpsSurviveAnImpairedLink(t *testing.T) {
	ab := link.MemConfig{DropProb: 0.05, ReorderProb: 0.1, DupProb: 0.05, Seed: 7, Delay: 2 * time.Microsecond}
	ba := ab
	ba.Seed = 8
	w := newWorldLinks(t, falcon.ConnConfig{}, ab, ba)
	_ = w.a.CreatePD(1)
	_ = w.b.CreatePD(1)
	qa := w.ga.makeQP(16, 1, QPTypeRC, 0)
	qb := w.gb.makeQP(17, 1, QPTypeRC, 0)
	qa.connect(macB, 17, 7, 1)
	qb.connect(macA, 16, 7, 1)
	src := w.ga.reg(1, 20000, AccessLocalWrite)
	dst := w.gb.reg(1, 20000, rwAll)
	back := w.ga.reg(1, 20000, AccessLocalWrite)
	rb := w.gb.reg(1, 20000, AccessLocalWrite)
	for round := range 5 {
		fill(w.ga.bytes(src), byte(round))
		qb.postRecv(uint64(round), rb)
		qa.postSend(wqe{id: 1, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
		qa.postSend(wqe{id: 2, op: WRSend, sges: []buf{src}})
		qa.postSend(wqe{id: 3, op: WRRead, raddr: dst.va, rkey: dst.rkey, sges: []buf{back}})
		w.run()
		wcs := qa.scq.poll()
		if len(wcs) != 3 {
			t.Fatalf("round %d: %d CQEs", round, len(wcs))
		}
		for i, wc := range wcs {
			if wc.Status() != WCSuccess || wc.WRID() != uint64(i+1) {
				t.Fatalf("round %d CQE %d: %v id %d", round, i, wc.Status(), wc.WRID())
			}
		}
		if r := qb.rcq.poll(); len(r) != 1 || r[0].ByteLen() != 20000 {
			t.Fatalf("round %d: receive CQEs %d", round, len(r))
		}
		if !bytes.Equal(w.gb.bytes(dst), w.ga.bytes(src)) || !bytes.Equal(w.gb.bytes(rb), w.ga.bytes(src)) ||
			!bytes.Equal(w.ga.bytes(back), w.ga.bytes(src)) {
			t.Fatalf("round %d: data differs", round)
		}
	}
	if w.p.AB.Stats.DroppedRandom.Load() == 0 {
		t.Fatal("the link dropped nothing; the test proves nothing")
	}
}

// watchMem calls onWrite before every write into the guest's RAM.
type watchMem struct {
	Memory
	onWrite func(gpa uint64, b []byte)
}

func (m *watchMem) Write(gpa uint64, b []byte) error {
	m.onWrite(gpa, b)
	return m.Memory.Write(gpa, b)
}

// A latency loop with a one-entry SQ posts its next WQE the moment it
// polls the last completion, so the SQ slot must already be free when the
// CQE becomes visible (the CQ producer index moves).
func TestSQSlotIsFreeBeforeItsCompletionIsVisible(t *testing.T) {
	for _, op := range []uint32{WRRead, WRWrite, WRFetchAdd} {
		w, qa, _ := rcPair(t, QPTypeRC, 7)
		remote := w.gb.reg(1, 4096, rwAll)
		local := w.ga.reg(1, 4096, AccessLocalWrite)
		n := uint32(4096)
		if op == WRFetchAdd {
			n = 8
		}
		local.n = int(n)
		cqProd := qa.scq.gpa + ringProducerOff
		checked := 0
		w.a.cfg.Mem = &watchMem{Memory: w.ga.mem, onWrite: func(gpa uint64, b []byte) {
			if gpa == cqProd {
				checked++
				if qa.sq.cons() != qa.sq.prod() {
					t.Errorf("op %d: CQE published with SQ consumer %d, producer %d", op, qa.sq.cons(), qa.sq.prod())
				}
			}
		}}
		for i := range 3 {
			qa.postSend(wqe{id: uint64(i), op: op, raddr: remote.va, rkey: remote.rkey, sges: []buf{local}})
			w.run()
			if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess {
				t.Fatalf("op %d: wc %v", op, wc.Status())
			}
		}
		if checked != 3 {
			t.Fatalf("op %d: saw %d CQ producer writes, want 3", op, checked)
		}
	}
}

// TestResponsesWaitForTxDataRoom: a responder whose NIC has room for two
// Pull Data packets at a time answers a burst of READs and atomics as the
// room comes back (Falcon's Xon), not by dropping what it could not send
// at once: every READ returns its data, every atomic runs exactly once.
func TestResponsesWaitForTxDataRoom(t *testing.T) {
	lim := tl.DefaultLimits()
	lim.TxDataPkts, lim.TxDataCell = 2, 2*17
	w := newWorldLimits(t, falcon.ConnConfig{}, link.MemConfig{}, link.MemConfig{}, lim)
	for _, g := range []*guest{w.ga, w.gb} {
		if err := g.e.CreatePD(1); err != nil {
			t.Fatal(err)
		}
	}
	qa := w.ga.makeQP(16, 1, QPTypeRC, 0)
	qb := w.gb.makeQP(17, 1, QPTypeRC, 0)
	qa.connect(macB, 17, 7, 1)
	qb.connect(macA, 16, 7, 1)
	const reads, adds = 8, 8
	remote := w.gb.reg(1, reads*4096, rwAll)
	fill(w.gb.bytes(remote), 3)
	counter := w.gb.reg(1, 8, rwAll)
	local := w.ga.reg(1, reads*4096, AccessLocalWrite)
	orig := w.ga.reg(1, 8*adds, AccessLocalWrite)
	for i := range reads {
		l := buf{gpa: local.gpa + uint64(i*4096), va: local.va + uint64(i*4096), n: 4096, lkey: local.lkey}
		qa.postSend(wqe{id: uint64(i), op: WRRead, raddr: remote.va + uint64(i*4096), rkey: remote.rkey, sges: []buf{l}})
	}
	for i := range adds {
		o := buf{gpa: orig.gpa + uint64(i*8), va: orig.va + uint64(i*8), n: 8, lkey: orig.lkey}
		qa.postSend(wqe{id: uint64(100 + i), op: WRFetchAdd, raddr: counter.va, rkey: counter.rkey, cmp: 1, sges: []buf{o}})
	}
	w.run()
	wcs := qa.scq.poll()
	if len(wcs) != reads+adds {
		t.Fatalf("%d completions, want %d", len(wcs), reads+adds)
	}
	for _, wc := range wcs {
		if wc.Status() != WCSuccess {
			t.Fatalf("WR %d: %v", wc.WRID(), wc.Status())
		}
	}
	if !bytes.Equal(w.ga.bytes(local), w.gb.bytes(remote)) {
		t.Fatal("read data differs")
	}
	if got := le.Uint64(w.gb.bytes(counter)); got != adds {
		t.Fatalf("counter %d after %d fetch-adds of 1", got, adds)
	}
	if w.b.Stats.PullXoff.Load() == 0 {
		t.Fatal("no response waited for room: the test did not exercise it")
	}
}
