package vhostuser_test

import (
	"testing"

	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

const (
	blkSizeMax = 1 << 1
	blkSegMax  = 1 << 2
	blkFlush   = 1 << 9
)

func newBlkRig(t *testing.T) *rig {
	dev := &echoDev{
		batches:  make(chan struct{}, 16),
		features: vhostuser.FeatureVersion1 | blkSizeMax | blkSegMax | blkFlush,
		proto:    vhostuser.ProtoConfig | vhostuser.ProtoInflightSHMFD,
		queues:   1, config: make([]byte, 64),
	}
	return newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 128)
}

// reconnect drops the connection (back-end gone) and opens a new one on the same guest.
func (r *rig) reconnect() {
	old := r.done
	front, back, err := vhostusertest.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	r.fe.Reconnect(front)
	<-old
	r.done = make(chan error, 1)
	go func() { r.done <- r.srv.ServeConn(back) }()
}

func request(t *testing.T, q *vhostusertest.DriverQueue, hdr string) {
	t.Helper()
	i, _ := q.Peek()
	copy(q.Buf(i), hdr)
	_, err := q.Add([]vhostusertest.Seg{
		{GPA: q.BufGPAOf(i), Len: uint32(len(hdr))},
		{GPA: q.BufGPAOf(i) + 512, Len: 512, Write: true},
		{GPA: q.BufGPAOf(i) + 1536, Len: 1, Write: true},
	})
	must(t, err)
	q.Publish()
	q.Kick()
}

func TestBlkFirmwareThenLinuxOnOneConnection(t *testing.T) {
	r := newBlkRig(t)
	fe := r.fe
	_, err := fe.BlkInit(57)
	must(t, err)
	if fe.Proto&vhostuser.ProtoConfig == 0 || fe.Proto&vhostuser.ProtoInflightSHMFD == 0 {
		t.Fatalf("protocol %#x lacks CONFIG/INFLIGHT", fe.Proto)
	}
	// SeaBIOS acks less and polls (NO_INTERRUPT).
	bios := vhostuser.FeatureVersion1 | blkSizeMax | blkSegMax | vhostuser.FeatureProtocolFeatures
	fw := r.qs[0]
	fw.SetNoInterrupt(true)
	must(t, fe.BlkStart(fw, bios, 0))
	request(t, fw, "IN sector 0 hdr")
	if !fw.WaitUsed(1, failsafe) {
		t.Fatal("firmware request not completed")
	}
	if u, _ := fw.PopUsed(); u.Len != 513 {
		t.Fatalf("used len %d, want 513", u.Len)
	}
	base, err := fe.BlkReset()
	must(t, err)
	if base != 1 {
		t.Fatalf("GET_VRING_BASE = %d, want 1", base)
	}
	// Linux: new ring addresses, base 0, full features, new inflight region.
	lin, err := vhostusertest.NewDriverQueue(r.mem, 0, 128, 0, 2048)
	must(t, err)
	defer lin.Close()
	full := vhostuser.FeatureVersion1 | blkSizeMax | blkSegMax | blkFlush | vhostuser.FeatureProtocolFeatures
	must(t, fe.BlkStart(lin, full, 0))
	request(t, lin, "IN sector 0 again")
	if !lin.WaitUsed(1, failsafe) {
		t.Fatal("linux request not completed")
	}
	acked := r.dev.ackedList()
	if len(acked) != 4 || acked[0] != bios || acked[3] != full {
		t.Fatalf("SET_FEATURES sequence %#x", acked)
	}
	if got := r.dev.received(); len(got) != 2 || string(got[1]) != "IN sector 0 again" {
		t.Fatalf("requests %q", got)
	}
}

func TestInflightResubmitsPoppedRequestAfterReconnect(t *testing.T) {
	r := newBlkRig(t)
	_, err := r.fe.BlkInit(57)
	must(t, err)
	full := vhostuser.FeatureVersion1 | blkSizeMax | vhostuser.FeatureProtocolFeatures
	q := r.qs[0]
	must(t, r.fe.BlkStart(q, full, 0))
	// Complete one request, then pop a second one and "crash" before completing it.
	request(t, q, "first")
	r.dev.waitBatch(t)
	r.dev.mu.Lock()
	r.dev.hold = true
	r.dev.mu.Unlock()
	request(t, q, "second")
	r.dev.waitBatch(t)
	if q.UsedIdx() != 1 {
		t.Fatalf("used idx %d", q.UsedIdx())
	}
	r.reconnect()
	r.dev.mu.Lock()
	r.dev.hold = false
	r.dev.mu.Unlock()
	// QEMU: init without GET_CONFIG, keeps its inflight region, base = used idx.
	_, err = r.fe.BlkInit(0)
	must(t, err)
	must(t, r.fe.BlkStart(q, full, r.fe.UsedBases()[0]))
	if !q.WaitUsed(2, failsafe) {
		t.Fatal("inflight request not resubmitted")
	}
	got := r.dev.received()
	if len(got) != 3 || string(got[2]) != "second" {
		t.Fatalf("requests %q", got)
	}
	if n := r.counters()["inflight_resub"]; n != 1 {
		t.Fatalf("InflightResub = %d", n)
	}
	// last_avail = used idx + inflight count, so nothing else is redone.
	if st := r.srv.Status(); st.Queues[0].LastAvail != 2 {
		t.Fatalf("last_avail %d, want 2", st.Queues[0].LastAvail)
	}
}

func TestInflightLayoutStride(t *testing.T) {
	// align64(16*128 + 16): 2112 bytes per queue for queue size 128.
	if got := vhostuser.InflightQueueStride(128); got != 2112 {
		t.Fatalf("stride %d, want 2112", got)
	}
}
