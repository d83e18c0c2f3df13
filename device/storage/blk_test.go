package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"falconnic/device/port"
	"falconnic/device/storage/blktest"
	"falconnic/falcon"
	"falconnic/falcon/rue"
	"falconnic/nvme"
	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

// blkRig is a disk end to end without QEMU: the vhost-user front-end
// simulator (QEMU 7.2's blk sequence) drives a Blk on NIC A, whose NVMe
// initiator reaches a memory namespace exported by NIC B through two
// Falcon ports on the real clock.
type blkRig struct {
	t               testing.TB
	blk             *Blk
	mem             *nvme.MemBackend
	*blktest.Driver // requests go to its queue (r.Q), in its guest memory (r.GM)
	qs              []*vhostusertest.DriverQueue
	fe              *vhostusertest.Frontend
	srv             *vhostuser.Server
	done            chan error
	tgt             *NVMeFunc
	cancel          context.CancelFunc
}

const blkRigBlocks = 4096 // 2 MiB of 512-byte blocks

func newBlkRig(t testing.TB, ns NamespaceSpec) *blkRig { return newBlkRigQ(t, ns, 1) }

// newBlkRigQ builds the rig with a disk of queues virtqueues; r.qs holds
// them (r.Q is queue 0).
func newBlkRigQ(t testing.TB, ns NamespaceSpec, queues int) *blkRig {
	return newBlkRigCores(t, ns, queues, 1)
}

// newBlkRigCores is newBlkRigQ with the two ports on one goroutine (cores
// 1, the initiator's hosting the target's) or each on its own (2).
func newBlkRigCores(t testing.TB, ns NamespaceSpec, queues, cores int) *blkRig {
	return newBlkRigFirmware(t, ns, queues, cores, port.FirmwareSpec{})
}

// newBlkRigFirmware is newBlkRigCores with fw on both ports.
func newBlkRigFirmware(t testing.TB, ns NamespaceSpec, queues, cores int, fw port.FirmwareSpec) *blkRig {
	ctx, cancel := context.WithCancel(context.Background())
	a, b := port.New(nil, nil), port.New(nil, nil)
	for _, p := range []*port.Port{a, b} {
		if err := p.UseFirmware(fw); err != nil {
			t.Fatal(err)
		}
	}
	ini, tgt := NewNVMeFunc(a, 1), NewNVMeFunc(b, 2) // before Run: SetULP
	if cores == 1 {                                  // as the daemon runs them by default (NVMeSpec.Cores)
		a.Adopt(b)
	}
	go a.Run(ctx)
	go b.Run(ctx)
	var nsObj *nvme.Namespace
	var err error
	b.Call(func(*falcon.Endpoint) { nsObj, err = tgt.AddNamespace(ns) })
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
	r := &blkRig{t: t, blk: blk, tgt: tgt, cancel: cancel, Driver: &blktest.Driver{T: t}}
	r.Describe = func() string { return fmt.Sprintf("blk %v", blk.Stats.Set().NonZero()) }
	r.mem, _ = nsObj.Config().Backend.(*nvme.MemBackend)
	if r.GM, err = vhostusertest.NewGuestMemory(vhostusertest.OneRegion(32 << 20)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < queues; i++ {
		q, err := vhostusertest.NewDriverQueue(r.GM, i, 128, 0, 136<<10/uint32(queues))
		if err != nil {
			t.Fatal(err)
		}
		r.qs = append(r.qs, q)
	}
	r.Q = r.qs[0]
	blk.drain = 50 * time.Millisecond // TestBlkInflightSurvivesBackendRestart stalls the target longer
	r.srv = &vhostuser.Server{Device: blk}
	r.connect()
	t.Cleanup(func() {
		r.fe.Close()
		<-r.done
		for _, q := range r.qs {
			q.Close()
		}
		r.GM.Close()
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
		if r.fe, err = vhostusertest.NewFrontend(front, r.GM, r.qs); err != nil {
			r.t.Fatal(err)
		}
	} else {
		r.fe.Reconnect(front)
	}
}

const blkLinuxFeatures = blktest.LinuxFeatures

// start replays realize + a Linux driver start and returns the config space.
func (r *blkRig) start() []byte {
	cfg, err := r.fe.BlkInit(57)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.fe.BlkStart(r.Q, blkLinuxFeatures&r.blk.Features()|vhostuser.FeatureProtocolFeatures, 0); err != nil {
		r.t.Fatal(err)
	}
	return cfg
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
	w := r.Request(blkTypeOut, 24, false, data, 512, 7680, 12288)
	used := r.Run(w)
	if w.Status() != blkStatusOK || used[0].Len != 1 {
		t.Fatalf("write status %d used len %d", w.Status(), used[0].Len)
	}
	if !bytes.Equal(r.ns(24*512, len(data)), data) {
		t.Fatal("namespace does not hold the guest's data")
	}
	rd := r.Request(blkTypeIn, 24, true, nil, 4096, 16384)
	used = r.Run(rd)
	if rd.Status() != blkStatusOK || used[0].Len != uint32(len(data))+1 {
		t.Fatalf("read status %d used len %d", rd.Status(), used[0].Len)
	}
	if !bytes.Equal(rd.Data(len(data)), data) {
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
	fl := r.Request(blkTypeFlush, 0, false, nil)
	id := r.Request(blkTypeGetID, 0, true, nil, 20)
	dc := r.Request(blkTypeDiscard, 0, false, seg(4, 4, 0), 16)
	wz := r.Request(blkTypeWriteZeroes, 0, false, seg(16, 8, 1), 16)
	un := r.Request(99, 0, false, nil)
	used := r.Run(fl, id, dc, wz, un)
	for i, x := range []*blktest.Request{fl, id, dc, wz} {
		if x.Status() != blkStatusOK {
			t.Errorf("request %d: status %d", i, x.Status())
		}
	}
	if un.Status() != blkStatusUnsupp {
		t.Errorf("unknown type: status %d, want UNSUPP", un.Status())
	}
	if got := string(bytes.TrimRight(id.Data(20), "\x00")); got != "disk-serial-0001" {
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
	w := r.Request(blkTypeOut, 0, false, data, 4096)              // read-only export
	past := r.Request(blkTypeIn, blkRigBlocks-4, true, nil, 4096) // 4 sectors beyond the end
	mis := r.Request(blkTypeIn, 0, true, nil, 100)                // not a whole sector
	ok := r.Request(blkTypeIn, blkRigBlocks-8, true, nil, 4096)
	r.Run(w, past, mis, ok)
	if w.Status() != blkStatusIOErr || past.Status() != blkStatusIOErr || mis.Status() != blkStatusIOErr {
		t.Fatalf("statuses write-ro %d past-end %d misaligned %d, want IOERR", w.Status(), past.Status(), mis.Status())
	}
	if ok.Status() != blkStatusOK {
		t.Fatalf("read at the end: status %d", ok.Status())
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
	r.Q.UseIndirect = true // one descriptor per request: 100 in flight
	const n = 100
	var ws, rs []*blktest.Request
	for i := 0; i < n; i++ {
		d := bytes.Repeat([]byte{byte(i + 1)}, 8192)
		ws = append(ws, r.Request(blkTypeOut, uint64(i)*32, false, d, 8192))
	}
	r.Run(ws...)
	for i := 0; i < n; i++ {
		rs = append(rs, r.Request(blkTypeIn, uint64(i)*32, true, nil, 8192))
	}
	r.Run(rs...)
	for i, x := range rs {
		if x.Status() != blkStatusOK || !bytes.Equal(x.Data(8192), bytes.Repeat([]byte{byte(i + 1)}, 8192)) {
			t.Fatalf("read %d: status %d or wrong data", i, x.Status())
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
	first := r.Run(r.Request(blkTypeIn, 0, true, nil, 512))
	if len(first) != 1 {
		t.Fatal("first request")
	}
	// Stall the target NIC's port so the next write stays in flight.
	release := make(chan struct{})
	stalled := make(chan struct{})
	r.tgt.Port.Do(func(*falcon.Endpoint) { close(stalled); <-release })
	<-stalled
	data := bytes.Repeat([]byte("inflight"), 512)
	w := r.Request(blkTypeOut, 100, false, data, 4096)
	w.Post()
	r.Q.Publish()
	r.Q.Kick()
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
	if err := r.fe.BlkStart(r.Q, blkLinuxFeatures&r.blk.Features()|vhostuser.FeatureProtocolFeatures, r.Q.UsedIdx()); err != nil {
		t.Fatal(err)
	}
	close(release)
	if !r.Q.WaitUsed(1, 10*time.Second) {
		t.Fatal("the write did not complete after the restart")
	}
	if w.Status() != blkStatusOK || !bytes.Equal(r.ns(100*512, 4096), data) {
		t.Fatalf("write after restart: status %d", w.Status())
	}
}

// TestBlkHoldsKicksWhileRequestsAreInFlight: with blkHoldKicksLive
// requests in flight an EVENT_IDX guest is told not to kick for new ones
// (avail_event behind what was taken); the next completion wakes the
// worker, which takes them. Once nothing is in flight the ring asks for
// kicks again.
func TestBlkHoldsKicksWhileRequestsAreInFlight(t *testing.T) {
	r := newBlkRigCores(t, memNS(false), 1, 2) // the target's port can stall alone
	if _, err := r.fe.BlkInit(57); err != nil {
		t.Fatal(err)
	}
	r.Q.EventIdx = true
	if err := r.fe.BlkStart(r.Q, (blkLinuxFeatures|vhostuser.FeatureEventIdx)&r.blk.Features()|vhostuser.FeatureProtocolFeatures, 0); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	stalled := make(chan struct{})
	r.tgt.Port.Do(func(*falcon.Endpoint) { close(stalled); <-release })
	<-stalled
	var reqs []*blktest.Request
	post := func() bool {
		x := r.Request(blkTypeOut, uint64(len(reqs))*8, false, bytes.Repeat([]byte{byte(len(reqs) + 1)}, 4096), 4096)
		reqs = append(reqs, x)
		x.Post()
		return r.Q.PublishKick()
	}
	waitAvailEvent := func(want uint16) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); r.Q.AvailEvent() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("avail_event %d, want %d (blk %v)", r.Q.AvailEvent(), want, r.blk.Stats.Set().NonZero())
			}
		}
	}
	// One in flight: the ring asks for a kick at the next post.
	if !post() {
		t.Fatal("idle ring: no kick asked")
	}
	waitAvailEvent(1)
	// Up to blkHoldKicksLive in flight: kicked for; once they are taken
	// avail_event drops behind what was taken.
	for len(reqs) < blkHoldKicksLive {
		x := r.Request(blkTypeOut, uint64(len(reqs))*8, false, bytes.Repeat([]byte{byte(len(reqs) + 1)}, 4096), 4096)
		reqs = append(reqs, x)
		x.Post()
	}
	if !r.Q.PublishKick() {
		t.Fatal("one request in flight: the next posts were not kicked for")
	}
	waitAvailEvent(blkHoldKicksLive - 1)
	held := blkHoldKicksLive + 3
	for len(reqs) < held {
		if post() {
			t.Fatalf("post %d kicked with %d requests in flight", len(reqs), blkHoldKicksLive)
		}
	}
	close(release) // completions come; the worker takes the held requests
	if !r.Q.WaitUsed(held, 10*time.Second) {
		t.Fatalf("%d of %d requests completed (blk %v)", r.Q.UsedIdx(), held, r.blk.Stats.Set().NonZero())
	}
	for i, x := range reqs {
		if x.Status() != blkStatusOK || !bytes.Equal(r.ns(i*8*512, 4096), bytes.Repeat([]byte{byte(i + 1)}, 4096)) {
			t.Fatalf("request %d: status %d or data not written", i, x.Status())
		}
	}
	// Nothing in flight: the ring asks for a kick again.
	waitAvailEvent(uint16(held))
	if !post() {
		t.Fatal("idle ring: the next post was not kicked for")
	}
	if !r.Q.WaitUsed(held+1, 10*time.Second) {
		t.Fatal("the request after the held ones did not complete")
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
	r.Q.SetNoInterrupt(true)
	r.NoInterrupt = true
	if err := r.fe.BlkStart(r.Q, bios, 0); err != nil {
		t.Fatal(err)
	}
	r.mem.WriteAt([]byte("BOOT SECTOR"), 0)
	rd := r.Request(blkTypeIn, 0, true, nil, 512)
	r.Run(rd)
	if rd.Status() != blkStatusOK || string(rd.Data(11)) != "BOOT SECTOR" {
		t.Fatalf("firmware read: status %d data %q", rd.Status(), rd.Data(11))
	}
	base, err := r.fe.BlkReset()
	if err != nil || base != 1 {
		t.Fatalf("reset: base %d err %v", base, err)
	}
	r.Q.SetNoInterrupt(false)
	r.NoInterrupt = false
	if err := r.fe.BlkStart(r.Q, blkLinuxFeatures, base); err != nil {
		t.Fatal(err)
	}
	rd = r.Request(blkTypeIn, 0, true, nil, 4096)
	r.Run(rd)
	if rd.Status() != blkStatusOK {
		t.Fatalf("linux read: status %d", rd.Status())
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
	w := r.Request(blkTypeOut, 0, false, a, 4096)
	r.Run(w)
	r.Q, r.Consumed = q1, 0
	b := bytes.Repeat([]byte{0xb2}, 4096)
	w1 := r.Request(blkTypeOut, 8, false, b, 4096)
	rd := r.Request(blkTypeIn, 0, true, nil, 8192)
	r.Run(w1)
	r.Run(rd)
	if w.Status() != blkStatusOK || w1.Status() != blkStatusOK || rd.Status() != blkStatusOK ||
		!bytes.Equal(rd.Data(8192), append(a, b...)) {
		t.Fatalf("statuses %d %d %d or data differs", w.Status(), w1.Status(), rd.Status())
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
	r.tgt.Port.Do(func(*falcon.Endpoint) { close(stalled); <-release }) // the target answers nothing
	<-stalled
	rd := r.Request(blkTypeIn, 8, true, nil, 8192)
	rd.Post()
	r.Q.Publish()
	r.Q.Kick()
	for r.blk.Stats.Requests.Load() == 0 { // the worker popped the read (under the first table)
		time.Sleep(time.Millisecond)
	}
	p, fds := r.GM.MemTablePayload()
	err := r.fe.Set(vhostuser.ReqSetMemTable, true, p, fds...)
	for _, fd := range fds {
		unix.Close(fd)
	}
	if err != nil {
		t.Fatal(err)
	}
	id := r.Request(blkTypeGetID, 0, true, nil, 20) // answered at once, after the worker moved tables
	idHead := id.Post()
	r.Q.Publish()
	r.Q.Kick()
	r.WaitInterrupts(1)
	if u, _ := r.Q.PopUsed(); u.ID != idHead {
		t.Fatalf("first answer is for head %d, want GET_ID's %d", u.ID, idHead)
	}
	r.Consumed++
	if n := r.srv.Counters.MemTablesFreed.Load(); n != 0 {
		t.Fatalf("%d memory tables unmapped with a read in flight in one", n)
	}
	close(release)
	r.WaitInterrupts(1)
	r.Q.PopUsed()
	r.Consumed++
	if rd.Status() != blkStatusOK || !bytes.Equal(rd.Data(8192), want) {
		t.Fatalf("read status %d", rd.Status())
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.srv.Counters.MemTablesFreed.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the old memory table was never unmapped after the read finished")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGuestDriverAgreesWithTheDisk checks the test peer's virtio-blk
// constants against the disk's: both sides read them from the spec.
func TestGuestDriverAgreesWithTheDisk(t *testing.T) {
	for _, c := range []struct {
		name        string
		guest, disk uint64
	}{
		{"T_IN", blktest.TypeIn, blkTypeIn}, {"T_OUT", blktest.TypeOut, blkTypeOut},
		{"T_FLUSH", blktest.TypeFlush, blkTypeFlush}, {"T_GET_ID", blktest.TypeGetID, blkTypeGetID},
		{"T_DISCARD", blktest.TypeDiscard, blkTypeDiscard}, {"T_WRITE_ZEROES", blktest.TypeWriteZeroes, blkTypeWriteZeroes},
		{"S_OK", blktest.StatusOK, blkStatusOK}, {"S_IOERR", blktest.StatusIOErr, blkStatusIOErr},
		{"S_UNSUPP", blktest.StatusUnsupp, blkStatusUnsupp},
		{"F_SIZE_MAX", blktest.FeatureSizeMax, blkFSizeMax}, {"F_SEG_MAX", blktest.FeatureSegMax, blkFSegMax},
		{"F_RO", blktest.FeatureRO, blkFRO}, {"F_BLK_SIZE", blktest.FeatureBlkSize, blkFBlkSize},
		{"F_FLUSH", blktest.FeatureFlush, blkFFlush}, {"F_TOPOLOGY", blktest.FeatureTopology, blkFTopology},
		{"F_CONFIG_WCE", blktest.FeatureConfigWCE, blkFConfigWCE}, {"F_MQ", blktest.FeatureMQ, blkFMQ},
		{"F_DISCARD", blktest.FeatureDiscard, blkFDiscard}, {"F_WRITE_ZEROES", blktest.FeatureWriteZeroes, blkFWriteZeroes},
	} {
		if c.guest != c.disk {
			t.Errorf("VIRTIO_BLK_%s: guest %d, disk %d", c.name, c.guest, c.disk)
		}
	}
}

// TestAdversarialWriteThroughWritesAreDurable (finding 6): a guest that
// turns the disk's write cache off (CONFIG_WCE, writeback 0) gets every
// write completed only once durable (FUA on the NVMe write); with the
// cache back on, writes go without.
func TestAdversarialWriteThroughWritesAreDurable(t *testing.T) {
	r := newBlkRig(t, memNS(false))
	r.start()
	ns := r.tgt.Engine.Namespace(1)
	fua := func() uint64 { return ns.Stats.FUAWrites.Load() }
	write := func(sector uint64) {
		w := r.Request(blkTypeOut, sector, false, bytes.Repeat([]byte{7}, 4096), 4096)
		if r.Run(w); w.Status() != blkStatusOK {
			t.Fatalf("write status %d", w.Status())
		}
	}
	write(0)
	if n := fua(); n != 0 {
		t.Fatalf("%d FUA writes with the write cache on", n)
	}
	if err := r.blk.SetConfig(blkCfgWriteback, []byte{0}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		write(uint64(8 + 8*i))
	}
	if n := fua(); n != 4 {
		t.Fatalf("%d of 4 writes durable with the write cache off", n)
	}
	if err := r.blk.SetConfig(blkCfgWriteback, []byte{1}); err != nil {
		t.Fatal(err)
	}
	write(64)
	if n := fua(); n != 4 {
		t.Fatalf("FUA writes %d after the cache came back on", n)
	}
}

// A disk's path between two NICs of one daemon keeps Fixed's windows
// (NVMeFcwnd, port.FixedNcwnd) under Swift, whose own ceilings are
// higher: nothing between two ports of one daemon congests, so the
// windows would only grow.
func TestBlkLocalPathCapsSwiftsWindow(t *testing.T) {
	r := newBlkRigFirmware(t, memNS(false), 1, 1, port.FirmwareSpec{Name: port.FirmwareSwift})
	r.start()
	r.Q.UseIndirect = true
	for round := 0; round < 8; round++ {
		var ws []*blktest.Request
		for i := 0; i < 100; i++ {
			ws = append(ws, r.Request(blkTypeOut, uint64(i)*16, false, bytes.Repeat([]byte{byte(round + i)}, 8192), 8192))
		}
		r.Run(ws...)
	}
	var cfg falcon.ConnConfig
	var fcwnd rue.Fixed
	var ncwnd uint32
	var fw port.FirmwareStatus
	r.blk.cfg.Port.Call(func(*falcon.Endpoint) {
		c := r.blk.cfg.Path.Conn()
		cfg, fcwnd, ncwnd = c.Config(), c.Fcwnd(), c.Ncwnd()
		fw = r.blk.cfg.Port.FirmwareStatus(1)
	})
	if cfg.MaxFcwnd != NVMeFcwnd*rue.One || fcwnd > NVMeFcwnd*rue.One {
		t.Fatalf("window cap %v, window %v after %d writes; want the cap %d and the window within it",
			cfg.MaxFcwnd.Float(), fcwnd.Float(), 800, NVMeFcwnd)
	}
	if cfg.MaxNcwnd != port.FixedNcwnd || ncwnd > port.FixedNcwnd {
		t.Fatalf("NIC window cap %d, NIC window %d after %d writes; want the cap %d and the window within it",
			cfg.MaxNcwnd, ncwnd, 800, port.FixedNcwnd)
	}
	// The ACKs between the two ports are delay samples, which keep the
	// window up: without them a cut for a stall would be for good.
	if fw.Counters["samples"] == 0 {
		t.Errorf("Swift took no delay sample from the path's ACKs (counters %v)", fw.Counters)
	}
}
