package device

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"falconnic/nvme"
	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

// blkRig is a disk end to end without QEMU: the vhost-user front-end
// simulator (QEMU 7.2's blk sequence) drives a Blk on NIC A, whose NVMe
// initiator reaches a memory namespace exported by NIC B through two
// Falcon ports on the real clock.
type blkRig struct {
	t      testing.TB
	blk    *Blk
	mem    *nvme.MemBackend
	gm     *vhostusertest.GuestMemory
	q      *vhostusertest.DriverQueue // the queue requests go to
	qs     []*vhostusertest.DriverQueue
	fe     *vhostusertest.Frontend
	srv    *vhostuser.Server
	done   chan error
	tgt    *NVMeFunc
	cancel context.CancelFunc

	consumed    uint16 // used elements the driver popped
	noInterrupt bool   // the driver polls (SeaBIOS)
}

const blkRigBlocks = 4096 // 2 MiB of 512-byte blocks

func newBlkRig(t testing.TB, ns NamespaceSpec) *blkRig { return newBlkRigQ(t, ns, 1) }

// newBlkRigQ builds the rig with a disk of queues virtqueues; r.qs holds
// them (r.q is queue 0).
func newBlkRigQ(t testing.TB, ns NamespaceSpec, queues int) *blkRig {
	return newBlkRigCores(t, ns, queues, 1)
}

// newBlkRigCores is newBlkRigQ with the two ports on one goroutine (cores
// 1, the initiator's hosting the target's) or each on its own (2).
func newBlkRigCores(t testing.TB, ns NamespaceSpec, queues, cores int) *blkRig {
	ctx, cancel := context.WithCancel(context.Background())
	a, b := NewFalconPort(nil, nil), NewFalconPort(nil, nil)
	ini, tgt := NewNVMeFunc(a, 1), NewNVMeFunc(b, 2) // before Run: SetULP
	if cores == 1 {                                  // as the daemon runs them by default (NVMeSpec.Cores)
		a.Host(b)
	}
	go a.Run(ctx)
	go b.Run(ctx)
	var nsObj *nvme.Namespace
	var err error
	b.Call(func(*falconEndpoint) { nsObj, err = tgt.AddNamespace(ns) })
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Uint32
	path, _, err := ConnectNVMeLocal(ini, tgt, func() uint32 { return next.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	info, err := IdentifyRemote(a, path, ns.NSID, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := NewBlk(BlkConfig{Port: a, Path: path, NSID: ns.NSID, Info: info, Serial: "disk-serial-0001", Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	r := &blkRig{t: t, blk: blk, tgt: tgt, cancel: cancel}
	r.mem, _ = nsObj.Config().Backend.(*nvme.MemBackend)
	if r.gm, err = vhostusertest.NewGuestMemory(vhostusertest.OneRegion(32 << 20)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < queues; i++ {
		q, err := vhostusertest.NewDriverQueue(r.gm, i, 128, 0, 136<<10/uint32(queues))
		if err != nil {
			t.Fatal(err)
		}
		r.qs = append(r.qs, q)
	}
	r.q = r.qs[0]
	blk.drain = 50 * time.Millisecond // TestBlkInflightSurvivesBackendRestart stalls the target longer
	r.srv = &vhostuser.Server{Device: blk}
	r.connect()
	t.Cleanup(func() {
		r.fe.Close()
		<-r.done
		for _, q := range r.qs {
			q.Close()
		}
		r.gm.Close()
		cancel()
	})
	return r
}

// ns reads the namespace's bytes (under the backend's lock).
func (r *blkRig) ns(off, n int) []byte {
	b := make([]byte, n)
	if _, err := r.mem.ReadAt(b, int64(off)); err != nil {
		r.t.Fatal(err)
	}
	return b
}

func (r *blkRig) connect() {
	front, back, err := vhostusertest.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	r.done = make(chan error, 1)
	go func() { r.done <- r.srv.ServeConn(back) }()
	if r.fe == nil {
		if r.fe, err = vhostusertest.NewFrontend(front, r.gm, r.qs); err != nil {
			r.t.Fatal(err)
		}
	} else {
		r.fe.Reconnect(front)
	}
}

const blkLinuxFeatures = vhostuser.FeatureVersion1 | vhostuser.FeatureProtocolFeatures | vhostuser.FeatureIndirectDesc | blkFSizeMax | blkFSegMax |
	blkFBlkSize | blkFFlush | blkFTopology | blkFConfigWCE | blkFDiscard | blkFWriteZeroes

// start replays realize + a Linux driver start and returns the config space.
func (r *blkRig) start() []byte {
	cfg, err := r.fe.BlkInit(57)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.fe.BlkStart(r.q, blkLinuxFeatures&r.blk.Features()|vhostuser.FeatureProtocolFeatures, 0); err != nil {
		r.t.Fatal(err)
	}
	return cfg
}

// req posts one request [header][data...][status] using descriptor
// buffers; data segments are device-readable for OUT-like types.
func (r *blkReqBuilder) post() uint16 {
	q := r.rig.q
	i, ok := q.Peek()
	if !ok {
		r.rig.t.Fatal("ring full")
	}
	base := q.BufGPAOf(i)
	buf := q.Buf(i)
	binary.LittleEndian.PutUint32(buf[0:], r.typ)
	binary.LittleEndian.PutUint64(buf[8:], r.sector)
	segs := []vhostusertest.Seg{{GPA: base, Len: 16}}
	off := uint64(64)
	for _, n := range r.lens {
		segs = append(segs, vhostusertest.Seg{GPA: base + off, Len: uint32(n), Write: r.in})
		off += uint64(n)
	}
	if r.out != nil {
		copy(buf[64:], r.out)
	}
	r.dataGPA = base + 64
	r.statusGPA = base + off
	buf[off] = 0xff
	segs = append(segs, vhostusertest.Seg{GPA: base + off, Len: 1, Write: true})
	head, err := q.Add(segs)
	if err != nil {
		r.rig.t.Fatal(err)
	}
	return head
}

type blkReqBuilder struct {
	rig       *blkRig
	typ       uint32
	sector    uint64
	lens      []int
	in        bool
	out       []byte
	dataGPA   uint64
	statusGPA uint64
}

func (r *blkRig) request(typ uint32, sector uint64, in bool, out []byte, lens ...int) *blkReqBuilder {
	return &blkReqBuilder{rig: r, typ: typ, sector: sector, in: in, out: out, lens: lens}
}

// run posts the requests together, kicks once and waits for all of them.
func (r *blkRig) run(reqs ...*blkReqBuilder) []vhostusertest.Used {
	r.t.Helper()
	for _, x := range reqs {
		x.post()
	}
	r.q.Publish()
	r.q.Kick()
	r.waitInterrupts(len(reqs))
	var used []vhostusertest.Used
	for range reqs {
		u, _ := r.q.PopUsed()
		used = append(used, u)
	}
	r.consumed += uint16(len(reqs))
	return used
}

// waitInterrupts waits for n used elements the way a guest driver does:
// asleep until the device signals the call eventfd (unless the queue
// polls, like SeaBIOS). A completion without an interrupt fails the test.
func (r *blkRig) waitInterrupts(n int) {
	r.t.Helper()
	for int(uint16(r.q.UsedIdx()-r.consumed)) < n {
		if r.noInterrupt {
			if !r.q.WaitUsed(n, 10*time.Second) {
				r.t.Fatalf("%d requests not completed; blk %v", n, r.blk.Stats.Set().NonZero())
			}
			return
		}
		fds := []unix.PollFd{{Fd: int32(r.q.CallFD), Events: unix.POLLIN}}
		if k, _ := unix.Poll(fds, 10000); k == 0 {
			r.t.Fatalf("no interrupt for %d requests (used %d); blk %v", n, r.q.UsedIdx(), r.blk.Stats.Set().NonZero())
		}
		r.q.Calls()
	}
}

func (x *blkReqBuilder) status() byte { return x.rig.gm.Bytes(x.statusGPA, 1)[0] }
func (x *blkReqBuilder) data(n int) []byte {
	return append([]byte(nil), x.rig.gm.Bytes(x.dataGPA, uint64(n))...)
}

func memNS(readOnly bool) NamespaceSpec {
	return NamespaceSpec{NSID: 1, Backing: NamespaceMemory, Size: blkRigBlocks * 512, ReadOnly: readOnly}
}

func TestBlkConfigSpaceDescribesTheRemoteNamespace(t *testing.T) {
	r := newBlkRig(t, memNS(false))
	cfg := r.start()
	le := binary.LittleEndian
	if got := le.Uint64(cfg[blkCfgCapacity:]); got != blkRigBlocks {
		t.Errorf("capacity %d sectors, want %d", got, blkRigBlocks)
	}
	if got := le.Uint32(cfg[blkCfgBlkSize:]); got != 512 {
		t.Errorf("blk_size %d", got)
	}
	if got := le.Uint16(cfg[blkCfgNumQueues:]); got != 1 {
		t.Errorf("num_queues %d", got)
	}
	if le.Uint32(cfg[blkCfgSegMax:]) == 0 || le.Uint32(cfg[blkCfgMaxDiscardSeg:]) != 1 || cfg[blkCfgWZMayUnmap] != 1 {
		t.Errorf("seg_max/discard/write-zeroes limits missing: % x", cfg)
	}
	if r.blk.Features()&blkFRO != 0 {
		t.Error("writable namespace offered as read-only")
	}
}

// TestBlkReadWriteEndToEnd: guest writes land in the remote namespace and
// read back through NVMe reads, across uneven descriptor boundaries.
func TestBlkReadWriteEndToEnd(t *testing.T) {
	r := newBlkRig(t, memNS(false))
	r.start()
	data := bytes.Repeat([]byte("falcon-nvme-blk!"), 20<<10/16) // 20 KiB
	w := r.request(blkTypeOut, 24, false, data, 512, 7680, 12288)
	used := r.run(w)
	if w.status() != blkStatusOK || used[0].Len != 1 {
		t.Fatalf("write status %d used len %d", w.status(), used[0].Len)
	}
	if !bytes.Equal(r.ns(24*512, len(data)), data) {
		t.Fatal("namespace does not hold the guest's data")
	}
	rd := r.request(blkTypeIn, 24, true, nil, 4096, 16384)
	used = r.run(rd)
	if rd.status() != blkStatusOK || used[0].Len != uint32(len(data))+1 {
		t.Fatalf("read status %d used len %d", rd.status(), used[0].Len)
	}
	if !bytes.Equal(rd.data(len(data)), data) {
		t.Fatal("read returned other data")
	}
}

func TestBlkFlushGetIDDiscardWriteZeroes(t *testing.T) {
	r := newBlkRig(t, memNS(false))
	r.start()
	r.mem.WriteAt(bytes.Repeat([]byte{0xee}, 64*512), 0)
	seg := func(sector uint64, n uint32, flags uint32) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint64(b, sector)
		binary.LittleEndian.PutUint32(b[8:], n)
		binary.LittleEndian.PutUint32(b[12:], flags)
		return b
	}
	fl := r.request(blkTypeFlush, 0, false, nil)
	id := r.request(blkTypeGetID, 0, true, nil, 20)
	dc := r.request(blkTypeDiscard, 0, false, seg(4, 4, 0), 16)
	wz := r.request(blkTypeWriteZeroes, 0, false, seg(16, 8, 1), 16)
	un := r.request(99, 0, false, nil)
	used := r.run(fl, id, dc, wz, un)
	for i, x := range []*blkReqBuilder{fl, id, dc, wz} {
		if x.status() != blkStatusOK {
			t.Errorf("request %d: status %d", i, x.status())
		}
	}
	if un.status() != blkStatusUnsupp {
		t.Errorf("unknown type: status %d, want UNSUPP", un.status())
	}
	if got := string(bytes.TrimRight(id.data(20), "\x00")); got != "disk-serial-0001" {
		t.Errorf("GET_ID %q", got)
	}
	for _, u := range used {
		if u.ID == 1 && u.Len != 21 { // GET_ID: 20 + status (heads are posted in order from 0)
			t.Errorf("GET_ID used len %d", u.Len)
		}
	}
	m := r.ns(0, 64*512)
	if !bytes.Equal(m[4*512:8*512], make([]byte, 4*512)) || !bytes.Equal(m[16*512:24*512], make([]byte, 8*512)) ||
		m[3*512] != 0xee || m[8*512] != 0xee || m[15*512] != 0xee || m[24*512] != 0xee {
		t.Fatal("discard / write zeroes touched the wrong blocks")
	}
	s := &r.tgt.Engine.Namespace(1).Stats
	if s.Flushes.Load() != 1 || s.Discards.Load() != 1 || s.WriteZeroes.Load() != 1 {
		t.Fatalf("namespace counters %v", s.Set().NonZero())
	}
}

func TestBlkErrorsReachTheGuest(t *testing.T) {
	r := newBlkRig(t, memNS(true))
	if r.blk.Features()&blkFRO == 0 {
		t.Fatal("read-only namespace not offered as RO")
	}
	r.start()
	data := bytes.Repeat([]byte{1}, 4096)
	w := r.request(blkTypeOut, 0, false, data, 4096)              // read-only export
	past := r.request(blkTypeIn, blkRigBlocks-4, true, nil, 4096) // 4 sectors beyond the end
	mis := r.request(blkTypeIn, 0, true, nil, 100)                // not a whole sector
	ok := r.request(blkTypeIn, blkRigBlocks-8, true, nil, 4096)
	r.run(w, past, mis, ok)
	if w.status() != blkStatusIOErr || past.status() != blkStatusIOErr || mis.status() != blkStatusIOErr {
		t.Fatalf("statuses write-ro %d past-end %d misaligned %d, want IOERR", w.status(), past.status(), mis.status())
	}
	if ok.status() != blkStatusOK {
		t.Fatalf("read at the end: status %d", ok.status())
	}
	if !bytes.Equal(r.ns(0, 4096), make([]byte, 4096)) {
		t.Fatal("write to a read-only namespace changed it")
	}
	ns := &r.tgt.Engine.Namespace(1).Stats
	if ns.WriteProtected.Load() != 1 || ns.OutOfRange.Load() != 1 || r.blk.Stats.Misaligned.Load() != 1 {
		t.Fatalf("counters: namespace %v blk %v", ns.Set().NonZero(), r.blk.Stats.Set().NonZero())
	}
}

// TestBlkManyInFlight fills the ring with writes then reads of distinct
// regions; every request completes with the right data.
func TestBlkManyInFlight(t *testing.T) {
	r := newBlkRig(t, memNS(false))
	r.start()
	r.q.UseIndirect = true // one descriptor per request: 100 in flight
	const n = 100
	var ws, rs []*blkReqBuilder
	for i := 0; i < n; i++ {
		d := bytes.Repeat([]byte{byte(i + 1)}, 8192)
		ws = append(ws, r.request(blkTypeOut, uint64(i)*32, false, d, 8192))
	}
	r.run(ws...)
	for i := 0; i < n; i++ {
		rs = append(rs, r.request(blkTypeIn, uint64(i)*32, true, nil, 8192))
	}
	r.run(rs...)
	for i, x := range rs {
		if x.status() != blkStatusOK || !bytes.Equal(x.data(8192), bytes.Repeat([]byte{byte(i + 1)}, 8192)) {
			t.Fatalf("read %d: status %d or wrong data", i, x.status())
		}
	}
}

// TestBlkInflightSurvivesBackendRestart: a request popped but not
// completed when the back-end goes away is resubmitted by the next session
// from the inflight region and completes.
func TestBlkInflightSurvivesBackendRestart(t *testing.T) {
	// The target NIC's port stalls while the initiator's works on: each
	// on a goroutine of its own.
	r := newBlkRigCores(t, memNS(false), 1, 2)
	r.start()
	first := r.run(r.request(blkTypeIn, 0, true, nil, 512))
	if len(first) != 1 {
		t.Fatal("first request")
	}
	// Stall the target NIC's port so the next write stays in flight.
	release := make(chan struct{})
	stalled := make(chan struct{})
	r.tgt.Port.Do(func(*falconEndpoint) { close(stalled); <-release })
	<-stalled
	data := bytes.Repeat([]byte("inflight"), 512)
	w := r.request(blkTypeOut, 100, false, data, 4096)
	w.post()
	r.q.Publish()
	r.q.Kick()
	// Wait until the back-end popped it (avail consumed: inflight marked).
	deadline := time.Now().Add(5 * time.Second)
	for r.blk.Stats.Writes.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r.blk.Stats.Writes.Load() == 0 {
		t.Fatal("write never popped")
	}
	// The back-end goes away while the target is stalled: the old worker
	// gives up waiting, detaches the request from guest memory and leaves
	// it unanswered. QEMU reconnects; the new session finds it in the
	// inflight region and resubmits it.
	prev := r.done
	front, back, err := vhostusertest.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.fe.Reconnect(front)
	<-prev
	if r.blk.Stats.Cancelled.Load() != 1 {
		t.Fatalf("old session cancelled %d requests, want 1", r.blk.Stats.Cancelled.Load())
	}
	r.done = make(chan error, 1)
	go func() { r.done <- r.srv.ServeConn(back) }()
	if _, err := r.fe.BlkInit(0); err != nil {
		t.Fatal(err)
	}
	if err := r.fe.BlkStart(r.q, blkLinuxFeatures&r.blk.Features()|vhostuser.FeatureProtocolFeatures, r.q.UsedIdx()); err != nil {
		t.Fatal(err)
	}
	close(release)
	if !r.q.WaitUsed(1, 10*time.Second) {
		t.Fatal("the write did not complete after the restart")
	}
	if w.status() != blkStatusOK || !bytes.Equal(r.ns(100*512, 4096), data) {
		t.Fatalf("write after restart: status %d", w.status())
	}
}

// TestBlkFirmwareThenLinux replays QEMU 7.2's boot: SeaBIOS drives the
// disk (fewer features, polling), then Linux resets and restarts it.
func TestBlkFirmwareThenLinux(t *testing.T) {
	r := newBlkRig(t, memNS(false))
	if _, err := r.fe.BlkInit(57); err != nil {
		t.Fatal(err)
	}
	bios := vhostuser.FeatureVersion1 | vhostuser.FeatureProtocolFeatures | blkFSizeMax | blkFSegMax | blkFBlkSize
	r.q.SetNoInterrupt(true)
	r.noInterrupt = true
	if err := r.fe.BlkStart(r.q, bios, 0); err != nil {
		t.Fatal(err)
	}
	r.mem.WriteAt([]byte("BOOT SECTOR"), 0)
	rd := r.request(blkTypeIn, 0, true, nil, 512)
	r.run(rd)
	if rd.status() != blkStatusOK || string(rd.data(11)) != "BOOT SECTOR" {
		t.Fatalf("firmware read: status %d data %q", rd.status(), rd.data(11))
	}
	base, err := r.fe.BlkReset()
	if err != nil || base != 1 {
		t.Fatalf("reset: base %d err %v", base, err)
	}
	r.q.SetNoInterrupt(false)
	r.noInterrupt = false
	if err := r.fe.BlkStart(r.q, blkLinuxFeatures, base); err != nil {
		t.Fatal(err)
	}
	rd = r.request(blkTypeIn, 0, true, nil, 4096)
	r.run(rd)
	if rd.status() != blkStatusOK {
		t.Fatalf("linux read: status %d", rd.status())
	}
}

// TestBlkTwoQueues: each virtqueue has its own worker; requests on both
// reach the same namespace.
func TestBlkTwoQueues(t *testing.T) {
	r := newBlkRigQ(t, memNS(false), 2)
	if r.blk.Features()&blkFMQ == 0 || r.blk.NumQueues() != 2 {
		t.Fatal("two-queue disk does not offer MQ")
	}
	cfg := r.start()
	if binary.LittleEndian.Uint16(cfg[blkCfgNumQueues:]) != 2 {
		t.Fatalf("num_queues % x", cfg[blkCfgNumQueues:blkCfgNumQueues+2])
	}
	q1 := r.qs[1]
	if err := r.fe.RingSetup(q1, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.fe.Enable(1, true); err != nil {
		t.Fatal(err)
	}
	a := bytes.Repeat([]byte{0xa1}, 4096)
	w := r.request(blkTypeOut, 0, false, a, 4096)
	r.run(w)
	r.q, r.consumed = q1, 0
	b := bytes.Repeat([]byte{0xb2}, 4096)
	w1 := r.request(blkTypeOut, 8, false, b, 4096)
	rd := r.request(blkTypeIn, 0, true, nil, 8192)
	r.run(w1)
	r.run(rd)
	if w.status() != blkStatusOK || w1.status() != blkStatusOK || rd.status() != blkStatusOK ||
		!bytes.Equal(rd.data(8192), append(a, b...)) {
		t.Fatalf("statuses %d %d %d or data differs", w.status(), w1.status(), rd.status())
	}
}

// TestBlkHoldsGuestMemoryWhileRequestsRun: a SET_MEM_TABLE while a read
// is in flight moves the queue to the new table, but the old one (where
// the read's buffers are) stays mapped until the read is answered.
func TestBlkHoldsGuestMemoryWhileRequestsRun(t *testing.T) {
	r := newBlkRig(t, memNS(false))
	r.start()
	want := bytes.Repeat([]byte("held-memory!"), 8192/12+1)[:8192]
	copy(r.mem.Bytes()[4096:], want)
	release := make(chan struct{})
	stalled := make(chan struct{})
	r.tgt.Port.Do(func(*falconEndpoint) { close(stalled); <-release }) // the target answers nothing
	<-stalled
	rd := r.request(blkTypeIn, 8, true, nil, 8192)
	rd.post()
	r.q.Publish()
	r.q.Kick()
	for r.blk.Stats.Requests.Load() == 0 { // the worker popped the read (under the first table)
		time.Sleep(time.Millisecond)
	}
	p, fds := r.gm.MemTablePayload()
	err := r.fe.Set(vhostuser.ReqSetMemTable, true, p, fds...)
	for _, fd := range fds {
		unix.Close(fd)
	}
	if err != nil {
		t.Fatal(err)
	}
	id := r.request(blkTypeGetID, 0, true, nil, 20) // answered at once, after the worker moved tables
	idHead := id.post()
	r.q.Publish()
	r.q.Kick()
	r.waitInterrupts(1)
	if u, _ := r.q.PopUsed(); u.ID != idHead {
		t.Fatalf("first answer is for head %d, want GET_ID's %d", u.ID, idHead)
	}
	r.consumed++
	if n := r.srv.Counters.MemTablesFreed.Load(); n != 0 {
		t.Fatalf("%d memory tables unmapped with a read in flight in one", n)
	}
	close(release)
	r.waitInterrupts(1)
	r.q.PopUsed()
	r.consumed++
	if rd.status() != blkStatusOK || !bytes.Equal(rd.data(8192), want) {
		t.Fatalf("read status %d", rd.status())
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.srv.Counters.MemTablesFreed.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the old memory table was never unmapped after the read finished")
		}
		time.Sleep(time.Millisecond)
	}
}
