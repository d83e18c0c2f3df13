package vhostuser_test

import (
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

// echoDev is a test device: every chain it pops is recorded (readable
// bytes concatenated) and its writable buffers are filled with 0xAB.
type echoDev struct {
	features, proto uint64
	queues          int
	mu              sync.Mutex
	got             [][]byte
	acked           []uint64
	config          []byte
	// hold, if set, pops chains without completing them (inflight tests).
	hold bool
	// batches, if set, receives a token after each pass that popped chains.
	batches chan struct{}
	// tables records what the session hands SetMemTable.
	tables []*vhostuser.MemTable
	// watch makes RunQueue declare its rings request rings (Queue.Watch);
	// noNotify makes it complete chains without calling Notify (a lost
	// call, for the watchdog tests).
	watch, noNotify bool
	// holdKicks makes it tell the guest not to kick after each pass that
	// took a chain (Queue.HoldKicks), as a device with requests in flight
	// does; an empty pass does not hold, as a device with none does not.
	holdKicks bool
	// idle, if set, is how a test asks the worker whether it has nothing
	// left to do: the worker answers only between passes, true when no
	// wake is waiting for it.
	idle chan chan bool
}

func (d *echoDev) SetMemTable(t *vhostuser.MemTable) {
	d.mu.Lock()
	d.tables = append(d.tables, t)
	d.mu.Unlock()
}

func (d *echoDev) memTables() []*vhostuser.MemTable {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*vhostuser.MemTable(nil), d.tables...)
}

func (d *echoDev) Features() uint64         { return d.features }
func (d *echoDev) ProtocolFeatures() uint64 { return d.proto }
func (d *echoDev) NumQueues() int           { return d.queues }
func (d *echoDev) QueueNum() uint64         { return uint64(d.queues) }
func (d *echoDev) GetConfig(off, size uint32) ([]byte, error) {
	if d.config == nil {
		return nil, vhostuser.ErrNoConfig
	}
	if off > uint32(len(d.config)) || size > uint32(len(d.config))-off {
		return nil, vhostuser.ErrBadPayload
	}
	return d.config[off : off+size], nil
}
func (d *echoDev) SetConfig(off uint32, data []byte) error {
	if d.config == nil || off+uint32(len(data)) > uint32(len(d.config)) {
		return vhostuser.ErrNoConfig
	}
	copy(d.config[off:], data)
	return nil
}
func (d *echoDev) SetFeatures(v uint64) {
	d.mu.Lock()
	d.acked = append(d.acked, v)
	d.mu.Unlock()
}
func (d *echoDev) RunQueue(q *vhostuser.Queue) {
	if d.watch {
		q.Watch()
	}
	var c vhostuser.Chain
	for {
		select {
		case <-q.Done():
			return
		case <-q.Wake():
		case ask := <-d.idle:
			ask <- len(q.Wake()) == 0
			continue
		}
		popped := false
		for q.Pop(&c) {
			popped = true
			var b []byte
			var w uint32
			for _, buf := range c.Bufs {
				if buf.Write {
					for i := range buf.Data {
						buf.Data[i] = 0xAB
					}
					w += uint32(len(buf.Data))
				} else {
					b = append(b, buf.Data...)
				}
			}
			d.mu.Lock()
			d.got = append(d.got, b)
			hold := d.hold
			d.mu.Unlock()
			if !hold {
				q.Push(c.Head, w)
			}
		}
		if d.holdKicks && popped {
			q.HoldKicks()
		}
		if !d.noNotify {
			q.Notify()
		}
		if popped && d.batches != nil {
			d.batches <- struct{}{}
		}
	}
}

// waitBatch waits until the device finished a pass (Pop, Push, Notify).
func (d *echoDev) waitBatch(t *testing.T) {
	t.Helper()
	select {
	case <-d.batches:
	case <-time.After(failsafe):
		t.Fatal("device pass did not finish")
	}
}

func (d *echoDev) ackedList() []uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]uint64(nil), d.acked...)
}

func (d *echoDev) received() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]byte(nil), d.got...)
}

const (
	mrgRxbuf = 1 << 15
	netMQ    = 1 << 22
)

// rig is a back-end served over a socketpair with a simulated front-end.
type rig struct {
	t     *testing.T
	srv   *vhostuser.Server
	dev   *echoDev
	fe    *vhostusertest.Frontend
	mem   *vhostusertest.GuestMemory
	qs    []*vhostusertest.DriverQueue
	done  chan error
	trace []string
	tmu   sync.Mutex
}

func newRig(t *testing.T, dev *echoDev, layout []vhostusertest.RegionLayout, ringRegion int, qsize uint16) *rig {
	t.Helper()
	mem, err := vhostusertest.NewGuestMemory(layout)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dev: dev, mem: mem}
	for i := 0; i < dev.queues; i++ {
		q, err := vhostusertest.NewDriverQueue(mem, i, qsize, ringRegion, 2048)
		if err != nil {
			t.Fatal(err)
		}
		r.qs = append(r.qs, q)
	}
	r.srv = &vhostuser.Server{Device: dev, Trace: func(s string) {
		r.tmu.Lock()
		r.trace = append(r.trace, s)
		r.tmu.Unlock()
	}}
	r.connect()
	t.Cleanup(func() {
		if t.Failed() { // dump the message trace
			r.tmu.Lock()
			t.Logf("back-end trace:\n%s", strings.Join(r.trace, "\n"))
			r.tmu.Unlock()
		}
		r.fe.Close()
		<-r.done
		for _, q := range r.qs {
			q.Close()
		}
		mem.Close()
	})
	return r
}

func (r *rig) connect() {
	front, back, err := vhostusertest.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	r.done = make(chan error, 1)
	go func() { r.done <- r.srv.ServeConn(back) }()
	if r.fe == nil {
		r.fe, err = vhostusertest.NewFrontend(front, r.mem, r.qs)
		if err != nil {
			r.t.Fatal(err)
		}
	} else {
		r.fe.Reconnect(front)
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func (r *rig) counters() map[string]uint64 { return r.srv.Counters.Set().Snapshot() }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// post sends payload on ring q as one readable buffer in the descriptor's own area.
func post(t *testing.T, q *vhostusertest.DriverQueue, payload []byte) uint16 {
	t.Helper()
	i, ok := q.Peek()
	if !ok {
		t.Fatal("ring full")
	}
	copy(q.Buf(i), payload)
	h, err := q.Add([]vhostusertest.Seg{{GPA: q.BufGPAOf(i), Len: uint32(len(payload))}})
	must(t, err)
	return h
}

func TestNetSequenceOnePairStartsRingsInQEMUOrder(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1 | mrgRxbuf, queues: 2}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 64)
	must(t, r.fe.NetInit(1))
	acked := vhostuser.FeatureVersion1 | mrgRxbuf | vhostuser.FeatureProtocolFeatures
	must(t, r.fe.NetStart(acked, 1, nil))
	want := []string{
		"GET_FEATURES -> 0x140008000",
		"GET_PROTOCOL_FEATURES -> 0x1a009",
		"SET_PROTOCOL_FEATURES 0x1a009",
		"GET_QUEUE_NUM -> 0x2",
		"GET_MAX_MEM_SLOTS -> 0x20",
		"SET_OWNER",
		"GET_FEATURES -> 0x140008000",
		"SET_VRING_CALL idx0 fd", "SET_VRING_ERR idx0 fd", "SET_VRING_CALL idx1 fd", "SET_VRING_ERR idx1 fd",
		"SET_VRING_ENABLE idx0=1", "SET_VRING_ENABLE idx1=1",
	}
	if got := r.fe.Log[:len(want)]; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("init transcript:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Traffic on the TX ring (1) reaches the device; the ring was enabled
	// before it existed and started when its kick fd arrived.
	post(t, r.qs[1], []byte("hello"))
	r.qs[1].Publish()
	r.qs[1].Kick()
	if !r.qs[1].WaitUsed(1, failsafe) {
		t.Fatal("no used element")
	}
	if got := dev.received(); len(got) != 1 || string(got[0]) != "hello" {
		t.Fatalf("device got %q", got)
	}
	st := r.srv.Status()
	if st.State != "running" || !st.Queues[0].Running || !st.Queues[1].Running || st.MemRegions != 1 {
		t.Fatalf("status %+v", st)
	}
	bases, err := r.fe.NetStop()
	must(t, err)
	if bases[0] != 0 || bases[1] != 1 {
		t.Fatalf("bases %v, want [0 1]", bases)
	}
	if st := r.srv.Status(); st.Queues[1].Running {
		t.Fatalf("ring 1 still running after GET_VRING_BASE: %+v", st)
	}
}

func TestNetSequenceTwoPairsKeepsDisabledPairIdle(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1 | netMQ, queues: 4}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 64)
	must(t, r.fe.NetInit(2))
	// Pair 1 re-negotiates but sends neither SET_OWNER nor GET_QUEUE_NUM.
	owners := 0
	for _, l := range r.fe.Log {
		if l == "SET_OWNER" {
			owners++
		}
	}
	if owners != 1 {
		t.Fatalf("SET_OWNER sent %d times", owners)
	}
	acked := vhostuser.FeatureVersion1 | netMQ | vhostuser.FeatureProtocolFeatures
	must(t, r.fe.NetStart(acked, 1, nil))
	// The guest posts on disabled ring 2 and kicks: the back-end must not touch it.
	post(t, r.qs[2], []byte("nope"))
	r.qs[2].Publish()
	r.qs[2].Kick()
	post(t, r.qs[1], []byte("yes"))
	r.qs[1].Publish()
	r.qs[1].Kick()
	if !r.qs[1].WaitUsed(1, failsafe) {
		t.Fatal("no used element on ring 1")
	}
	if r.qs[2].UsedIdx() != 0 {
		t.Fatal("disabled ring 2 was processed")
	}
	if n := len(dev.ackedList()); n != 2 {
		t.Fatalf("SET_FEATURES seen %d times, want 2 (once per pair)", n)
	}
	// Enabling pair 1 later processes what was already posted (no new kick).
	must(t, r.fe.Enable(2, true))
	if !r.qs[2].WaitUsed(1, failsafe) {
		t.Fatal("ring 2 not processed after enable")
	}
}

func TestFeatureNegotiation(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1 | vhostuser.FeatureEventIdx, queues: 1}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	f, err := r.fe.GetU64(vhostuser.ReqGetFeatures)
	must(t, err)
	if f != dev.features|vhostuser.FeatureProtocolFeatures {
		t.Fatalf("features %#x", f)
	}
	p, err := r.fe.GetU64(vhostuser.ReqGetProtocolFeatures)
	must(t, err)
	for _, bit := range []uint64{vhostuser.ProtoMQ, vhostuser.ProtoReplyAck, vhostuser.ProtoResetDevice, vhostuser.ProtoConfigureMemSlots, vhostuser.ProtoStatus} {
		if p&bit == 0 {
			t.Errorf("protocol bit %#x not offered", bit)
		}
	}
	r.fe.Proto = vhostuser.ProtoReplyAck
	must(t, r.fe.SetU64(vhostuser.ReqSetProtocolFeatures, vhostuser.ProtoReplyAck))
	// Unoffered feature bits fail with a failure ack when asked for one.
	if err := r.fe.Set(vhostuser.ReqSetFeatures, true, binary.LittleEndian.AppendUint64(nil, 1<<5)); err == nil {
		t.Fatal("SET_FEATURES with an unoffered bit acked")
	}
	// Latest wins.
	must(t, r.fe.Set(vhostuser.ReqSetFeatures, true, binary.LittleEndian.AppendUint64(nil, vhostuser.FeatureVersion1)))
	must(t, r.fe.Set(vhostuser.ReqSetFeatures, true, binary.LittleEndian.AppendUint64(nil, vhostuser.FeatureVersion1|vhostuser.FeatureEventIdx)))
	if st := r.srv.Status(); st.Features != vhostuser.FeatureVersion1|vhostuser.FeatureEventIdx {
		t.Fatalf("features %#x", st.Features)
	}
	// STATUS is held for QEMU's read-modify-write.
	must(t, r.fe.SetU64(vhostuser.ReqSetStatus, 0xf))
	if s, _ := r.fe.GetU64(vhostuser.ReqGetStatus); s != 0xf {
		t.Fatalf("status %#x", s)
	}
}

// startRings negotiates and starts every ring with the given features.
func (r *rig) startRings(acked uint64) {
	r.t.Helper()
	fe := r.fe
	_, err := fe.GetU64(vhostuser.ReqGetFeatures)
	must(r.t, err)
	fe.Proto = vhostuser.ProtoReplyAck | vhostuser.ProtoMQ
	must(r.t, fe.SetU64(vhostuser.ReqSetProtocolFeatures, fe.Proto))
	must(r.t, fe.SetU64(vhostuser.ReqSetFeatures, acked|vhostuser.FeatureProtocolFeatures))
	p, fds := r.mem.MemTablePayload()
	must(r.t, fe.Set(vhostuser.ReqSetMemTable, true, p, fds...))
	closeFDs(fds)
	for _, q := range r.qs {
		must(r.t, fe.RingSetup(q, 0))
		must(r.t, fe.Enable(q.Index, true))
	}
}

func TestTwoRegionsRingsAboveTheHoleBuffersBelow(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 1}
	// Rings and their buffer areas live in region 1 (GPA 4 MiB+), the
	// second region of the same memfd at file offset 1 MiB.
	r := newRig(t, dev, vhostusertest.TwoRegions(1<<20, 4<<20, 1<<20), 1, 16)
	r.startRings(vhostuser.FeatureVersion1)
	q := r.qs[0]
	low := r.mem.Alloc(0, 64, 64)
	copy(r.mem.Bytes(low, 5), "low!!")
	_, err := q.Add([]vhostusertest.Seg{{GPA: low, Len: 5}, {GPA: q.BufGPAOf(9), Len: 3, Write: true}})
	must(t, err)
	post(t, q, []byte("high"))
	q.Publish()
	q.Kick()
	if !q.WaitUsed(2, failsafe) {
		t.Fatal("not used")
	}
	u, _ := q.PopUsed()
	if u.Len != 3 || r.mem.Bytes(q.BufGPAOf(9), 3)[2] != 0xAB {
		t.Fatalf("used %+v", u)
	}
	got := dev.received()
	if string(got[0]) != "low!!" || string(got[1]) != "high" {
		t.Fatalf("got %q", got)
	}
	if st := r.srv.Status(); st.MemRegions != 2 {
		t.Fatalf("regions %d", st.MemRegions)
	}
}

func TestIndirectDescriptorsAndEventIdx(t *testing.T) {
	feat := vhostuser.FeatureVersion1 | vhostuser.FeatureIndirectDesc | vhostuser.FeatureEventIdx
	dev := &echoDev{features: feat, queues: 1, batches: make(chan struct{}, 16)}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	q := r.qs[0]
	q.UseIndirect = true
	q.SetUsedEvent(0xffff) // no interrupt wanted until used idx passes 0xffff
	r.startRings(feat)
	a, b := r.mem.Alloc(0, 8, 8), r.mem.Alloc(0, 8, 8)
	copy(r.mem.Bytes(a, 3), "abc")
	copy(r.mem.Bytes(b, 3), "def")
	_, err := q.Add([]vhostusertest.Seg{{GPA: a, Len: 3}, {GPA: b, Len: 3}})
	must(t, err)
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if got := dev.received(); string(got[0]) != "abcdef" {
		t.Fatalf("got %q", got)
	}
	// The device armed avail_event at its last avail idx. The first
	// notification is always sent (no previous signal to compare with).
	if ev := q.AvailEvent(); ev != 1 {
		t.Fatalf("avail_event %d, want 1", ev)
	}
	if c := r.counters()["calls"]; c != 1 {
		t.Fatalf("calls %d, want 1", c)
	}
	// used_event 0xffff: "not yet", so the next completion is silent.
	post(t, q, []byte("x"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if c := r.counters()["calls"]; c != 1 {
		t.Fatalf("calls %d, want 1 (used_event suppressed)", c)
	}
	// Ask for an interrupt when used idx passes 2.
	q.SetUsedEvent(2)
	post(t, q, []byte("y"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if c := r.counters()["calls"]; c != 2 {
		t.Fatalf("calls %d, want 2", c)
	}
	if ev := q.AvailEvent(); ev != 3 {
		t.Fatalf("avail_event %d, want 3", ev)
	}
}

func TestBadChainsAreCountedAndReturned(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 1}
	r := newRig(t, dev, vhostusertest.TwoRegions(1<<20, 4<<20, 1<<20), 0, 16)
	r.startRings(vhostuser.FeatureVersion1)
	q := r.qs[0]
	good := q.BufGPAOf(0)
	cases := []struct {
		counter string
		descs   func()
	}{
		{"chain_loop", func() { q.RawDesc(1, good, 4, 1, 2); q.RawDesc(2, good, 4, 1, 1) }},
		{"chain_bad_gpa", func() { q.RawDesc(1, 2<<20, 4, 0, 0) }},
		{"chain_crossing", func() { q.RawDesc(1, 1<<20-2, 4, 0, 0) }},
		{"chain_direction", func() { q.RawDesc(1, good, 4, 3, 2); q.RawDesc(2, good, 4, 0, 0) }},
		{"chain_bad_next", func() { q.RawDesc(1, good, 4, 1, 99) }},
		{"chain_indir_no_neg", func() { q.RawDesc(1, good, 16, 4, 0) }},
	}
	for i, c := range cases {
		c.descs()
		q.RawAvail(1)
		q.Publish()
		q.Kick()
		if !q.WaitUsed(i+1, failsafe) {
			t.Fatalf("%s: chain not returned", c.counter)
		}
		if n := r.counters()[c.counter]; n != 1 {
			t.Errorf("%s = %d, want 1", c.counter, n)
		}
	}
	for i := 0; i < len(cases); i++ {
		if u, _ := q.PopUsed(); u.ID != 1 || u.Len != 0 {
			t.Fatalf("used %+v, want head 1 len 0", u)
		}
	}
	// The ring still works after bad chains.
	post(t, q, []byte("ok"))
	q.Publish()
	q.Kick()
	if !q.WaitUsed(1, failsafe) || len(dev.received()) != 1 {
		t.Fatal("ring dead after bad chains")
	}
	// A head index beyond the ring breaks the ring (counted), not the daemon.
	q.RawAvail(200)
	q.Publish()
	q.Kick()
	deadline := time.Now().Add(failsafe)
	for r.counters()["bad_head"] == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r.counters()["bad_head"] != 1 {
		t.Fatal("BadHead not counted")
	}
}

func TestMalformedMessages(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 2}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	fe := r.fe
	fe.Proto = vhostuser.ProtoReplyAck
	must(t, fe.SetU64(vhostuser.ReqSetProtocolFeatures, fe.Proto))
	cases := []struct {
		name    string
		req     vhostuser.Request
		payload []byte
		counter string
	}{
		{"short SET_FEATURES", vhostuser.ReqSetFeatures, []byte{1, 2, 3}, "bad_size"},
		{"kick without fd", vhostuser.ReqSetVringKick, binary.LittleEndian.AppendUint64(nil, 0), "bad_fd_count"},
		{"ring index out of range", vhostuser.ReqSetVringNum, []byte{9, 0, 0, 0, 16, 0, 0, 0}, "bad_ring_index"},
		{"ring size not a power of two", vhostuser.ReqSetVringNum, []byte{0, 0, 0, 0, 15, 0, 0, 0}, "bad_ring_size"},
		{"unaligned ring", vhostuser.ReqSetVringAddr, append([]byte{0, 0, 0, 0, 0, 0, 0, 0, 8}, make([]byte, 31)...), "bad_ring_addr"},
		{"mem table count mismatch", vhostuser.ReqSetMemTable, append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, make([]byte, 32)...), "bad_size"},
		{"unknown request", vhostuser.Request(77), nil, "unknown_request"},
		{"log base unsupported", vhostuser.ReqSetLogBase, make([]byte, 16), "unknown_request"},
	}
	for _, c := range cases {
		before := r.counters()[c.counter]
		if err := fe.Set(c.req, true, c.payload); err == nil {
			t.Errorf("%s: acked as success", c.name)
		}
		if r.counters()[c.counter] != before+1 {
			t.Errorf("%s: %s not counted", c.name, c.counter)
		}
	}
	// A GET whose payload is malformed cannot be answered: the session resets.
	if err := fe.Conn().WriteRequest(vhostuser.ReqGetVringBase, 0, []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := <-r.done; err == nil {
		t.Fatal("session survived a malformed GET")
	}
	if r.counters()["session_resets"] != 1 {
		t.Fatal("reset not counted")
	}
	// A fresh session works again; a bad header version also resets.
	r.connect()
	if _, err := fe.GetU64(vhostuser.ReqGetFeatures); err != nil {
		t.Fatal(err)
	}
	if err := fe.Conn().WriteRequest(vhostuser.ReqGetFeatures, 2, nil); err != nil { // version 3
		t.Fatal(err)
	}
	if err := <-r.done; err == nil || r.counters()["bad_version"] != 1 {
		t.Fatalf("bad version: err=%v counters=%v", err, r.counters()["bad_version"])
	}
	r.connect()
}

func TestGetConfigEchoesHeaderAndExactSize(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, proto: vhostuser.ProtoConfig | vhostuser.ProtoInflightSHMFD, queues: 1, config: make([]byte, 60)}
	dev.config[0] = 0x80
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	cfg, err := r.fe.BlkInit(57)
	must(t, err)
	if len(cfg) != 57 || cfg[0] != 0x80 {
		t.Fatalf("config %x", cfg)
	}
}

func (r *rig) waitCounter(name string, want uint64) {
	r.t.Helper()
	deadline := time.Now().Add(failsafe)
	for r.counters()[name] < want {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s = %d, want %d", name, r.counters()[name], want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMemTableReplacedWhileRingRuns(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 1}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	r.startRings(vhostuser.FeatureVersion1)
	q := r.qs[0]
	post(t, q, []byte("one"))
	q.Publish()
	q.Kick()
	q.WaitUsed(1, failsafe)
	// A new SET_MEM_TABLE (QEMU sends one per start) while the ring runs:
	// the worker moves at its next wake, then the old table is unmapped.
	p, fds := r.mem.MemTablePayload()
	must(t, r.fe.Set(vhostuser.ReqSetMemTable, true, p, fds...))
	closeFDs(fds)
	r.waitCounter("mem_tables_freed", 1)
	post(t, q, []byte("two"))
	q.Publish()
	q.Kick()
	if !q.WaitUsed(2, failsafe) {
		t.Fatal("ring dead after table replacement")
	}
	if got := dev.received(); len(got) != 2 || string(got[1]) != "two" {
		t.Fatalf("got %q", got)
	}
}

func TestDeviceGetsEachMemTableAndNilAtSessionEnd(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 1}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	r.startRings(vhostuser.FeatureVersion1)
	p, fds := r.mem.MemTablePayload()
	must(t, r.fe.Set(vhostuser.ReqSetMemTable, true, p, fds...))
	closeFDs(fds)
	got := dev.memTables()
	if len(got) != 2 || got[0] == nil || got[1] == nil || got[0] == got[1] {
		t.Fatalf("device got tables %v, want two distinct ones", got)
	}
	if !got[1].TryAcquire() {
		t.Fatal("the newest table handed to the device is already released")
	}
	got[1].Release()
	r.fe.Close()
	<-r.done
	r.done <- nil // the cleanup waits on it again
	got = dev.memTables()
	if len(got) != 3 || got[2] != nil {
		t.Fatalf("after the session ended the device got %v, want a final nil", got)
	}
}

func TestAddAndRemoveMemRegions(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 1}
	r := newRig(t, dev, vhostusertest.TwoRegions(1<<20, 4<<20, 1<<20), 1, 16)
	fe := r.fe
	fe.Proto = vhostuser.ProtoReplyAck | vhostuser.ProtoConfigureMemSlots
	must(t, fe.SetU64(vhostuser.ReqSetProtocolFeatures, fe.Proto))
	if n, _ := fe.GetU64(vhostuser.ReqGetMaxMemSlots); n != vhostuser.MaxMemSlots {
		t.Fatalf("max mem slots %d", n)
	}
	must(t, fe.SetU64(vhostuser.ReqSetFeatures, vhostuser.FeatureVersion1|vhostuser.FeatureProtocolFeatures))
	for i := 0; i < 2; i++ {
		p, fd := r.mem.RegionPayload(i)
		must(t, fe.Set(vhostuser.ReqAddMemReg, true, p, fd))
	}
	// The same region again is another queue pair's vhost_dev adding it
	// (QEMU 7.2 with queues=2): accepted and counted once more.
	p, fd := r.mem.RegionPayload(0)
	must(t, fe.Set(vhostuser.ReqAddMemReg, true, p, fd))
	unix.Close(fd)
	if r.counters()["dup_mem_regions"] != 1 {
		t.Fatal("duplicate not counted")
	}
	// A different region overlapping region 0 is refused.
	p, fd = r.mem.RegionPayload(0)
	binary.LittleEndian.PutUint64(p[16:], 0x2000)
	if err := fe.Set(vhostuser.ReqAddMemReg, true, p, fd); err == nil {
		t.Fatal("overlapping ADD_MEM_REG acked")
	}
	unix.Close(fd)
	q := r.qs[0]
	must(t, fe.RingSetup(q, 0))
	must(t, fe.Enable(0, true))
	low := r.mem.Alloc(0, 16, 16)
	q.Add([]vhostusertest.Seg{{GPA: low, Len: 4}})
	q.Publish()
	q.Kick()
	if !q.WaitUsed(1, failsafe) || len(dev.received()) != 1 {
		t.Fatal("buffer in region 0 not processed")
	}
	// Remove region 0 once per vhost_dev that added it: the ring (in
	// region 1) keeps running, but a buffer in region 0 is then outside
	// the table.
	p, _ = r.mem.RegionPayload(0)
	must(t, fe.Set(vhostuser.ReqRemMemReg, true, p))
	if st := r.srv.Status(); st.MemRegions != 2 {
		t.Fatalf("first REM_MEM_REG removed a region still added by another vhost_dev")
	}
	must(t, fe.Set(vhostuser.ReqRemMemReg, true, p))
	q.Add([]vhostusertest.Seg{{GPA: low, Len: 4}})
	q.Publish()
	q.Kick()
	if !q.WaitUsed(2, failsafe) {
		t.Fatal("chain not returned")
	}
	if r.counters()["chain_bad_gpa"] != 1 || len(dev.received()) != 1 {
		t.Fatalf("ChainBadGPA=%d received=%d", r.counters()["chain_bad_gpa"], len(dev.received()))
	}
	if st := r.srv.Status(); st.MemRegions != 1 {
		t.Fatalf("regions %d", st.MemRegions)
	}
}

func TestCallFDSwapWhileRunning(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 1, batches: make(chan struct{}, 16)}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	r.startRings(vhostuser.FeatureVersion1)
	q := r.qs[0]
	post(t, q, []byte("a"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if q.Calls() != 1 {
		t.Fatal("no call on the first fd")
	}
	other, err := vhostusertest.NewDriverQueue(r.mem, 0, 16, 0, 64) // just for its eventfds
	must(t, err)
	defer other.Close()
	must(t, r.fe.VringFile(vhostuser.ReqSetVringCall, 0, other.CallFD))
	_, err = r.fe.GetU64(vhostuser.ReqGetFeatures) // the swap has been handled
	must(t, err)
	// A call on the new fd at the swap covers one the worker may have sent
	// to the old fd after the front-end stopped looking at it.
	if other.Calls() != 1 {
		t.Fatal("no covering call on the new fd at the swap")
	}
	post(t, q, []byte("b"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if q.Calls() != 0 || other.Calls() != 1 {
		t.Fatal("call not moved to the new fd")
	}
	if r.counters()["call_fd_swaps"] != 1 {
		t.Fatal("swap not counted")
	}
}

func TestMemoryFaultStopsOnlyThatRing(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 1}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	r.startRings(vhostuser.FeatureVersion1)
	q := r.qs[0]
	// The front-end shrinks the file under the last 64 KiB of guest RAM
	// and posts a buffer there.
	must(t, r.mem.Truncate(1<<20-64<<10))
	q.Add([]vhostusertest.Seg{{GPA: 1<<20 - 4096, Len: 16}})
	q.Publish()
	q.Kick()
	r.waitCounter("memory_faults", 1)
	// The session is alive: it still answers.
	if _, err := r.fe.GetU64(vhostuser.ReqGetFeatures); err != nil {
		t.Fatal(err)
	}
	// A table whose region lies past the end of its file is refused.
	p, fds := r.mem.MemTablePayload()
	defer closeFDs(fds)
	if err := r.fe.Set(vhostuser.ReqSetMemTable, true, p, fds...); err == nil {
		t.Fatal("region beyond the file accepted")
	}
	if r.counters()["bad_mem_region"] != 1 {
		t.Fatal("BadMemRegion not counted")
	}
}

// qemuTwoPairs is what QEMU 7.2 sent a back-end offering MQ, REPLY_ACK,
// RESET_DEVICE, CONFIGURE_MEM_SLOTS and STATUS with queues=2,mq=on and
// -smp 2 (Linux 6.1 guest, fresh boot), request names only.
var qemuTwoPairs = strings.Fields(`
GET_FEATURES GET_PROTOCOL_FEATURES SET_PROTOCOL_FEATURES GET_QUEUE_NUM GET_MAX_MEM_SLOTS SET_OWNER GET_FEATURES
SET_VRING_CALL SET_VRING_ERR SET_VRING_CALL SET_VRING_ERR
GET_FEATURES GET_PROTOCOL_FEATURES SET_PROTOCOL_FEATURES GET_MAX_MEM_SLOTS GET_FEATURES
SET_VRING_CALL SET_VRING_ERR SET_VRING_CALL SET_VRING_ERR
SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE
SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE
SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE
SET_FEATURES GET_STATUS SET_STATUS ADD_MEM_REG
SET_VRING_NUM SET_VRING_BASE SET_VRING_ADDR SET_VRING_KICK SET_VRING_CALL
SET_VRING_NUM SET_VRING_BASE SET_VRING_ADDR SET_VRING_KICK SET_VRING_CALL
SET_FEATURES GET_STATUS ADD_MEM_REG
SET_VRING_NUM SET_VRING_BASE SET_VRING_ADDR SET_VRING_KICK SET_VRING_CALL
SET_VRING_NUM SET_VRING_BASE SET_VRING_ADDR SET_VRING_KICK SET_VRING_CALL
GET_STATUS SET_STATUS
SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE SET_VRING_ENABLE`)

func TestSimulatorReplaysQEMUTwoPairSequence(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1 | netMQ, queues: 4}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 64)
	must(t, r.fe.NetInit(2))
	must(t, r.fe.NetStart(vhostuser.FeatureVersion1|netMQ|vhostuser.FeatureProtocolFeatures, 2, nil))
	if _, err := r.fe.GetU64(vhostuser.ReqGetFeatures); err != nil { // barrier: all handled
		t.Fatal(err)
	}
	r.tmu.Lock()
	var got []string
	for _, l := range r.trace {
		got = append(got, strings.Fields(l)[0])
	}
	r.tmu.Unlock()
	got = got[:len(got)-1]
	if strings.Join(got, " ") != strings.Join(qemuTwoPairs, " ") {
		t.Fatalf("sequence:\n%s\nQEMU 7.2:\n%s", strings.Join(got, " "), strings.Join(qemuTwoPairs, " "))
	}
	if st := r.srv.Status(); st.State != "running" || !st.Queues[3].Running || st.MemRegions != 1 {
		t.Fatalf("status %+v", st)
	}
	if r.counters()["dup_mem_regions"] != 1 {
		t.Fatal("pair 1's ADD_MEM_REG not taken as a duplicate")
	}
}

// A base that disagrees with the ring's used idx (the ring was not stopped
// cleanly) resumes from the used idx, as libvhost-user does for in-order
// devices.
func TestRingResumesFromUsedIdxWhenBaseDisagrees(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 1}
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	fe := r.fe
	fe.Proto = vhostuser.ProtoReplyAck
	must(t, fe.SetU64(vhostuser.ReqSetProtocolFeatures, fe.Proto))
	must(t, fe.SetU64(vhostuser.ReqSetFeatures, vhostuser.FeatureVersion1|vhostuser.FeatureProtocolFeatures))
	p, fds := r.mem.MemTablePayload()
	must(t, fe.Set(vhostuser.ReqSetMemTable, true, p, fds...))
	closeFDs(fds)
	q := r.qs[0]
	post(t, q, []byte("first"))
	q.Publish()
	must(t, fe.RingSetup(q, 5)) // used idx in guest memory is 0
	must(t, fe.Enable(0, true))
	if !q.WaitUsed(1, failsafe) {
		t.Fatal("chain at avail 0 skipped")
	}
	if r.counters()["resumed_from_used"] != 1 {
		t.Fatal("resume not counted")
	}
}

// failsafe bounds every wait in these tests. Tests assert on outcomes,
// never on timing; the bound only turns a hang into a failure, so it is
// generous for a loaded machine.
const failsafe = 60 * time.Second
