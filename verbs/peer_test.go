package verbs

import (
	"encoding/binary"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/sim"
	"falconnic/falcon/tl"
)

// guest is the test peer's side of one VM: fake guest RAM, a page
// allocator, and librxe's half of the rings.
type guest struct {
	t    *testing.T
	mem  *FlatMemory
	next uint64
	e    *Engine
}

const guestBase = 0x100000

func newGuest(t *testing.T, size int) *guest {
	return &guest{t: t, mem: &FlatMemory{Base: guestBase, B: make([]byte, size)}, next: guestBase}
}

// alloc returns the GPA of n bytes of page-aligned, contiguous memory.
func (g *guest) alloc(n int) uint64 {
	a := g.next
	g.next += uint64((n + PageSize - 1) &^ (PageSize - 1))
	if g.next > g.mem.Base+uint64(len(g.mem.B)) {
		g.t.Fatal("guest out of memory")
	}
	return a
}

// pbl writes a one-level page list for the pages of [gpa, gpa+n) in
// reverse order of a fresh allocation when scramble is set (the NIC must
// follow the list, not assume contiguity).
func (g *guest) pbl(gpa uint64, n int) PBL {
	np := (n + PageSize - 1) / PageSize
	root := g.alloc(PageSize)
	for i := range np {
		binary.LittleEndian.PutUint64(g.mem.B[root-guestBase+uint64(i*8):], gpa+uint64(i*PageSize))
	}
	return PBL{Root: root, NPages: uint32(np), Levels: 1, Shift: PageShift}
}

// gring is librxe's view of a ring.
type gring struct {
	g     *guest
	gpa   uint64
	slots uint32
	log2  uint32
	spec  RingSpec
}

func (g *guest) ring(slots, log2, maxSGE, maxInline uint32) *gring {
	size := RingHdrSize + int(slots<<log2)
	gpa := g.alloc(size)
	le.PutUint32(g.mem.B[gpa-guestBase:], log2)
	le.PutUint32(g.mem.B[gpa-guestBase+4:], slots-1)
	return &gring{g: g, gpa: gpa, slots: slots, log2: log2,
		spec: RingSpec{PBL: g.pbl(gpa, size), Slots: slots, Log2Elem: log2, MaxSGE: maxSGE, MaxInline: maxInline}}
}

func (r *gring) u32(off uint64) uint32 { return le.Uint32(r.g.mem.B[r.gpa-guestBase+off:]) }
func (r *gring) setU32(off uint64, v uint32) {
	le.PutUint32(r.g.mem.B[r.gpa-guestBase+off:], v)
}
func (r *gring) prod() uint32 { return r.u32(ringProducerOff) }
func (r *gring) cons() uint32 { return r.u32(ringConsumerOff) }
func (r *gring) slot(i uint32) []byte {
	o := r.gpa - guestBase + RingHdrSize + uint64(i&(r.slots-1))<<r.log2
	return r.g.mem.B[o : o+1<<r.log2]
}

// full is librxe's queue_full.
func (r *gring) full() bool { return (r.prod()+1)&(r.slots-1) == r.cons()&(r.slots-1) }

// post fills the next slot with fill and publishes it.
func (r *gring) post(fill func(b []byte)) {
	if r.full() {
		r.g.t.Fatal("ring full")
	}
	b := r.slot(r.prod())
	clear(b)
	fill(b)
	r.setU32(ringProducerOff, (r.prod()+1)&(r.slots-1)) // librxe's advance_producer
}

// poll takes every CQE the NIC produced.
func (r *gring) poll() []WC {
	var out []WC
	for r.cons() != r.prod() {
		w := make([]byte, WCSize)
		copy(w, r.slot(r.cons()))
		out = append(out, WC(w))
		r.setU32(ringConsumerOff, (r.cons()+1)&(r.slots-1)) // librxe's advance_consumer
	}
	return out
}

// buf is a registered buffer.
type buf struct {
	gpa, va    uint64
	n          int
	lkey, rkey uint32
}

func (g *guest) bytes(b buf) []byte { return g.mem.B[b.gpa-guestBase : b.gpa-guestBase+uint64(b.n)] }

var nextKey uint32 = 0x100

func (g *guest) reg(pd uint32, n int, access uint32) buf {
	gpa := g.alloc(n)
	nextKey += 2
	b := buf{gpa: gpa, va: 0x7f0000000000 + gpa, n: n, lkey: nextKey, rkey: nextKey + 1}
	if access&(AccessRemoteRead|AccessRemoteWrite|AccessRemoteAtomic) == 0 {
		b.rkey = 0
	}
	if err := g.e.RegMR(MRSpec{H: nextKey, PD: pd, LKey: b.lkey, RKey: b.rkey, IOVA: b.va, Len: uint64(n),
		Access: access, PBL: g.pbl(gpa, n)}); err != nil {
		g.t.Fatalf("RegMR: %v", err)
	}
	return b
}

// qpEnds is one QP with its rings and CQs, as a guest holds it.
type qpEnds struct {
	g        *guest
	qpn      uint32
	sq, rq   *gring
	scq, rcq *gring
}

// world is two NICs (engines A and B) on a sim.Pair.
type world struct {
	t      *testing.T
	p      *sim.Pair
	a, b   *Engine
	ga, gb *guest
	evA    []Event
	evB    []Event
}

type connsFn func(MAC) *falcon.Conn

func (f connsFn) Lookup(m MAC) *falcon.Conn { return f(m) }

var macA, macB = MAC{2, 0, 0, 0, 0, 0xa}, MAC{2, 0, 0, 0, 0, 0xb}

func newWorld(t *testing.T, cc falcon.ConnConfig, ab link.MemConfig) *world {
	return newWorldLinks(t, cc, ab, link.MemConfig{})
}

func newWorldLinks(t *testing.T, cc falcon.ConnConfig, ab, ba link.MemConfig) *world {
	return newWorldLimits(t, cc, ab, ba, tl.Limits{})
}

// newWorldLimits is newWorldLinks with both NICs' resource pools sized by
// lim (zero: Falcon's defaults).
func newWorldLimits(t *testing.T, cc falcon.ConnConfig, ab, ba link.MemConfig, lim tl.Limits) *world {
	w := &world{t: t, ga: newGuest(t, 16<<20), gb: newGuest(t, 16<<20)}
	w.a = New(Config{Mem: w.ga.mem, Events: func(e Event) { w.evA = append(w.evA, e) }})
	w.b = New(Config{Mem: w.gb.mem, Events: func(e Event) { w.evB = append(w.evB, e) }})
	w.ga.e, w.gb.e = w.a, w.b
	if cc.SCID == 0 {
		cc.SCID, cc.DCID = 1, 2
	}
	cc.Ordered = true
	p, err := sim.NewPair(sim.PairConfig{Conn: cc, ULPA: w.a, ULPB: w.b, AB: ab, BA: ba, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	w.p = p
	w.a.SetConns(connsFn(func(m MAC) *falcon.Conn {
		if m == macB {
			return p.CA
		}
		return nil
	}))
	w.b.SetConns(connsFn(func(m MAC) *falcon.Conn {
		if m == macA {
			return p.CB
		}
		return nil
	}))
	return w
}

// run steps the pair until nothing is pending (bounded in simulated time).
func (w *world) run() {
	w.p.RunUntil(func() bool { return false }, 10*time.Second)
}

// makeQP creates a QP of type typ with its own CQs on g.
func (g *guest) makeQP(qpn, pd uint32, typ uint8, srq uint32) *qpEnds {
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
	spec := QPSpec{H: qpn, PD: pd, SendCQ: qpn*10 + 1, RecvCQ: qpn*10 + 2, SRQ: srq, Type: typ, SQ: q.sq.spec}
	if srq == 0 {
		q.rq = g.ring(32, 7, 4, 0)
		spec.RQ = q.rq.spec
	}
	if err := g.e.CreateQP(spec); err != nil {
		g.t.Fatal(err)
	}
	return q
}

// connect brings a QP to RTS towards the peer NIC's QP dqpn.
func (q *qpEnds) connect(peer MAC, dqpn uint32, rnrRetry, minRNR uint8) {
	e, t := q.g.e, q.g.t
	typ := e.qps[q.qpn].typ
	steps := []QPAttr{
		{Mask: AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags | AttrQKey, State: QPSInit,
			Access: AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessLocalWrite, QKey: 0x11111111},
		{Mask: AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtom | AttrMinRNRTimer,
			State: QPSRTR, AV: AV{DMAC: peer}, PathMTU: 5, DestQPN: dqpn, MinRNRTimer: minRNR},
		{Mask: AttrState | AttrSQPSN | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic, State: QPSRTS,
			RNRRetry: rnrRetry, RetryCnt: 7, Timeout: 14},
	}
	for i := range steps {
		a := steps[i]
		switch typ {
		case QPTypeUD:
			a.Mask &^= AttrAccessFlags | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtom | AttrMinRNRTimer |
				AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic
		case QPTypeUC:
			a.Mask &^= AttrQKey | AttrMaxDestRdAtom | AttrMinRNRTimer | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic
		default:
			a.Mask &^= AttrQKey
		}
		if err := e.ModifyQP(q.qpn, a); err != nil {
			t.Fatalf("modify QP %d to %v: %v", q.qpn, a.State, err)
		}
	}
}

// wqe describes a send WQE to post.
type wqe struct {
	id        uint64
	op        uint32
	flags     uint32
	imm       uint32
	raddr     uint64
	rkey      uint32
	cmp, swap uint64
	sges      []buf // whole buffers unless lens set
	lens      []int
	inline    []byte
	ah, rqpn  uint32
	qkey      uint32
	inv       uint32 // LOCAL_INV, SEND_WITH_INV
}

func (q *qpEnds) postSend(w wqe) {
	q.putSend(w)
	q.g.e.KickSQ(q.qpn)
}

// putSend writes a send WQE and publishes it without a doorbell.
func (q *qpEnds) putSend(w wqe) {
	q.sq.post(func(b []byte) {
		s := SendWQE(b)
		s.SetWRID(w.id)
		s.SetOpcode(w.op)
		s.SetFlags(w.flags | sendFlagSignal)
		s.SetImm(w.imm)
		if w.op == WRSendInv || w.op == WRLocalInv {
			s.SetInvRKey(w.inv)
		}
		switch w.op {
		case WRCmpSwap, WRFetchAdd:
			s.SetRemoteAddr(w.raddr)
			s.SetCompareAdd(w.cmp)
			s.SetSwap(w.swap)
			s.SetAtomicRKey(w.rkey)
		default:
			if w.ah != 0 {
				s.SetRemoteQPN(w.rqpn)
				s.SetRemoteQKey(w.qkey)
				s.SetAHNum(w.ah)
			} else {
				s.SetRemoteAddr(w.raddr)
				s.SetRKey(w.rkey)
			}
		}
		if w.inline != nil {
			s.SetFlags(s.Flags() | sendFlagInline)
			s.SetLength(uint32(len(w.inline)))
			copy(s.Inline(), w.inline)
			return
		}
		total := 0
		for i, g := range w.sges {
			n := g.n
			if w.lens != nil {
				n = w.lens[i]
			}
			s.SGE(i).Set(g.va, uint32(n), g.lkey)
			total += n
		}
		s.SetNumSGE(uint32(len(w.sges)))
		s.SetLength(uint32(total))
	})
}

func (q *qpEnds) postRecv(id uint64, sges ...buf) {
	r := q.rq
	r.post(func(b []byte) {
		w := RecvWQE(b)
		w.SetWRID(id)
		total := 0
		for i, g := range sges {
			w.SGE(i).Set(g.va, uint32(g.n), g.lkey)
			total += g.n
		}
		w.SetNumSGE(uint32(len(sges)))
		w.SetLength(uint32(total))
	})
}
