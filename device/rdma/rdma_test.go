package rdma

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"falconnic/device/cm"
	"falconnic/device/fabric"
	"falconnic/device/port"
	"falconnic/device/rdmauapi"
	"falconnic/falcon"
	"falconnic/falcon/framebuf"
	"falconnic/falcon/wire"
	"falconnic/verbs"
	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

// waitBound is the generous bound a test waits for something that must
// happen; tests wait for the event itself, not for time.
const waitBound = 10 * time.Second

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// vm is a fake guest for the RDMA function: RAM shared through a memfd
// (as QEMU shares it), a page allocator, and the driver's side of the
// control channel.
type vm struct {
	t      *testing.T
	mac    [6]byte
	ram    []byte
	base   uint64
	next   uint64
	r      *Func
	frames chan []byte
	reqID  uint32
	inst   uint64
	events []rdmauapi.Event
	// Over a real virtio-net path (rdma_vhost_test.go) these replace the
	// direct calls: frames go out on the TX ring, memory is the
	// front-end's guest RAM.
	xmit     func(frame []byte)
	bytesAt  func(gpa uint64, n int) []byte
	allocRAM func(n int) uint64
	// fe is the vhost-user front-end of a vhostVM (nil otherwise).
	fe *vhostusertest.Frontend
}

const vmBase = 0x40000000

func newVM(t *testing.T, mac byte, mgr *cm.Manager) *vm {
	port := port.New(nil, nil)
	v := newVMOn(t, mac, mgr, port)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go port.Run(ctx)
	return v
}

// newVMOn is newVM with the RDMA function on port, which the caller runs
// (other functions may attach to it first).
func newVMOn(t *testing.T, mac byte, mgr *cm.Manager, port *port.Port) *vm {
	fd, err := unix.MemfdCreate("vm", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	const size = 8 << 20
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	reg, err := vhostuser.MapRegion(fd, vmBase, size, 0x7f0000000000, 0)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := vhostuser.NewMemTable([]*vhostuser.Region{reg})
	if err != nil {
		t.Fatal(err)
	}
	v := &vm{t: t, mac: [6]byte{0x52, 0x54, 0, 0, 0, mac}, ram: reg.Data, base: vmBase, next: vmBase + 0x1000,
		frames: make(chan []byte, 64), inst: 0x1234_0000 + uint64(mac)}
	var agent *cm.Agent
	if mgr != nil {
		agent = mgr.Attach(v.mac, port)
	}
	v.r = New(net.HardwareAddr(v.mac[:]), func(f []byte) { v.frames <- append([]byte(nil), f...) }, agent, port)
	v.r.mem.set(mt)
	return v
}

func (v *vm) at(gpa uint64, n int) []byte {
	if v.bytesAt != nil {
		return v.bytesAt(gpa, n)
	}
	return v.ram[gpa-v.base : gpa-v.base+uint64(n)]
}

func (v *vm) alloc(n int) uint64 {
	if v.allocRAM != nil {
		return v.allocRAM(n)
	}
	a := v.next
	v.next += uint64((n + 4095) &^ 4095)
	return a
}

// xmitFrame sends a control frame the way the driver does.
func (v *vm) xmitFrame(f []byte) {
	if v.xmit != nil {
		v.xmit(f)
		return
	}
	v.r.HandleControl(f)
}

// pbl writes a one-level page list for [gpa, gpa+n).
func (v *vm) pbl(b rdmauapi.PBL, gpa uint64, n int) {
	root := v.alloc(4096)
	np := (n + 4095) / 4096
	for i := range np {
		binary.LittleEndian.PutUint64(v.at(root+uint64(i*8), 8), gpa+uint64(i*4096))
	}
	b.SetRoot(root)
	b.SetNpages(uint32(np))
	b.SetLevels(1)
	b.SetPageShift(12)
}

// ring allocates a ring and fills its create-request description.
func (v *vm) ring(b rdmauapi.Ring, slots, log2, maxSGE, maxInline uint32) uint64 {
	size := rdmauapi.RingHdrSize + int(slots<<log2)
	gpa := v.alloc(size)
	binary.LittleEndian.PutUint32(v.at(gpa, 4), log2)
	binary.LittleEndian.PutUint32(v.at(gpa+4, 4), slots-1)
	v.pbl(b.PBL(), gpa, size)
	b.SetSlots(slots)
	b.SetLog2ElemSize(log2)
	b.SetMaxSGE(maxSGE)
	b.SetMaxInline(maxInline)
	return gpa
}

// send sends one request frame as the driver does and waits for its reply.
func (v *vm) send(op rdmauapi.Opcode, inst uint64, body []byte) (rdmauapi.Status, []byte) {
	v.t.Helper()
	v.reqID++
	f := rdmauapi.AppendFrame(nil, v.mac, rdmauapi.HdrFields{Opcode: op, Instance: inst, ReqID: v.reqID}, body)
	v.xmitFrame(f)
	return v.wait(v.reqID)
}

func (v *vm) wait(id uint32) (rdmauapi.Status, []byte) {
	v.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f := <-v.frames:
			p, ok := rdmauapi.ControlPayload(f)
			if !ok {
				v.t.Fatal("reply is not a control frame")
			}
			m, err := rdmauapi.DecodeFromNIC(p)
			if err != nil {
				v.t.Fatalf("undecodable frame from the NIC: %v", err)
			}
			if m.Hdr.Flags() == rdmauapi.FlagEvent {
				v.events = append(v.events, rdmauapi.Event(m.Body))
				continue
			}
			if m.Hdr.ReqID() == id {
				return m.Hdr.Status(), m.Body
			}
		case <-timeout:
			v.t.Fatalf("no reply to request %d", id)
		}
	}
}

func (v *vm) ok(op rdmauapi.Opcode, body []byte) []byte {
	v.t.Helper()
	st, b := v.send(op, v.inst, body)
	if st != rdmauapi.StatusOK {
		v.t.Fatalf("%v: status %d", op, st)
	}
	return b
}

func handle(h uint32) []byte {
	b := make([]byte, rdmauapi.HandleReqSize)
	rdmauapi.HandleReq(b).SetHandle(h)
	return b
}

// qpRings is the driver's view of a QP's rings.
type qpRings struct{ sq, rq, scq, rcq uint64 }

// setupRC opens the instance and creates PD 1, CQs 1/2, QP qpn with rings.
func (v *vm) setupRC(qpn uint32) qpRings {
	var q qpRings
	v.ok(rdmauapi.OpProbe, make([]byte, rdmauapi.ProbeReqSize))
	v.ok(rdmauapi.OpOpen, make([]byte, rdmauapi.OpenReqSize))
	v.ok(rdmauapi.OpCreatePD, handle(1))
	for i, p := range []*uint64{&q.scq, &q.rcq} {
		b := make([]byte, rdmauapi.CreateCQSize)
		c := rdmauapi.CreateCQ(b)
		c.SetCQ(uint32(i + 1))
		c.SetCQE(63)
		*p = v.ring(c.Ring(), 64, 6, 0, 0)
		v.ok(rdmauapi.OpCreateCQ, b)
	}
	b := make([]byte, rdmauapi.CreateQPSize)
	c := rdmauapi.CreateQP(b)
	c.SetQP(qpn)
	c.SetPD(1)
	c.SetSendCQ(1)
	c.SetRecvCQ(2)
	c.SetType(2)
	q.sq = v.ring(c.SQ(), 16, 9, 4, 64)
	q.rq = v.ring(c.RQ(), 16, 7, 4, 0)
	v.ok(rdmauapi.OpCreateQP, b)
	return q
}

func (v *vm) modify(qpn uint32, mask, state uint32, fill func(a rdmauapi.QPAttr)) rdmauapi.Status {
	b := make([]byte, rdmauapi.QPAttrSize)
	a := rdmauapi.QPAttr(b)
	a.SetQP(qpn)
	a.SetAttrMask(mask)
	a.SetQPState(state)
	if fill != nil {
		fill(a)
	}
	st, _ := v.send(rdmauapi.OpModifyQP, v.inst, b)
	return st
}

// connect brings qpn to RTS towards peer's dqpn.
func (v *vm) connect(qpn uint32, peer [6]byte, dqpn uint32) {
	v.t.Helper()
	steps := []struct {
		mask, state uint32
		fill        func(a rdmauapi.QPAttr)
	}{
		{verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrAccessFlags, 1, func(a rdmauapi.QPAttr) {
			a.SetPortNum(1)
			a.SetAccessFlags(verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic)
		}},
		{verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN | verbs.AttrRQPSN |
			verbs.AttrMaxDestRdAtom | verbs.AttrMinRNRTimer, 2, func(a rdmauapi.QPAttr) {
			a.SetPathMTU(5)
			a.SetDestQPNum(dqpn)
			a.SetMinRNRTimer(1)
			a.SetMaxDestRdAtomic(1)
			av := a.AV()
			av.SetPortNum(1)
			av.SetNetworkType(rdmauapi.NetworkIPv4)
			av.SetDMAC(peer[:])
		}},
		{verbs.AttrState | verbs.AttrSQPSN | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry |
			verbs.AttrMaxQPRdAtomic, 3, func(a rdmauapi.QPAttr) {
			a.SetTimeout(14)
			a.SetRetryCnt(7)
			a.SetRNRRetry(7)
			a.SetMaxRdAtomic(1)
		}},
	}
	for _, s := range steps {
		if st := v.modify(qpn, s.mask, s.state, s.fill); st != rdmauapi.StatusOK {
			v.t.Fatalf("modify to %d: status %d", s.state, st)
		}
	}
}

func (v *vm) regMR(h uint32, n int, access uint32) (gpa, iova uint64) {
	gpa = v.alloc(n)
	iova = 0x10000000 + gpa
	b := make([]byte, rdmauapi.RegMRSize)
	m := rdmauapi.RegMR(b)
	m.SetMR(h)
	m.SetPD(1)
	m.SetLKey(h << 8)
	if access&^verbs.AccessLocalWrite != 0 {
		m.SetRKey(h<<8 | 1)
	}
	m.SetIOVA(iova)
	m.SetLength(uint64(n))
	m.SetAccess(access)
	v.pbl(m.PBL(), gpa, n)
	v.ok(rdmauapi.OpRegMR, b)
	return gpa, iova
}

// doorbell rings DB_SQ the way the driver does (no reply).
func (v *vm) doorbell(qpn uint32) {
	b := make([]byte, rdmauapi.DoorbellSize)
	rdmauapi.Doorbell(b).SetHandle(qpn)
	v.reqID++
	v.xmitFrame(rdmauapi.AppendFrame(nil, v.mac, rdmauapi.HdrFields{Opcode: rdmauapi.OpDBSQ,
		Flags: rdmauapi.FlagNoReply, Instance: v.inst, ReqID: v.reqID}, b))
}

// pollCQ waits for one CQE in the CQ ring at gpa (real time bound only as
// a safety net; the test asserts behaviour, not speed).
func (v *vm) pollCQ(gpa uint64) verbs.WC {
	v.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var prod, cons uint32
		v.r.Call(func(*Func) {
			prod = binary.LittleEndian.Uint32(v.at(gpa+128, 4))
			cons = binary.LittleEndian.Uint32(v.at(gpa+256, 4))
		})
		if prod != cons {
			w := append(verbs.WC(nil), v.at(gpa+384+uint64(cons&63)<<6, 48)...)
			binary.LittleEndian.PutUint32(v.at(gpa+256, 4), (cons+1)&63) // librxe masks indices
			return w
		}
		time.Sleep(time.Millisecond)
	}
	v.t.Fatal("no CQE")
	return nil
}

func TestRDMAControlChannelWriteBetweenTwoNICs(t *testing.T) {
	mgr := cm.NewOnFabric(nil)
	writeBetween(t, newVM(t, 0xa, mgr), newVM(t, 0xb, mgr))
	if n := mgr.Stats.ConnsUp.Load(); n != 2 {
		t.Fatalf("connections up %d, want one at each NIC", n)
	}
}

// TestRDMAWriteOverTheFabric runs the same WRITE between NICs of two
// daemons: the connection manager's REQ/REP and the Falcon packets cross
// real UDP sockets on loopback.
func TestRDMAWriteOverTheFabric(t *testing.T) {
	f1, err := fabric.New(fabric.Options{Listen: loopback})
	if err != nil {
		t.Fatal(err)
	}
	f2, err := fabric.New(fabric.Options{Listen: loopback})
	if err != nil {
		t.Fatal(err)
	}
	f1.AddPeer(f2.LocalAddr())
	f2.AddPeer(f1.LocalAddr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f1.Run(ctx)
	go f2.Run(ctx)
	h1, h2 := cm.NewOnFabric(f1), cm.NewOnFabric(f2)
	writeBetween(t, newVM(t, 0xa, h1), newVM(t, 0xb, h2))
	if h1.Stats.REPRecv.Load() != 1 || h2.Stats.REQRecv.Load() == 0 {
		t.Fatalf("REQ %d REP %d", h2.Stats.REQRecv.Load(), h1.Stats.REPRecv.Load())
	}
}

// TestRDMAPeerRestartReplacesConnection: a NIC that comes back on a new
// daemon (same MAC, new CIDs) sets up a new connection, which replaces the
// old one at the NIC that stayed.
func TestRDMAPeerRestartReplacesConnection(t *testing.T) {
	var fabs []*fabric.Fabric
	for range 3 {
		f, err := fabric.New(fabric.Options{Listen: loopback})
		if err != nil {
			t.Fatal(err)
		}
		fabs = append(fabs, f)
	}
	fabs[0].AddPeer(fabs[1].LocalAddr())
	fabs[1].AddPeer(fabs[0].LocalAddr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, f := range fabs {
		go f.Run(ctx)
	}
	h1 := cm.NewOnFabric(fabs[0])
	a := newVM(t, 0xa, h1)
	writeBetween(t, a, newVM(t, 0xb, cm.NewOnFabric(fabs[1])))
	// B's daemon restarts on another address; B's guest sends first.
	fabs[0].AddPeer(fabs[2].LocalAddr())
	fabs[2].AddPeer(fabs[0].LocalAddr())
	b2 := newVM(t, 0xb, cm.NewOnFabric(fabs[2]))
	a.inst++ // A's application starts over too (OPEN by a new instance reclaims)
	writeBetween(t, b2, a)
	if h1.Stats.Replaced.Load() != 1 {
		t.Fatalf("replaced %d", h1.Stats.Replaced.Load())
	}
}

func writeBetween(t *testing.T, a, b *vm) {
	qa, qb := a.setupRC(16), b.setupRC(17)
	_ = qb
	a.connect(16, b.mac, 17)
	b.connect(17, a.mac, 16)
	src, srcVA := a.regMR(1, 8192, verbs.AccessLocalWrite)
	dst, dstVA := b.regMR(1, 8192, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	for i := range 8192 {
		a.at(src, 8192)[i] = byte(i * 13)
	}
	// librxe's post_send: a WQE in the SQ ring, the producer index, a kick.
	wqe := verbs.SendWQE(a.at(qa.sq+384, 512))
	wqe.SetWRID(77)
	wqe.SetOpcode(verbs.WRWrite)
	wqe.SetFlags(2) // IBV_SEND_SIGNALED
	wqe.SetRemoteAddr(dstVA)
	wqe.SetRKey(1<<8 | 1)
	wqe.SGE(0).Set(srcVA, 8192, 1<<8)
	wqe.SetNumSGE(1)
	wqe.SetLength(8192)
	a.r.Call(func(*Func) { binary.LittleEndian.PutUint32(a.at(qa.sq+128, 4), 1) })
	a.doorbell(16)
	wc := a.pollCQ(qa.scq)
	if wc.Status() != verbs.WCSuccess || wc.WRID() != 77 {
		t.Fatalf("CQE status %v id %d", wc.Status(), wc.WRID())
	}
	var same bool
	b.r.Call(func(*Func) { same = bytes.Equal(b.at(dst, 8192), a.at(src, 8192)) })
	if !same {
		t.Fatal("remote memory differs")
	}
}

func TestRDMAControlChannelStatuses(t *testing.T) {
	v := newVM(t, 1, cm.NewOnFabric(nil))
	// Before OPEN, only PROBE/OPEN/CLOSE are accepted.
	if st, _ := v.send(rdmauapi.OpCreatePD, v.inst, handle(1)); st != rdmauapi.StatusBadInstance {
		t.Fatalf("create before open: %d", st)
	}
	v.ok(rdmauapi.OpOpen, make([]byte, rdmauapi.OpenReqSize))
	v.ok(rdmauapi.OpCreatePD, handle(1))
	cases := []struct {
		name string
		op   rdmauapi.Opcode
		inst uint64
		body []byte
		want rdmauapi.Status
	}{
		{"handle in use", rdmauapi.OpCreatePD, v.inst, handle(1), rdmauapi.StatusHandleInUse},
		{"handle zero", rdmauapi.OpCreatePD, v.inst, handle(0), rdmauapi.StatusBadHandle},
		{"no such PD", rdmauapi.OpDestroyPD, v.inst, handle(9), rdmauapi.StatusBadHandle},
		{"wrong instance", rdmauapi.OpCreatePD, v.inst + 1, handle(2), rdmauapi.StatusBadInstance},
		{"bad length", rdmauapi.OpCreatePD, v.inst, make([]byte, 4), rdmauapi.StatusBadLength},
		{"query port", rdmauapi.OpQueryPort, v.inst, handle(1), rdmauapi.StatusOK},
	}
	for _, c := range cases {
		if st, _ := v.send(c.op, c.inst, c.body); st != c.want {
			t.Errorf("%s: status %d, want %d", c.name, st, c.want)
		}
	}
	// An MR whose page list points outside guest RAM.
	b := make([]byte, rdmauapi.RegMRSize)
	m := rdmauapi.RegMR(b)
	m.SetMR(1)
	m.SetPD(1)
	m.SetLKey(5)
	m.SetLength(4096)
	m.SetAccess(verbs.AccessLocalWrite)
	root := v.alloc(4096)
	binary.LittleEndian.PutUint64(v.at(root, 8), 0x1000) // below guest RAM
	m.PBL().SetRoot(root)
	m.PBL().SetNpages(1)
	m.PBL().SetLevels(1)
	m.PBL().SetPageShift(12)
	if st, _ := v.send(rdmauapi.OpRegMR, v.inst, b); st != rdmauapi.StatusBadGPA {
		t.Fatalf("MR outside RAM: %d", st)
	}
	if st, _ := v.send(rdmauapi.OpDestroyPD, v.inst, handle(1)); st != rdmauapi.StatusOK {
		t.Fatalf("destroy PD: %d", st)
	}
}

func TestRDMAOpenByNewInstanceReclaims(t *testing.T) {
	v := newVM(t, 2, cm.NewOnFabric(nil))
	v.setupRC(16)
	v.regMR(1, 4096, verbs.AccessLocalWrite)
	v.inst++ // a reloaded module
	v.ok(rdmauapi.OpOpen, make([]byte, rdmauapi.OpenReqSize))
	var n int
	var reclaimed uint64
	v.r.Call(func(r *Func) { n, reclaimed = r.eng.Objects(), r.eng.Stats.Reclaimed.Load() })
	if n != 0 || reclaimed != 5 { // PD, 2 CQs, QP, MR
		t.Fatalf("objects %d reclaimed %d", n, reclaimed)
	}
	v.r.SetMemTable(nil) // the guest dies
	v.ok(rdmauapi.OpProbe, make([]byte, rdmauapi.ProbeReqSize))
	var resets uint64
	v.r.Call(func(r *Func) { resets = r.Stats.Resets.Load() })
	if resets != 2 {
		t.Fatalf("resets %d", resets)
	}
}

func TestRDMAMemRejectsOutsideRAM(t *testing.T) {
	v := newVM(t, 3, nil)
	m := &v.r.mem
	if err := m.Write(vmBase-1, []byte{1, 2}); err == nil {
		t.Fatal("write straddling the start of RAM accepted")
	}
	if err := m.Read(vmBase+8<<20-1, make([]byte, 2)); err == nil {
		t.Fatal("read past the end of RAM accepted")
	}
	if err := m.Write(vmBase+100, []byte{9}); err != nil || v.at(vmBase+100, 1)[0] != 9 {
		t.Fatalf("write inside RAM: %v", err)
	}
}

// FuzzRDMAControl feeds arbitrary control frames to an RDMA function.
func FuzzRDMAControl(f *testing.F) {
	mac := [6]byte{0x52, 0x54, 0, 0, 0, 9}
	for op, info := range rdmauapi.Table {
		if info.Kind == rdmauapi.KindEvent {
			continue
		}
		fl := rdmauapi.Flags(0)
		if info.Kind == rdmauapi.KindDoorbell {
			fl = rdmauapi.FlagNoReply
		}
		f.Add(rdmauapi.AppendFrame(nil, mac, rdmauapi.HdrFields{Opcode: op, Flags: fl, Instance: 1, ReqID: 1},
			make([]byte, info.ReqSize)))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		r := New(net.HardwareAddr(mac[:]), func([]byte) {}, nil, port.New(nil, nil))
		open := rdmauapi.AppendFrame(nil, mac, rdmauapi.HdrFields{Opcode: rdmauapi.OpOpen, Instance: 1, ReqID: 1},
			make([]byte, rdmauapi.OpenReqSize))
		r.control(open)
		r.control(frame)
	})
}

func TestEveryRequestOpcodeHasAHandler(t *testing.T) {
	for op, info := range rdmauapi.Table {
		if info.Kind != rdmauapi.KindEvent && ctlHandlers[op] == nil {
			t.Errorf("%v has no handler", op)
		}
	}
	for k := verbs.EvCQComp; k <= verbs.EvSRQLimit; k++ {
		if _, ok := eventOps[k]; !ok {
			t.Errorf("event %#x has no opcode", k)
		}
	}
}

func TestRDMAControlSRQAHQueries(t *testing.T) {
	v := newVM(t, 4, cm.NewOnFabric(nil))
	v.setupRC(16)
	// SRQ: create, query, modify the limit, destroy.
	b := make([]byte, rdmauapi.CreateSRQSize)
	c := rdmauapi.CreateSRQ(b)
	c.SetSRQ(3)
	c.SetPD(1)
	c.SetSRQLimit(2)
	v.ring(c.Ring(), 16, 7, 4, 0)
	v.ok(rdmauapi.OpCreateSRQ, b)
	q := rdmauapi.SRQAttr(v.ok(rdmauapi.OpQuerySRQ, handle(3)))
	if q.MaxWR() != 15 || q.MaxSGE() != 4 || q.SRQLimit() != 2 {
		t.Fatalf("query SRQ: %d %d %d", q.MaxWR(), q.MaxSGE(), q.SRQLimit())
	}
	m := make([]byte, rdmauapi.SRQAttrSize)
	rdmauapi.SRQAttr(m).SetSRQ(3)
	rdmauapi.SRQAttr(m).SetAttrMask(rdmauapi.SRQAttrLimit)
	rdmauapi.SRQAttr(m).SetSRQLimit(5)
	v.ok(rdmauapi.OpModifySRQ, m)
	v.ok(rdmauapi.OpDestroySRQ, handle(3))
	// AH.
	ah := make([]byte, rdmauapi.CreateAHSize)
	a := rdmauapi.CreateAH(ah)
	a.SetAH(9)
	a.SetPD(1)
	a.AV().SetPortNum(1)
	a.AV().SetNetworkType(rdmauapi.NetworkIPv4)
	a.AV().SetDMAC([]byte{2, 0, 0, 0, 0, 1})
	v.ok(rdmauapi.OpCreateAH, ah)
	if st, _ := v.send(rdmauapi.OpDestroyPD, v.inst, handle(1)); st != rdmauapi.StatusBusy {
		t.Fatalf("destroy PD in use: %d", st)
	}
	v.ok(rdmauapi.OpDestroyAH, handle(9))
	// QUERY_QP after INIT.
	if st := v.modify(16, verbs.AttrState|verbs.AttrPKeyIndex|verbs.AttrPort|verbs.AttrAccessFlags, 1,
		func(a rdmauapi.QPAttr) { a.SetPortNum(1); a.SetAccessFlags(verbs.AccessRemoteWrite) }); st != rdmauapi.StatusOK {
		t.Fatalf("modify to INIT: %d", st)
	}
	if st := v.modify(16, verbs.AttrState, 3, nil); st != rdmauapi.StatusBadState {
		t.Fatalf("INIT→RTS: %d", st)
	}
	qa := rdmauapi.QPAttr(v.ok(rdmauapi.OpQueryQP, handle(16)))
	if qa.QPState() != 1 || qa.AccessFlags() != verbs.AccessRemoteWrite || qa.QP() != 16 {
		t.Fatalf("query QP: state %d access %d", qa.QPState(), qa.AccessFlags())
	}
	// CLOSE reclaims everything.
	v.ok(rdmauapi.OpClose, nil)
	var n int
	v.r.Call(func(r *Func) { n = r.eng.Objects() })
	if n != 0 {
		t.Fatalf("%d objects after CLOSE", n)
	}
}

// When a guest dies its NIC drops every RDMA object; the peer's next WRITE
// completes in error at the peer and touches nothing.
func TestRDMAPeerGuestDiesMidTraffic(t *testing.T) {
	mgr := cm.NewOnFabric(nil)
	a, b := newVM(t, 0xa, mgr), newVM(t, 0xb, mgr)
	writeBetween(t, a, b)
	b.r.SetMemTable(nil)
	// A's application starts over (a new instance) and writes again.
	a.inst++
	qa := a.setupRC(16)
	a.connect(16, b.mac, 17)
	_, srcVA := a.regMR(1, 64, verbs.AccessLocalWrite)
	a.post(qa, 16, func(w verbs.SendWQE) {
		w.SetWRID(5)
		w.SetOpcode(verbs.WRWrite)
		w.SetFlags(2)
		w.SetRemoteAddr(0x10000000)
		w.SetRKey(1<<8 | 1)
		w.SGE(0).Set(srcVA, 64, 1<<8)
		w.SetNumSGE(1)
		w.SetLength(64)
	})
	if st := a.spinCQ(qa.scq); st != verbs.WCRemInvReqErr {
		t.Fatalf("status %v, want remote-invalid-request (the QP is gone)", st)
	}
	var n int
	b.r.Call(func(r *Func) { n = r.eng.Objects() })
	if n != 0 {
		t.Fatalf("%d objects left on the dead guest's NIC", n)
	}
}

// A segment between two NICs of one daemon, with every header Falcon and
// the RDMA ULP put before it and the envelope after, fits a large frame
// buffer: the port passes it by reference, not in a buffer of its own.
func TestLocalMTUFitsALargeFrameBuffer(t *testing.T) {
	frame := wire.MaxHeaderLen + LocalMTU + falcon.EnvelopeLen
	b := framebuf.Get(frame)
	defer b.Release()
	if room := b.Room(); frame > room {
		t.Fatalf("a %d-byte frame in a buffer with room for %d", frame, room)
	}
	if LocalMTU-verbs.RDMAHeaderRoom <= 4096 {
		t.Fatalf("LocalMTU %d carries no more than the fabric's 4 KiB", LocalMTU)
	}
}

// A connection to a NIC of this daemon takes the local MTU, RTO floor and
// window cap; one over the fabric keeps Falcon's defaults for all three.
func TestLocalConnectionOptions(t *testing.T) {
	p := (&Func{}).cmProto()
	var fabric, local falcon.ConnConfig
	p.Config(&fabric)
	p.Config(&local)
	p.Local(&local)
	if local.MTU != LocalMTU || local.MinRTO != LocalMinRTO || local.InitRTO != LocalMinRTO ||
		local.MaxFcwnd != LocalMaxFcwnd || local.MaxNcwnd != port.FixedNcwnd {
		t.Errorf("local: MTU %d, RTO floor %v, initial RTO %v, window caps %v and %d; want %d, %v, %v, %v and %d",
			local.MTU, local.MinRTO, local.InitRTO, local.MaxFcwnd.Float(), local.MaxNcwnd,
			LocalMTU, LocalMinRTO, LocalMinRTO, LocalMaxFcwnd.Float(), port.FixedNcwnd)
	}
	if fabric.MTU != 0 || fabric.MinRTO != 0 || fabric.InitRTO != 0 || fabric.MaxFcwnd != 0 || fabric.MaxNcwnd != 0 || !fabric.Ordered {
		t.Errorf("fabric: MTU %d, RTO floor %v, initial RTO %v, window caps %v and %d, ordered %v; want the defaults, ordered",
			fabric.MTU, fabric.MinRTO, fabric.InitRTO, fabric.MaxFcwnd.Float(), fabric.MaxNcwnd, fabric.Ordered)
	}
}
