package verbs

import (
	"bytes"
	"encoding/binary"
	"testing"

	"falconnic/falcon"
	"falconnic/falcon/link"
)

// The guest kernel's ULPs (nvme-rdma, nvmet-rdma, xprtrdma) run RC QPs whose
// local SGEs name guest-physical memory (DMALKey) and expose memory to the
// peer through fast-registration MRs. These tests follow their flows.

// makeKernelRC creates a kernel consumer's RC QP (FALCONNIC_QP_F_KERNEL)
// with room for 4 SGEs or 128 inline bytes per send WQE.
func (g *guest) makeKernelRC(qpn, pd uint32) *qpEnds {
	q := &qpEnds{g: g, qpn: qpn}
	q.scq = g.ring(64, 6, 0, 0)
	q.rcq = g.ring(64, 6, 0, 0)
	if err := g.e.CreateCQ(qpn*10+1, q.scq.spec); err != nil {
		g.t.Fatal(err)
	}
	if err := g.e.CreateCQ(qpn*10+2, q.rcq.spec); err != nil {
		g.t.Fatal(err)
	}
	q.sq = g.ring(32, 9, 4, 128)
	q.rq = g.ring(32, 7, 4, 0)
	if err := g.e.CreateQP(QPSpec{H: qpn, PD: pd, SendCQ: qpn*10 + 1, RecvCQ: qpn*10 + 2, Type: QPTypeRC, Kernel: true,
		SQ: q.sq.spec, RQ: q.rq.spec}); err != nil {
		g.t.Fatal(err)
	}
	return q
}

// kernelPair is two NICs with a connected kernel RC QP each (16 on A, 17
// on B), as rdma_cm leaves them for nvme-rdma.
func kernelPair(t *testing.T) (*world, *qpEnds, *qpEnds) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	for _, g := range []*guest{w.ga, w.gb} {
		if err := g.e.CreatePD(1); err != nil {
			t.Fatal(err)
		}
	}
	qa := w.ga.makeKernelRC(16, 1)
	qb := w.gb.makeKernelRC(17, 1)
	qa.connect(macB, 17, 7, 1)
	qb.connect(macA, 16, 7, 1)
	return w, qa, qb
}

// fastMR is a fast-registration MR as the guest driver holds it: the page
// list it fills at map_mr_sg time, in guest memory.
type fastMRG struct {
	g        *guest
	h, key   uint32
	pblRoot  uint64
	capacity uint32
}

func (g *guest) allocMR(h, pd, key, capacity uint32) *fastMRG {
	root := g.alloc(PageSize)
	if err := g.e.AllocMR(FastMRSpec{H: h, PD: pd, Key: key,
		PBL: PBL{Root: root, NPages: capacity, Levels: 1, Shift: PageShift}}); err != nil {
		g.t.Fatalf("AllocMR: %v", err)
	}
	return &fastMRG{g: g, h: h, key: key, pblRoot: root, capacity: capacity}
}

// mapPages is map_mr_sg: the page list gets the GPAs of pages.
func (m *fastMRG) mapPages(pages ...uint64) {
	for i, p := range pages {
		binary.LittleEndian.PutUint64(m.g.mem.B[m.pblRoot-guestBase+uint64(i*8):], p)
	}
}

// postReg posts IB_WR_REG_MR.
func (q *qpEnds) postReg(id uint64, mr, key, access, npages uint32, iova, length uint64) {
	q.sq.post(func(b []byte) {
		s := SendWQE(b)
		s.SetWRID(id)
		s.SetOpcode(WRRegMR)
		s.SetFlags(sendFlagSignal)
		s.SetRegWR(mr, key, access, npages, iova, length)
	})
	q.g.e.KickSQ(q.qpn)
}

func wantWC(t *testing.T, r *gring, id uint64, st WCStatus, op uint32) WC {
	t.Helper()
	wc := oneWC(t, r)
	if wc.WRID() != id || wc.Status() != st || (st == WCSuccess && wc.Opcode() != op) {
		t.Fatalf("CQE id %d status %v opcode %d; want id %d status %v opcode %d", wc.WRID(), wc.Status(), wc.Opcode(),
			id, st, op)
	}
	return wc
}

const kva = 0xffff888000000000 // a kernel virtual address: the iova of FRWR MRs

// A kernel RC QP moves data with guest-physical SGEs: WRITE and READ to and
// from the peer's FRWR MR, SEND_WITH_IMM into a DMA receive buffer, and an
// inline SEND whose data travels in the WQE.
func TestKernelRCWriteReadSendInline(t *testing.T) {
	w, qa, qb := kernelPair(t)
	pg := w.gb.alloc(2 * PageSize)
	mr := w.gb.allocMR(50, 1, 0x3200, 8)
	mr.mapPages(pg, pg+PageSize)
	qb.postReg(1, 50, 0x3201, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead, 2, kva+0x100, 2*PageSize-0x100)
	w.run()
	wantWC(t, qb.scq, 1, WCSuccess, WCRegMR)

	src := w.ga.dmaBuf(5000)
	fill(w.ga.bytes(src), 5)
	qa.postSend(wqe{id: 2, op: WRWrite, raddr: kva + 0x100, rkey: 0x3201, sges: []buf{src}})
	w.run()
	wantWC(t, qa.scq, 2, WCSuccess, WCWrite)
	if !bytes.Equal(w.gb.mem.B[pg-guestBase+0x100:pg-guestBase+0x100+5000], w.ga.bytes(src)) {
		t.Fatal("WRITE data not at the registered pages")
	}

	dst := w.ga.dmaBuf(5000)
	qa.postSend(wqe{id: 3, op: WRRead, raddr: kva + 0x100, rkey: 0x3201, sges: []buf{dst}})
	w.run()
	wantWC(t, qa.scq, 3, WCSuccess, WCRead)
	if !bytes.Equal(w.ga.bytes(dst), w.ga.bytes(src)) {
		t.Fatal("READ returned other data")
	}

	rb := w.gb.dmaBuf(256)
	qb.postRecv(9, rb)
	qb.postRecv(10, w.gb.dmaBuf(256))
	msg := w.ga.dmaBuf(100)
	fill(w.ga.bytes(msg), 9)
	qa.postSend(wqe{id: 4, op: WRSendImm, imm: 0x01020304, sges: []buf{msg}})
	w.run()
	wantWC(t, qa.scq, 4, WCSuccess, WCSend)
	wc := wantWC(t, qb.rcq, 9, WCSuccess, WCRecv)
	if wc.Imm() != 0x01020304 || wc.Flags()&WCFlagWithImm == 0 || wc.ByteLen() != 100 {
		t.Fatalf("receive CQE imm %#x flags %#x len %d", wc.Imm(), wc.Flags(), wc.ByteLen())
	}

	qa.postSend(wqe{id: 5, op: WRSend, inline: []byte("nvme command capsule")})
	w.run()
	wantWC(t, qa.scq, 5, WCSuccess, WCSend)
	wantWC(t, qb.rcq, 10, WCSuccess, WCRecv)
}

// The FRWR cycle nvme-rdma runs per I/O: REG_MR (FREE → VALID), remote
// access, then invalidation by LOCAL_INV or by the peer's SEND_WITH_INV,
// whose receive completion says which rkey it invalidated. After each
// invalidation the old rkey fails remotely; the next registration uses the
// next key variant (ib_inc_rkey).
func TestFRWRLifecycle(t *testing.T) {
	w, qa, qb := kernelPair(t)
	pg := w.gb.alloc(PageSize)
	mr := w.gb.allocMR(50, 1, 0x3200, 4)
	if st, _ := w.b.MRState(50); st != MRFree {
		t.Fatalf("allocated MR is %v", st)
	}
	src := w.ga.dmaBuf(64)
	fill(w.ga.bytes(src), 1)
	write := func(id uint64, key uint32) {
		qa.postSend(wqe{id: id, op: WRWrite, raddr: kva, rkey: key, sges: []buf{src}})
		w.run()
	}
	// FREE: the allocated key translates nothing.
	write(1, 0x3200)
	wantWC(t, qa.scq, 1, WCRemAccessErr, 0)

	w, qa, qb = kernelPair(t)
	pg = w.gb.alloc(PageSize)
	mr = w.gb.allocMR(50, 1, 0x3200, 4)
	src = w.ga.dmaBuf(64)
	fill(w.ga.bytes(src), 1)
	mr.mapPages(pg)
	qb.postReg(1, 50, 0x3201, AccessLocalWrite|AccessRemoteWrite, 1, kva, PageSize)
	w.run()
	wantWC(t, qb.scq, 1, WCSuccess, WCRegMR)
	if st, _ := w.b.MRState(50); st != MRValid {
		t.Fatalf("after REG_MR: %v", st)
	}
	write(2, 0x3201)
	wantWC(t, qa.scq, 2, WCSuccess, WCWrite)

	// LOCAL_INV: VALID → FREE.
	qb.postSend(wqe{id: 3, op: WRLocalInv, inv: 0x3201})
	w.run()
	wantWC(t, qb.scq, 3, WCSuccess, WCLocalInv)
	if st, _ := w.b.MRState(50); st != MRFree {
		t.Fatalf("after LOCAL_INV: %v", st)
	}

	// Next variant; the peer's SEND_WITH_INV invalidates it.
	qb.postReg(4, 50, 0x3202, AccessLocalWrite|AccessRemoteWrite, 1, kva, PageSize)
	w.run()
	wantWC(t, qb.scq, 4, WCSuccess, WCRegMR)
	write(5, 0x3202)
	wantWC(t, qa.scq, 5, WCSuccess, WCWrite)
	qb.postRecv(6, w.gb.dmaBuf(64))
	qa.postSend(wqe{id: 7, op: WRSendInv, inv: 0x3202, sges: []buf{src}})
	w.run()
	wantWC(t, qa.scq, 7, WCSuccess, WCSend)
	wc := wantWC(t, qb.rcq, 6, WCSuccess, WCRecv)
	if wc.Flags()&WCFlagWithInv == 0 || wc.InvRKey() != 0x3202 {
		t.Fatalf("receive CQE flags %#x invalidated %#x", wc.Flags(), wc.InvRKey())
	}
	if st, _ := w.b.MRState(50); st != MRFree || w.b.Stats.RxRemoteInv.Load() != 1 {
		t.Fatalf("after SEND_WITH_INV: %v", st)
	}
	// The invalidated rkey fails remotely and touches nothing.
	before := bytes.Clone(w.gb.mem.B[pg-guestBase : pg-guestBase+PageSize])
	fill(w.ga.bytes(src), 77)
	write(8, 0x3202)
	wantWC(t, qa.scq, 8, WCRemAccessErr, 0)
	if !bytes.Equal(before, w.gb.mem.B[pg-guestBase:pg-guestBase+PageSize]) {
		t.Fatal("a WRITE with an invalidated rkey changed memory")
	}
}

// An FRWR MR exposes exactly [iova, iova+length) of the pages its REG_MR
// listed, in list order: nothing before the iova, nothing past the length,
// no page of the list's capacity beyond npages.
func TestFRWRExposesOnlyRegisteredPages(t *testing.T) {
	for _, c := range []struct {
		name string
		va   uint64
		n    int
		ok   bool
	}{
		{"inside", kva + 0x800, PageSize, true},
		{"before iova", kva + 0x7ff, 16, false},
		{"past length", kva + 0x1e00, 0x101, false},
		{"last byte", kva + 0x1eff, 1, true},
		{"unlisted page", kva + 3*PageSize, 16, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, qa, qb := kernelPair(t)
			p0, p1, p2 := w.gb.alloc(PageSize), w.gb.alloc(PageSize), w.gb.alloc(PageSize)
			mr := w.gb.allocMR(50, 1, 0x3200, 4)
			mr.mapPages(p1, p0, p2, p2) // listed in scrambled order; only 2 registered
			// [kva+0x800, kva+0x1f00): the second half of p1, most of p0.
			qb.postReg(1, 50, 0x3201, AccessLocalWrite|AccessRemoteWrite, 2, kva+0x800, 2*PageSize-0x800-0x100)
			w.run()
			wantWC(t, qb.scq, 1, WCSuccess, WCRegMR)
			src := w.ga.dmaBuf(c.n)
			fill(w.ga.bytes(src), 3)
			snap := bytes.Clone(w.gb.mem.B)
			qa.postSend(wqe{id: 2, op: WRWrite, raddr: c.va, rkey: 0x3201, sges: []buf{src}})
			w.run()
			if !c.ok {
				wantWC(t, qa.scq, 2, WCRemAccessErr, 0)
				if !bytes.Equal(snap, w.gb.mem.B) {
					t.Fatal("a refused WRITE changed guest memory")
				}
				return
			}
			wantWC(t, qa.scq, 2, WCSuccess, WCWrite)
			// Byte x of the MR is at list[(0x800+x)>>12].
			for i := 0; i < c.n; i++ {
				x := c.va - kva + uint64(i) // offset from the first listed page's start
				page := []uint64{p1, p0}[x>>PageShift]
				if w.gb.mem.B[page-guestBase+x&(PageSize-1)] != w.ga.bytes(src)[i] {
					t.Fatalf("byte %d not at its listed page", i)
				}
			}
		})
	}
}

// FALCONNIC_DMA_LKEY (0) names the local guest's physical memory for its
// own kernel QPs only: as an rkey it fails, for WRITE and for READ, even
// towards a kernel QP.
func TestDMALKeyIsNeverAnRKey(t *testing.T) {
	for _, op := range []uint32{WRWrite, WRRead} {
		w, qa, _ := kernelPair(t)
		target := w.gb.dmaBuf(64)
		fill(w.gb.bytes(target), 8)
		snap := bytes.Clone(w.gb.mem.B)
		local := w.ga.dmaBuf(64)
		qa.postSend(wqe{id: 1, op: op, raddr: target.gpa, rkey: DMALKey, sges: []buf{local}})
		w.run()
		wantWC(t, qa.scq, 1, WCRemAccessErr, 0)
		if !bytes.Equal(snap, w.gb.mem.B) {
			t.Fatal("DMA key as rkey changed memory")
		}
		if op == WRRead && bytes.Equal(w.ga.bytes(local), w.gb.bytes(target)) {
			t.Fatal("DMA key as rkey read the peer's memory")
		}
	}
}

// Every refused REG_MR completes with WCMWBindErr and leaves the MR FREE.
func TestFastRegRefusals(t *testing.T) {
	rw := uint32(AccessLocalWrite | AccessRemoteWrite)
	for _, c := range []struct {
		name   string
		mr     uint32
		key    uint32
		access uint32
		npages uint32
		pages  []uint64 // nil: one good page
		pd2    bool     // MR in another PD
		length uint64
	}{
		{name: "unknown MR", mr: 99, key: 0x3201, access: rw, npages: 1},
		{name: "other key index", mr: 50, key: 0x3301, access: rw, npages: 1},
		{name: "key 0", mr: 50, key: 0, access: rw, npages: 1},
		{name: "over capacity", mr: 50, key: 0x3201, access: rw, npages: 5},
		{name: "no pages", mr: 50, key: 0x3201, access: rw, npages: 0},
		{name: "remote write without local write", mr: 50, key: 0x3201, access: AccessRemoteWrite, npages: 1},
		{name: "page outside guest RAM", mr: 50, key: 0x3201, access: rw, npages: 1, pages: []uint64{1 << 40}},
		{name: "unaligned page", mr: 50, key: 0x3201, access: rw, npages: 1, pages: []uint64{guestBase + 8}},
		{name: "another PD's MR", mr: 50, key: 0x3201, access: rw, npages: 1, pd2: true},
		{name: "length past the pages", mr: 50, key: 0x3201, access: rw, npages: 1, length: PageSize + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, _, qb := kernelPair(t)
			pd := uint32(1)
			if c.pd2 {
				pd = 2
				_ = w.b.CreatePD(2)
			}
			mr := w.gb.allocMR(50, pd, 0x3200, 4)
			pages := c.pages
			if pages == nil {
				pages = []uint64{w.gb.alloc(PageSize)}
			}
			mr.mapPages(pages...)
			n := c.length
			if n == 0 {
				n = 64
			}
			qb.postReg(1, c.mr, c.key, c.access, c.npages, kva, n)
			w.run()
			wantWC(t, qb.scq, 1, WCMWBindErr, 0)
			if st, _ := w.b.MRState(50); st != MRFree || w.b.Stats.FastRegErr.Load() != 1 {
				t.Fatalf("MR %v, fast_reg_err %d", st, w.b.Stats.FastRegErr.Load())
			}
		})
	}
	// A VALID MR is not registered again before an invalidation.
	w, _, qb := kernelPair(t)
	mr := w.gb.allocMR(50, 1, 0x3200, 4)
	mr.mapPages(w.gb.alloc(PageSize))
	qb.postReg(1, 50, 0x3201, rw, 1, kva, 64)
	w.run()
	wantWC(t, qb.scq, 1, WCSuccess, WCRegMR)
	qb.postReg(2, 50, 0x3202, rw, 1, kva, 64)
	w.run()
	wantWC(t, qb.scq, 2, WCMWBindErr, 0)
}

// REG_MR and LOCAL_INV are kernel-only: a user QP posting them fails
// without touching the MR.
func TestLocalOpsAreKernelOnly(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	w.ga.allocMR(50, 1, 0x3200, 4).mapPages(w.ga.alloc(PageSize))
	qa.postReg(1, 50, 0x3201, AccessLocalWrite, 1, kva, 64)
	w.run()
	wantWC(t, qa.scq, 1, WCLocQPOpErr, 0)
	if st, _ := w.a.MRState(50); st != MRFree || w.a.Stats.WQEBadOpcode.Load() != 1 {
		t.Fatalf("MR %v after a user REG_MR", st)
	}
}

// LOCAL_INV and SEND_WITH_INV refuse user MRs (only fast-registration MRs
// are invalidated) and keys of another PD.
func TestInvalidateRefusals(t *testing.T) {
	w, qa, qb := kernelPair(t)
	user := w.gb.reg(1, 64, rwAll)
	qb.postSend(wqe{id: 1, op: WRLocalInv, inv: user.lkey})
	w.run()
	wantWC(t, qb.scq, 1, WCLocQPOpErr, 0)

	w, qa, qb = kernelPair(t)
	user = w.gb.reg(1, 64, rwAll)
	qb.postRecv(2, w.gb.dmaBuf(64))
	qa.postSend(wqe{id: 3, op: WRSendInv, inv: user.rkey, sges: []buf{w.ga.dmaBuf(8)}})
	w.run()
	wantWC(t, qa.scq, 3, WCRemInvReqErr, 0)
	wantWC(t, qb.rcq, 2, WCRemInvReqErr, 0)
	if w.b.Stats.RxRemoteInvErr.Load() != 1 {
		t.Fatal("remote invalidation of a user MR not counted")
	}
	// The user MR still works for a fresh QP pair (it was not invalidated).
	if mr := w.b.rkeys[user.rkey]; mr == nil || mr.state != MRValid {
		t.Fatal("user MR invalidated")
	}
}

// A REG_MR re-registering an MR waits for an earlier READ that lands in
// it: the READ's data reaches the pages of the registration it was posted
// under, not the new ones.
func TestRegMRWaitsForEarlierReadIntoTheMR(t *testing.T) {
	w, qa, _ := kernelPair(t)
	remote := w.gb.reg(1, 256, rwAll)
	fill(w.gb.bytes(remote), 42)
	oldPg, newPg := w.ga.alloc(PageSize), w.ga.alloc(PageSize)
	mr := w.ga.allocMR(50, 1, 0x3200, 1)
	mr.mapPages(oldPg)
	qa.postReg(1, 50, 0x3201, AccessLocalWrite, 1, kva, PageSize)
	w.run()
	wantWC(t, qa.scq, 1, WCSuccess, WCRegMR)
	// READ into the MR, LOCAL_INV, then REG_MR onto another page, posted
	// together; map_mr_sg rewrites the list before the READ lands.
	qa.postSend(wqe{id: 2, op: WRRead, raddr: remote.va, rkey: remote.rkey,
		sges: []buf{{va: kva, n: 256, lkey: 0x3201}}})
	qa.postSend(wqe{id: 3, op: WRLocalInv, inv: 0x3201})
	mr.mapPages(newPg)
	qa.postReg(4, 50, 0x3202, AccessLocalWrite, 1, kva, PageSize)
	w.run()
	wcs := qa.scq.poll()
	if len(wcs) != 3 || wcs[0].WRID() != 2 || wcs[2].WRID() != 4 {
		t.Fatalf("%d CQEs", len(wcs))
	}
	for _, wc := range wcs {
		if wc.Status() != WCSuccess {
			t.Fatalf("CQE %d: %v", wc.WRID(), wc.Status())
		}
	}
	if !bytes.Equal(w.ga.mem.B[oldPg-guestBase:oldPg-guestBase+256], w.gb.bytes(remote)) {
		t.Fatal("READ data not in the pages it was posted under")
	}
	if w.ga.mem.B[newPg-guestBase] != 0 {
		t.Fatal("READ data landed in the new registration")
	}
}

// AllocMR validates what the driver sends: key, capacity, page list.
func TestAllocMRRefusals(t *testing.T) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	_ = w.a.CreatePD(1)
	root := w.ga.alloc(PageSize)
	good := PBL{Root: root, NPages: 4, Levels: 1, Shift: PageShift}
	for _, c := range []struct {
		name string
		s    FastMRSpec
	}{
		{"key 0", FastMRSpec{H: 5, PD: 1, Key: 0, PBL: good}},
		{"key index 0", FastMRSpec{H: 5, PD: 1, Key: 0x17, PBL: good}},
		{"no PD", FastMRSpec{H: 5, PD: 2, Key: 0x500, PBL: good}},
		{"over the limit", FastMRSpec{H: 5, PD: 1, Key: 0x500, PBL: PBL{Root: root, NPages: pblEntries + 1, Levels: 2, Shift: PageShift}}},
		{"no capacity", FastMRSpec{H: 5, PD: 1, Key: 0x500, PBL: PBL{Root: root, Levels: 1, Shift: PageShift}}},
		{"root outside RAM", FastMRSpec{H: 5, PD: 1, Key: 0x500, PBL: PBL{Root: 1 << 40, NPages: 4, Levels: 1, Shift: PageShift}}},
		{"unaligned root", FastMRSpec{H: 5, PD: 1, Key: 0x500, PBL: PBL{Root: root + 8, NPages: 4, Levels: 1, Shift: PageShift}}},
		{"bad levels", FastMRSpec{H: 5, PD: 1, Key: 0x500, PBL: PBL{Root: root, NPages: 4, Levels: 3, Shift: PageShift}}},
	} {
		if err := w.a.AllocMR(c.s); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	if err := w.a.AllocMR(FastMRSpec{H: 5, PD: 1, Key: 0x500, PBL: good}); err != nil {
		t.Fatal(err)
	}
	if err := w.a.AllocMR(FastMRSpec{H: 6, PD: 1, Key: 0x500, PBL: good}); err == nil {
		t.Fatal("a key in use accepted")
	}
	if err := w.a.DestroyPD(1); err != ErrBusy {
		t.Fatalf("PD with an FRWR MR destroyed: %v", err)
	}
	if err := w.a.DeregMR(5); err != nil || w.a.mtt != 0 {
		t.Fatalf("dereg: %v, mtt %d", err, w.a.mtt)
	}
}

// A CQ in arm-word mode raises EV_CQ_COMP for a CQE written while its ring
// header's arm word is set, clears the word, and stays silent when it is
// not set; a solicited-only arm waits for a solicited or failed CQE.
func TestCQArmWord(t *testing.T) {
	w, qa, qb := kernelPair(t)
	rcq := qb.qpn*10 + 2
	if err := w.b.ArmCQ(rcq, ArmWord); err != nil {
		t.Fatal(err)
	}
	word := func() uint32 { return qb.rcq.u32(CQArmWordOff) }
	send := func(id uint64, flags uint32) {
		qb.postRecv(id, w.gb.dmaBuf(64))
		qa.postSend(wqe{id: id, op: WRSend, flags: flags, sges: []buf{w.ga.dmaBuf(8)}})
		w.run()
		qb.rcq.poll()
		qa.scq.poll()
	}
	events := func() (n int) {
		for _, e := range w.evB {
			if e.Kind == EvCQComp && e.Handle == rcq {
				n++
			}
		}
		return n
	}
	send(1, 0)
	if events() != 0 {
		t.Fatal("event without an arm")
	}
	qb.rcq.setU32(CQArmWordOff, ArmNext)
	send(2, 0)
	if events() != 1 || word() != 0 {
		t.Fatalf("events %d, word %#x after an armed CQE", events(), word())
	}
	send(3, 0)
	if events() != 1 {
		t.Fatal("a second event from one arm")
	}
	qb.rcq.setU32(CQArmWordOff, ArmSolicited)
	send(4, 0)
	if events() != 1 || word() != ArmSolicited {
		t.Fatalf("unsolicited CQE fired a solicited arm (events %d word %#x)", events(), word())
	}
	send(5, sendFlagSolic)
	if events() != 2 || word() != 0 {
		t.Fatalf("solicited CQE: events %d word %#x", events(), word())
	}
	if err := w.b.ArmCQ(rcq, 1<<3); err != ErrBadParam {
		t.Fatalf("unknown arm flag: %v", err)
	}
}

// FuzzKernelSendWQE puts arbitrary bytes in a send WQE slot of a kernel RC
// QP that owns a fast-registration MR (REG_MR, LOCAL_INV, SEND_WITH_INV and
// DMA-key SGEs reachable), then the peer writes through every key variant
// of that MR: nothing panics, and guest memory outside the one page the MR
// may list never changes.
func FuzzKernelSendWQE(f *testing.F) {
	seed := func(fill func(s SendWQE)) {
		b := make([]byte, 512)
		fill(SendWQE(b))
		f.Add(b)
	}
	seed(func(s SendWQE) {
		s.SetOpcode(WRRegMR)
		s.SetRegWR(50, 0x3201, AccessLocalWrite|AccessRemoteWrite, 1, kva, PageSize)
	})
	seed(func(s SendWQE) { s.SetOpcode(WRRegMR); s.SetRegWR(50, 0x3201, 0x1f, 4, ^uint64(0), 1<<40) })
	seed(func(s SendWQE) { s.SetOpcode(WRLocalInv); s.SetInvRKey(0x3200) })
	seed(func(s SendWQE) { s.SetOpcode(WRSendInv); s.SetInvRKey(0x3201) })
	seed(func(s SendWQE) {
		s.SetOpcode(WRWrite)
		s.SetNumSGE(1)
		s.SetLength(64)
		s.SGE(0).Set(guestBase, 64, DMALKey)
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, qa, qb := kernelPair(t)
		pg := w.gb.alloc(PageSize)
		w.gb.allocMR(50, 1, 0x3200, 4).mapPages(pg)
		snap := bytes.Clone(w.gb.mem.B)
		qb.sq.post(func(slot []byte) { copy(slot, b) })
		w.b.KickSQ(qb.qpn)
		w.run()
		src := w.ga.dmaBuf(PageSize)
		fill(w.ga.bytes(src), 1)
		for v := uint32(0); v < 4; v++ {
			qa.postSend(wqe{id: uint64(v), op: WRWrite, raddr: kva, rkey: 0x3200 + v, sges: []buf{src}})
		}
		w.run()
		// Only the MR's page and the rings the NIC writes may change.
		lo, hi := pg-guestBase, pg-guestBase+PageSize
		for i := range snap {
			if uint64(i) >= lo && uint64(i) < hi {
				continue
			}
			if snap[i] != w.gb.mem.B[i] && !inRing(uint64(i)+guestBase, qb) {
				t.Fatalf("guest byte at %#x changed", uint64(i)+guestBase)
			}
		}
	})
}

// inRing reports whether gpa is in one of q's rings.
func inRing(gpa uint64, q *qpEnds) bool {
	for _, r := range []*gring{q.sq, q.rq, q.scq, q.rcq} {
		if gpa >= r.gpa && gpa < r.gpa+RingHdrSize+uint64(r.slots)<<r.log2 {
			return true
		}
	}
	return false
}
