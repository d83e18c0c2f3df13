package rdma

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"falconnic/device/cm"
	"falconnic/device/port"
	"falconnic/device/rdmauapi"
	"falconnic/internal/clock"
	"falconnic/verbs"
)

func TestSQPollFlagOffsetIsTheUAPIs(t *testing.T) {
	if verbs.SQPollFlagOff != rdmauapi.RingNICPollingOff || verbs.CQArmWordOff != rdmauapi.RingCQArmOff {
		t.Fatalf("verbs.SQPollFlagOff %d, uapi %d", verbs.SQPollFlagOff, rdmauapi.RingNICPollingOff)
	}
}

// newVMClock is newVM with its port on clk and the NIC's doorbell polling
// set before the port runs.
func newVMClock(t *testing.T, mac byte, mgr *cm.Manager, clk clock.Clock, poll PollConfig) *vm {
	p := port.New(clk, nil)
	v := newVMOn(t, mac, mgr, p)
	v.r.SetPolling(poll)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.Run(ctx)
	return v
}

// until waits (bounded) for cond, evaluated on v's port goroutine.
func (v *vm) until(what string, cond func(r *Func) bool) {
	v.t.Helper()
	for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		ok := false
		v.r.Call(func(r *Func) { ok = cond(r) })
		if ok {
			return
		}
	}
	v.t.Fatalf("waited in vain for %s", what)
}

// TestRDMADoorbellPollingThroughTheControlChannel: two NICs of one daemon
// on a manual clock, A polling. The driver's first post rings; while A's
// flag is set further posts (READs) send no DB_SQ frame and a poll (the clock
// moved by one interval) takes them; when the window ends the flag is 0
// and the next post rings again. The counters are in the status.
func TestRDMADoorbellPollingThroughTheControlChannel(t *testing.T) {
	clk := clock.NewManual(time.Second)
	mgr := cm.NewOnFabric(nil)
	a := newVMClock(t, 0xa, mgr, clk, PollConfig{On: true, Late: time.Hour})
	b := newVMClock(t, 0xb, mgr, clk, PollConfig{})
	qa := a.setupRC(16)
	b.setupRC(17)
	a.connect(16, b.mac, 17)
	b.connect(17, a.mac, 16)
	// READs: a READ completes when its Pull Data arrives, with no ACK
	// timer, so the clock moves only when the test moves it.
	_, dstVA := a.regMR(1, 64, verbs.AccessLocalWrite)
	_, srcVA := b.regMR(1, 64, verbs.AccessLocalWrite|verbs.AccessRemoteRead)
	read := func(id uint64) bool {
		return a.post(qa, 16, func(w verbs.SendWQE) {
			w.SetWRID(id)
			w.SetOpcode(verbs.WRRead)
			w.SetFlags(2)
			w.SetRemoteAddr(srcVA)
			w.SetRKey(1<<8 | 1)
			w.SGE(0).Set(dstVA, 64, 1<<8)
			w.SetNumSGE(1)
			w.SetLength(64)
		})
	}
	cqe := func(id uint64) {
		t.Helper()
		if wc := a.pollCQ(qa.scq); wc.Status() != verbs.WCSuccess || wc.WRID() != id {
			t.Fatalf("CQE %d: %v, want %d", wc.WRID(), wc.Status(), id)
		}
	}
	flag := func() uint32 { return atomic.LoadUint32(word(a.at(qa.sq+rdmauapi.RingNICPollingOff, 4))) }
	if !read(1) {
		t.Fatal("the first post did not ring")
	}
	cqe(1)
	a.until("the polling window", func(r *Func) bool { return r.eng.Polling() })
	if flag() != 1 {
		t.Fatalf("flag %d while polling", flag())
	}
	if read(2) || read(3) {
		t.Fatal("a post rang while the flag was set")
	}
	clk.Advance(verbs.DefaultPollEvery)
	cqe(2)
	cqe(3)
	// The window runs out on the clock: the flag goes back to 0.
	clk.Advance(verbs.DefaultPollWindowCap)
	a.until("the window's end", func(r *Func) bool { return !r.eng.Polling() })
	if flag() != 0 {
		t.Fatalf("flag %d after the window", flag())
	}
	if !read(4) {
		t.Fatal("a post after the window did not ring")
	}
	cqe(4)
	var st map[string]uint64
	a.r.Call(func(r *Func) { st = r.Status() })
	if st["rdma_doorbells"] != 2 || st["verbs.poll_found"] != 1 || st["verbs.poll_windows_expired"] == 0 ||
		st["verbs.poll_flag_sets"] == 0 || st["verbs.poll_flag_clears"] == 0 {
		t.Fatalf("status: doorbells %d found %d expired %d sets %d clears %d", st["rdma_doorbells"], st["verbs.poll_found"],
			st["verbs.poll_windows_expired"], st["verbs.poll_flag_sets"], st["verbs.poll_flag_clears"])
	}
}

// BenchmarkRDMAMemLoad32 is the DMA engine's atomic read of a ring word
// through the vhost-user memory table: what each doorbell poll reads
// (verbs' BenchmarkPollIdle measures the poll over flat memory).
func BenchmarkRDMAMemLoad32(b *testing.B) {
	v := newVMOn(&testing.T{}, 0x31, nil, port.New(nil, nil))
	gpa := v.alloc(4096) + rdmauapi.RingProducerOff
	b.ReportAllocs()
	for range b.N {
		if _, err := v.r.mem.Load32(gpa); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRDMADoorbellFrame is the RDMA function's work for one DB_SQ
// control frame on an SQ with nothing new posted (decode, checks, a pump
// that reads the producer index): what the daemon spends per frame that
// doorbell polling saves, besides the frame's way through the guest's
// virtio-net TX ring and the port's queue. Compare BenchmarkPollIdle (one
// poll) and BenchmarkRDMAMemLoad32.
func BenchmarkRDMADoorbellFrame(b *testing.B) {
	v := newVM(&testing.T{}, 0x32, nil)
	v.setupRC(16)
	v.connect(16, [6]byte{0x52, 0x54, 0, 0, 0, 0x33}, 17)
	body := make([]byte, rdmauapi.DoorbellSize)
	rdmauapi.Doorbell(body).SetHandle(16)
	frame := rdmauapi.AppendFrame(nil, v.mac, rdmauapi.HdrFields{Opcode: rdmauapi.OpDBSQ,
		Flags: rdmauapi.FlagNoReply, Instance: v.inst, ReqID: 1}, body)
	b.ReportAllocs()
	v.r.Call(func(r *Func) {
		b.ResetTimer()
		for range b.N {
			r.control(frame)
		}
		b.StopTimer()
	})
	if n := v.r.Stats.Doorbells.Load(); n < uint64(b.N) {
		b.Fatalf("%d doorbells counted", n)
	}
}
