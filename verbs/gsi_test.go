package verbs

import (
	"bytes"
	"encoding/binary"
	"testing"

	"falconnic/falcon"
	"falconnic/falcon/link"
)

// ipv4GID is the RoCEv2 GID of an IPv4 address (::ffff:a.b.c.d).
func ipv4GID(a, b, c, d byte) (g [16]byte) {
	copy(g[:], v4Mapped[:])
	g[12], g[13], g[14], g[15] = a, b, c, d
	return g
}

// makeKernelQP creates a kernel consumer's QP, as falconnic.ko does for
// ib_mad's GSI QP (typ QPTypeGSI, qpn GSIQPN) or a kernel UD QP.
func (g *guest) makeKernelQP(qpn, pd uint32, typ uint8) (*qpEnds, error) {
	q := &qpEnds{g: g, qpn: qpn}
	q.scq = g.ring(64, 6, 0, 0)
	q.rcq = g.ring(64, 6, 0, 0)
	if err := g.e.CreateCQ(qpn*10+1, q.scq.spec); err != nil {
		g.t.Fatal(err)
	}
	if err := g.e.CreateCQ(qpn*10+2, q.rcq.spec); err != nil {
		g.t.Fatal(err)
	}
	q.sq = g.ring(32, 9, 4, 0)
	q.rq = g.ring(32, 7, 4, 0)
	return q, g.e.CreateQP(QPSpec{H: qpn, PD: pd, SendCQ: qpn*10 + 1, RecvCQ: qpn*10 + 2, Type: typ, Kernel: true,
		SQ: q.sq.spec, RQ: q.rq.spec, SigAll: true})
}

// gsiUp brings a GSI QP to RTS the way ib_mad does: INIT with P_Key index
// and Q_Key (no port), RTR, RTS with an SQ PSN.
func gsiUp(t *testing.T, e *Engine) {
	t.Helper()
	for _, a := range []QPAttr{
		{Mask: AttrState | AttrPKeyIndex | AttrQKey, State: QPSInit, QKey: GSIQKey},
		{Mask: AttrState, State: QPSRTR},
		{Mask: AttrState | AttrSQPSN, State: QPSRTS},
	} {
		if err := e.ModifyQP(GSIQPN, a); err != nil {
			t.Fatalf("GSI to %v: %v", a.State, err)
		}
	}
}

// dmaBuf is kernel memory named by guest-physical address (DMALKey SGEs).
func (g *guest) dmaBuf(n int) buf {
	gpa := g.alloc(n)
	return buf{gpa: gpa, va: gpa, n: n, lkey: DMALKey}
}

// gsiWorld is two NICs whose guests each run ib_mad's QP1.
func gsiWorld(t *testing.T) (*world, *qpEnds, *qpEnds) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	_ = w.a.CreatePD(1)
	_ = w.b.CreatePD(1)
	qa, err := w.ga.makeKernelQP(GSIQPN, 1, QPTypeGSI)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := w.gb.makeKernelQP(GSIQPN, 1, QPTypeGSI)
	if err != nil {
		t.Fatal(err)
	}
	gsiUp(t, w.a)
	gsiUp(t, w.b)
	return w, qa, qb
}

var (
	gidA = ipv4GID(10, 0, 0, 1)
	gidB = ipv4GID(10, 0, 0, 2)
)

// postMAD posts a 256-byte MAD in two SGEs (header, data) as ib_mad does,
// with the address vector inline and remote Q_Key IB_QP1_QKEY.
func postMAD(q *qpEnds, id uint64, hdr, data buf, av AV, rqpn uint32) {
	q.sq.post(func(b []byte) {
		s := SendWQE(b)
		s.SetWRID(id)
		s.SetOpcode(WRSend)
		s.SetFlags(sendFlagSignal)
		s.SetRemoteQPN(rqpn)
		s.SetRemoteQKey(GSIQKey)
		s.SetAV(&av)
		s.SGE(0).Set(hdr.va, uint32(hdr.n), hdr.lkey)
		s.SGE(1).Set(data.va, uint32(data.n), data.lkey)
		s.SetNumSGE(2)
		s.SetLength(uint32(hdr.n + data.n))
	})
	q.g.e.KickSQ(q.qpn)
}

// A MAD from QP1 to QP1 of another NIC lands after a GRH whose IPv4 header
// holds the sender's and receiver's addresses, with the CQE flags ib_mad
// and ib_cm need to build the reply's address handle.
func TestGSISendReceiveIPv4GRH(t *testing.T) {
	w, qa, qb := gsiWorld(t)
	hdr, data := w.ga.dmaBuf(24), w.ga.dmaBuf(232)
	fill(w.ga.bytes(hdr), 1)
	fill(w.ga.bytes(data), 2)
	rb := w.gb.dmaBuf(grhLen + 256)
	qb.postRecv(7, rb)
	postMAD(qa, 1, hdr, data, AV{DMAC: macB, Net: NetIPv4, SGID: gidA, DGID: gidB, HopLimit: 64, TClass: 0x10}, GSIQPN)
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess || wc.WRID() != 1 || wc.QPNum() != GSIQPN {
		t.Fatalf("send CQE: %v wr %d qp %d", wc.Status(), wc.WRID(), wc.QPNum())
	}
	wc := oneWC(t, qb.rcq)
	if wc.Status() != WCSuccess || wc.WRID() != 7 || wc.QPNum() != GSIQPN || wc.SrcQP() != GSIQPN ||
		wc.ByteLen() != grhLen+256 || wc.Flags()&WCFlagGRH == 0 || wc.NetType() != NetIPv4 {
		t.Fatalf("recv CQE: %v wr %d qp %d src %d len %d flags %x net %d", wc.Status(), wc.WRID(), wc.QPNum(),
			wc.SrcQP(), wc.ByteLen(), wc.Flags(), wc.NetType())
	}
	got := w.gb.bytes(rb)
	if !bytes.Equal(got[grhLen:grhLen+24], w.ga.bytes(hdr)) || !bytes.Equal(got[grhLen+24:], w.ga.bytes(data)) {
		t.Fatal("MAD bytes differ")
	}
	grh := got[:grhLen]
	if !bytes.Equal(grh[:20], make([]byte, 20)) {
		t.Fatalf("IPv4 GRH area must start with 20 zero bytes: % x", grh[:20])
	}
	ip := grh[20:]
	if ip[0] != 0x45 || ip[1] != 0x10 || ip[8] != 64 || ip[9] != 17 {
		t.Fatalf("IPv4 header: % x", ip)
	}
	if !bytes.Equal(ip[12:16], []byte{10, 0, 0, 1}) || !bytes.Equal(ip[16:20], []byte{10, 0, 0, 2}) {
		t.Fatalf("IPv4 addresses: src %v dst %v", ip[12:16], ip[16:20])
	}
	if binary.BigEndian.Uint16(ip[2:]) != 20+8+12+8+256+4 {
		t.Fatalf("IPv4 total length %d", binary.BigEndian.Uint16(ip[2:]))
	}
	if ipv4Checksum(ip) != 0 {
		t.Fatal("IPv4 header checksum does not verify")
	}
}

// The GSI QP's Q_Key is IB_QP1_QKEY: another one is refused, and a message
// carrying another Q_Key is dropped and counted.
func TestGSIQKey(t *testing.T) {
	w, qa, qb := gsiWorld(t)
	if err := w.a.ModifyQP(GSIQPN, QPAttr{Mask: AttrQKey, QKey: 0x1234}); err != ErrBadParam {
		t.Fatalf("GSI Q_Key change: %v", err)
	}
	m := w.ga.dmaBuf(256)
	qb.postRecv(1, w.gb.dmaBuf(grhLen+256))
	qa.sq.post(func(b []byte) {
		s := SendWQE(b)
		s.SetOpcode(WRSend)
		s.SetRemoteQPN(GSIQPN)
		s.SetRemoteQKey(0x1234) // not controlled: used as is
		s.SetAV(&AV{DMAC: macB, Net: NetIPv4, SGID: gidA, DGID: gidB})
		s.SGE(0).Set(m.va, 256, DMALKey)
		s.SetNumSGE(1)
		s.SetLength(256)
	})
	w.a.KickSQ(GSIQPN)
	w.run()
	if got := qb.rcq.poll(); len(got) != 0 {
		t.Fatalf("%d receive CQEs for a wrong Q_Key", len(got))
	}
	if w.b.Stats.RxUDQKeyDrop.Load() != 1 {
		t.Fatal("wrong Q_Key not counted")
	}
}

// Only QP1 is GSI, GSI is only a kernel QP, and the DMA key works only for
// kernel QPs: a user QP naming it fails with a protection error.
func TestGSIAndDMAKeyRules(t *testing.T) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	_ = w.a.CreatePD(1)
	for _, c := range []struct {
		qpn  uint32
		typ  uint8
		kern bool
	}{
		{GSIQPN, QPTypeUD, true}, {20, QPTypeGSI, true}, {GSIQPN, QPTypeGSI, false},
	} {
		err := w.a.CreateQP(QPSpec{H: c.qpn, PD: 1, SendCQ: 1, RecvCQ: 1, Type: c.typ, Kernel: c.kern})
		if err == nil {
			t.Fatalf("CreateQP %+v succeeded", c)
		}
	}
	_ = w.b.CreatePD(1)
	qa := w.ga.makeQP(20, 1, QPTypeUD, 0)
	qa.connect(MAC{}, 0, 0, 0)
	if err := w.a.CreateAH(5, 1, AV{DMAC: macB}); err != nil {
		t.Fatal(err)
	}
	m := w.ga.dmaBuf(64)
	qa.postSend(wqe{id: 1, op: WRSend, ah: 5, rqpn: 21, qkey: 1, sges: []buf{m}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCLocProtErr {
		t.Fatalf("user QP with the DMA key: %v", wc.Status())
	}
	// A kernel QP's DMA SGE outside guest RAM fails the same way.
	w2, qk, _ := gsiWorld(t)
	postMAD(qk, 2, buf{va: 1 << 40, n: 24, lkey: DMALKey}, w2.ga.dmaBuf(232), AV{DMAC: macB, Net: NetIPv4, SGID: gidA, DGID: gidB}, GSIQPN)
	w2.run()
	if wc := oneWC(t, qk.scq); wc.Status() != WCLocProtErr {
		t.Fatalf("DMA SGE outside guest RAM: %v", wc.Status())
	}
	// And an inline AV that names no RoCEv2 path is refused (a fresh QP:
	// a UD send error leaves the QP in SQE).
	w2, qk, _ = gsiWorld(t)
	postMAD(qk, 3, w2.ga.dmaBuf(24), w2.ga.dmaBuf(232), AV{DMAC: macB}, GSIQPN)
	w2.run()
	if wc := oneWC(t, qk.scq); wc.Status() != WCLocQPOpErr || w2.a.Stats.WQEBadAV.Load() != 1 {
		t.Fatalf("inline AV without a network type: %v", wc.Status())
	}
	// ib_mad recovers QP1 from SQE with SQE→RTS naming the current state;
	// the next MAD goes through.
	if st, _ := w2.a.State(GSIQPN); st != QPSSQE {
		t.Fatalf("GSI after a send error: %v", st)
	}
	if err := w2.a.ModifyQP(GSIQPN, QPAttr{Mask: AttrState | AttrCurState, State: QPSRTS, CurState: QPSSQE}); err != nil {
		t.Fatalf("SQE→RTS: %v", err)
	}
	postMAD(qk, 4, w2.ga.dmaBuf(24), w2.ga.dmaBuf(232), AV{DMAC: macB, Net: NetIPv4, SGID: gidA, DGID: gidB}, GSIQPN)
	w2.run()
	if wc := oneWC(t, qk.scq); wc.Status() != WCSuccess {
		t.Fatalf("MAD after recovery: %v", wc.Status())
	}
}

// A user UD QP sending through an AH with IPv6 GIDs gives the receiver an
// IPv6 GRH: version, traffic class, flow label, hop limit and both GIDs.
func TestUDReceiveIPv6GRH(t *testing.T) {
	w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
	_ = w.a.CreatePD(1)
	_ = w.b.CreatePD(1)
	qa := w.ga.makeQP(20, 1, QPTypeUD, 0)
	qb := w.gb.makeQP(21, 1, QPTypeUD, 0)
	qa.connect(MAC{}, 0, 0, 0)
	qb.connect(MAC{}, 0, 0, 0)
	sg := [16]byte{0xfe, 0x80, 15: 1}
	dg := [16]byte{0xfe, 0x80, 15: 2}
	if err := w.a.CreateAH(5, 1, AV{DMAC: macB, Net: NetIPv6, SGID: sg, DGID: dg, Flow: 0x12345, HopLimit: 7, TClass: 0xab}); err != nil {
		t.Fatal(err)
	}
	src := w.ga.reg(1, 100, AccessLocalWrite)
	rb := w.gb.reg(1, 200, AccessLocalWrite)
	qb.postRecv(1, rb)
	qa.postSend(wqe{id: 1, op: WRSend, ah: 5, rqpn: 21, qkey: 0x11111111, sges: []buf{src}})
	w.run()
	wc := oneWC(t, qb.rcq)
	if wc.Status() != WCSuccess || wc.NetType() != NetIPv6 || wc.ByteLen() != grhLen+100 {
		t.Fatalf("recv: %v net %d len %d", wc.Status(), wc.NetType(), wc.ByteLen())
	}
	g := w.gb.bytes(rb)[:grhLen]
	if v := binary.BigEndian.Uint32(g); v != 6<<28|0xab<<20|0x12345 {
		t.Fatalf("version/class/flow %#x", v)
	}
	if binary.BigEndian.Uint16(g[4:]) != 100+rocev2UDOverhead || g[6] != 17 || g[7] != 7 ||
		!bytes.Equal(g[8:24], sg[:]) || !bytes.Equal(g[24:40], dg[:]) {
		t.Fatalf("IPv6 header: % x", g)
	}
	// An AH without GIDs still gives the GRH flag, a zero header but for
	// the version nibble, and no network type.
	if err := w.a.CreateAH(6, 1, AV{DMAC: macB}); err != nil {
		t.Fatal(err)
	}
	qb.postRecv(2, rb)
	qa.postSend(wqe{id: 2, op: WRSend, ah: 6, rqpn: 21, qkey: 0x11111111, sges: []buf{src}})
	w.run()
	wc = oneWC(t, qb.rcq)
	if wc.Status() != WCSuccess || wc.NetType() != NetNone || wc.Flags()&WCFlagGRH == 0 {
		t.Fatalf("recv without GIDs: %v net %d", wc.Status(), wc.NetType())
	}
	if g := w.gb.bytes(rb)[:grhLen]; g[0] != 6<<4 || !bytes.Equal(g[1:], make([]byte, grhLen-1)) {
		t.Fatalf("GRH without GIDs: % x", g)
	}
}

func TestParseUDAddr(t *testing.T) {
	good := appendUDAddr(nil, &AV{Net: NetIPv4, SGID: gidA, DGID: gidB, HopLimit: 1})
	for _, c := range []struct {
		name string
		mod  func(b []byte)
		ok   bool
	}{
		{"valid IPv4", func([]byte) {}, true},
		{"unknown network type", func(b []byte) { b[0] = 3 }, false},
		{"reserved byte set", func(b []byte) { b[3] = 1 }, false},
		{"flow label over 20 bits", func(b []byte) { b[5] = 0x10 }, false},
		{"IPv4 with an IPv6 source GID", func(b []byte) { b[8] = 0xfe }, false},
		{"IPv6 with any GIDs", func(b []byte) { b[0] = NetIPv6; b[8] = 0xfe }, true},
		{"no GIDs but fields set", func(b []byte) { clear(b); b[1] = 64 }, false},
		{"no GIDs", func(b []byte) { clear(b) }, true},
	} {
		b := bytes.Clone(good)
		c.mod(b)
		if _, data, ok := parseUDAddr(append(b, 'x')); ok != c.ok || (ok && string(data) != "x") {
			t.Errorf("%s: ok %v data %q", c.name, ok, data)
		}
	}
	if _, _, ok := parseUDAddr(good[:udAddrLen-1]); ok {
		t.Error("short header accepted")
	}
	// An IPv4 AV whose GIDs are not IPv4-mapped sends no GIDs.
	if b := appendUDAddr(nil, &AV{Net: NetIPv4, SGID: [16]byte{0xfe}, DGID: gidB}); !bytes.Equal(b, make([]byte, udAddrLen)) {
		t.Errorf("mismatched IPv4 AV sent % x", b)
	}
}

func TestInlineAV(t *testing.T) {
	b := make([]byte, SendWQESize)
	w := SendWQE(b)
	want := AV{DMAC: macB, Net: NetIPv4, SGID: gidA, DGID: gidB, Flow: 5, HopLimit: 9, TClass: 3, Valid: true}
	w.SetAV(&want)
	if got, ok := inlineAV(w); !ok || got != want {
		t.Fatalf("IPv4: %+v %v", got, ok)
	}
	want6 := AV{DMAC: macA, Net: NetIPv6, SGID: [16]byte{0xfe, 0x80, 15: 3}, DGID: [16]byte{0xfe, 0x80, 15: 4}, Valid: true}
	w.SetAV(&want6)
	if got, ok := inlineAV(w); !ok || got != want6 {
		t.Fatalf("IPv6: %+v %v", got, ok)
	}
	le.PutUint16(b[sendWQEAVOff+32:], afInet) // IPv6 network type with a sockaddr_in
	if _, ok := inlineAV(w); ok {
		t.Fatal("family mismatch accepted")
	}
}

func FuzzUDAddr(f *testing.F) {
	f.Add(appendUDAddr(nil, &AV{Net: NetIPv4, SGID: gidA, DGID: gidB}))
	f.Add(appendUDAddr(nil, &AV{Net: NetIPv6, SGID: gidA, DGID: gidB, Flow: 0xfffff}))
	f.Add(make([]byte, udAddrLen+3))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, data, ok := parseUDAddr(b)
		if !ok {
			return
		}
		if len(data) != len(b)-udAddrLen {
			t.Fatal("data length")
		}
		g := make([]byte, grhLen)
		putGRH(g, &a, len(data))
		switch a.net {
		case NetIPv4:
			if ipv4Checksum(g[20:]) != 0 || !bytes.Equal(g[32:36], a.sgid[12:]) {
				t.Fatal("bad IPv4 GRH")
			}
		case NetIPv6:
			if g[0]>>4 != 6 || !bytes.Equal(g[8:24], a.sgid[:]) {
				t.Fatal("bad IPv6 GRH")
			}
		}
		// Round trip: what was parsed encodes back to the same header.
		av := AV{Net: a.net, HopLimit: a.hop, TClass: a.tclass, Flow: a.flow, SGID: a.sgid, DGID: a.dgid}
		if !bytes.Equal(appendUDAddr(nil, &av), b[:udAddrLen]) {
			t.Fatal("header does not round-trip")
		}
	})
}

func FuzzInlineAV(f *testing.F) {
	b := make([]byte, SendWQESize)
	SendWQE(b).SetAV(&AV{DMAC: macB, Net: NetIPv4, SGID: gidA, DGID: gidB})
	f.Add(b[sendWQEAVOff : sendWQEAVOff+avSize])
	SendWQE(b).SetAV(&AV{DMAC: macB, Net: NetIPv6, SGID: gidA, DGID: gidB})
	f.Add(b[sendWQEAVOff : sendWQEAVOff+avSize])
	f.Fuzz(func(t *testing.T, av []byte) {
		w := make([]byte, SendWQESize)
		copy(w[sendWQEAVOff:sendWQEAVOff+avSize], av)
		got, ok := inlineAV(SendWQE(w))
		if !ok {
			return
		}
		if got.Net != NetIPv4 && got.Net != NetIPv6 || got.Flow > 0xfffff {
			t.Fatalf("accepted %+v", got)
		}
		if got.Net == NetIPv4 && (!isV4Mapped(&got.SGID) || !isV4Mapped(&got.DGID)) {
			t.Fatalf("IPv4 AV with unmapped GIDs: %+v", got)
		}
	})
}

// On a connection whose MTU holds more than PMTUCap (two NICs of one
// daemon), RC messages go in segments of what it holds: a 64 KiB WRITE and
// its READ back are four transactions each at 16 KiB, and a UD message is
// still bounded by its path MTU.
func TestRCSegmentsAtTheConnectionsMTU(t *testing.T) {
	w, qa, _ := rcPairLink(t, QPTypeRC, 7, falcon.ConnConfig{MTU: 16<<10 + RDMAHeaderRoom + 100}, link.MemConfig{})
	writeThenReadBack(t, w, qa, 64<<10, 4)
	e := w.a
	if n := e.connSeg(nil); n != 4096 {
		t.Fatalf("no connection: segments of %d, want PMTUCap", n)
	}
	ud := &QP{typ: QPTypeUD, attr: QPAttr{PathMTU: 5}}
	if n := e.segMTU(ud, w.a.qps[qa.qpn].conn); n != 4096 {
		t.Fatalf("UD on a 16 KiB connection: %d, want its path MTU", n)
	}
}

// rdma_cm sets an RC QP's path MTU from the guest's 1500-byte netdev
// (IB_MTU_1024); the NIC still segments RC messages at its transport MTU,
// and READ responses come back at that size too.
func TestRCSegmentsAtTransportMTUWhateverThePathMTU(t *testing.T) {
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	w.a.qps[qa.qpn].attr.PathMTU, w.b.qps[qb.qpn].attr.PathMTU = 3, 3 // 1024
	writeThenReadBack(t, w, qa, 16<<10, 4)
}

// writeThenReadBack has qa WRITE size bytes into B's memory and READ them
// back, and checks the data and that each took segs transactions.
func writeThenReadBack(t *testing.T, w *world, qa *qpEnds, size int, segs uint64) {
	t.Helper()
	src := w.ga.reg(1, size, AccessLocalWrite)
	dst := w.gb.reg(1, size, rwAll)
	fill(w.ga.bytes(src), 5)
	qa.postSend(wqe{id: 1, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess || !bytes.Equal(w.gb.bytes(dst), w.ga.bytes(src)) {
		t.Fatalf("write: %v", wc.Status())
	}
	if got := w.a.Stats.TxPush.Load(); got != segs {
		t.Fatalf("pushes = %d, want %d (%d bytes)", got, segs, size)
	}
	back := w.ga.reg(1, size, AccessLocalWrite)
	qa.postSend(wqe{id: 2, op: WRRead, raddr: dst.va, rkey: dst.rkey, sges: []buf{back}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess || !bytes.Equal(w.ga.bytes(back), w.ga.bytes(src)) {
		t.Fatalf("read back: %v", wc.Status())
	}
	if got := w.a.Stats.TxPull.Load(); got != segs {
		t.Fatalf("pulls = %d, want %d", got, segs)
	}
}
