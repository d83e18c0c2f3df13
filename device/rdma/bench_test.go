package rdma

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"falconnic/device/cm"
	"falconnic/device/port"
	"falconnic/device/rdmauapi"
	"falconnic/verbs"
)

// benchPair is two VMs' RDMA functions in one daemon with QP 16 ↔ 17 in
// RTS and a registered buffer of n bytes on each side.
type benchPair struct {
	a, b         *vm
	qa, qb       qpRings
	srcVA, dstVA uint64
	srcKey       uint32
	dstKey       uint32
}

func newBenchPair(t *testing.T, n int) *benchPair {
	mgr := cm.NewOnFabric(nil)
	return newBenchPairOf(t, n, newVM(t, 0xa, mgr), newVM(t, 0xb, mgr))
}

// newBenchPairOneCore is newBenchPair with both NICs' ports run by one
// goroutine (port.Port.Adopt), as one core of a NIC runs several engines.
func newBenchPairOneCore(t *testing.T, n int) *benchPair {
	return newBenchPairFirmware(t, n, port.FirmwareSpec{})
}

// newBenchPairFirmware is newBenchPairOneCore with fw on both ports.
func newBenchPairFirmware(t *testing.T, n int, fw port.FirmwareSpec) *benchPair {
	mgr := cm.NewOnFabric(nil)
	pa, pb := port.New(nil, nil), port.New(nil, nil)
	for _, p := range []*port.Port{pa, pb} {
		if err := p.UseFirmware(fw); err != nil {
			t.Fatal(err)
		}
	}
	a, b := newVMOn(t, 0xa, mgr, pa), newVMOn(t, 0xb, mgr, pb)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go pa.Run(ctx)
	pa.Adopt(pb)
	go pb.Run(ctx)
	return newBenchPairOf(t, n, a, b)
}

func newBenchPairOf(t *testing.T, n int, a, b *vm) *benchPair {
	p := &benchPair{a: a, b: b}
	p.qa, p.qb = p.a.setupRC(16), p.b.setupRC(17)
	p.a.connect(16, p.b.mac, 17)
	p.b.connect(17, p.a.mac, 16)
	_, p.srcVA = p.a.regMR(1, n, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	_, p.dstVA = p.b.regMR(1, n, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	p.srcKey, p.dstKey = 1<<8, 1<<8|1
	return p
}

// signaled fills a signaled send WQE of opcode op (WRITE or READ) between
// A's and B's buffers, n bytes of each.
func (p *benchPair) signaled(op uint32, n uint32) func(w verbs.SendWQE) {
	return func(w verbs.SendWQE) {
		w.SetOpcode(op)
		w.SetFlags(2)
		w.SetRemoteAddr(p.dstVA)
		w.SetRKey(p.dstKey)
		w.SGE(0).Set(p.srcVA, n, p.srcKey)
		w.SetNumSGE(1)
		w.SetLength(n)
	}
}

// word is the guest's 32-bit word at b (an aligned ring-header field).
func word(b []byte) *uint32 { return (*uint32)(unsafe.Pointer(&b[0])) }

// post writes one send WQE into the SQ ring from the guest's side, as
// librxe does (the producer index last), then does what the driver's
// fnic_post_send does: after a full barrier it reads the NIC's polling
// flag and rings DB_SQ only while it reads 0. It reports whether it rang.
func (v *vm) post(q qpRings, qpn uint32, fill func(w verbs.SendWQE)) bool {
	prodW := word(v.at(q.sq+rdmauapi.RingProducerOff, 4))
	prod := atomic.LoadUint32(prodW)
	w := verbs.SendWQE(v.at(q.sq+384+uint64(prod&15)<<9, 512))
	clear(w)
	fill(w)
	atomic.StoreUint32(prodW, (prod+1)&15) // a full barrier: XCHG
	if atomic.LoadUint32(word(v.at(q.sq+rdmauapi.RingNICPollingOff, 4))) != 0 {
		return false
	}
	v.doorbell(qpn)
	return true
}

// spinCQ busy-polls a CQ ring for one CQE.
func (v *vm) spinCQ(gpa uint64) verbs.WCStatus {
	for {
		st, ok := verbs.WCStatus(0), false
		v.r.Call(func(*Func) {
			prod := binary.LittleEndian.Uint32(v.at(gpa+128, 4))
			cons := binary.LittleEndian.Uint32(v.at(gpa+256, 4))
			if prod != cons {
				st, ok = verbs.WC(v.at(gpa+384+uint64(cons&63)<<6, 48)).Status(), true
				binary.LittleEndian.PutUint32(v.at(gpa+256, 4), (cons+1)&63)
			}
		})
		if ok {
			return st
		}
		runtime.Gosched()
	}
}

// BenchmarkRDMAWrite64K measures a signaled 64 KiB RDMA WRITE between the
// RDMA functions of two NICs in one daemon: control-channel doorbell, SQ
// ring read, 2 Falcon pushes (32 KiB segments: LocalMTU), DMA into the
// peer's memory, CQE written.
func BenchmarkRDMAWrite64K(b *testing.B) {
	const n = 64 << 10
	t := &testing.T{}
	p := newBenchPair(t, n)
	b.SetBytes(n)
	b.ResetTimer()
	write := p.signaled(verbs.WRWrite, n)
	for range b.N {
		p.a.post(p.qa, 16, write)
		if st := p.a.spinCQ(p.qa.scq); st != verbs.WCSuccess {
			b.Fatalf("status %v", st)
		}
	}
}

// BenchmarkRDMAPipelined64K is ib_write_bw's and ib_read_bw's pattern in
// process: 64 KiB WRITEs or READs between two NICs of one daemon (their
// ports on one goroutine, as the daemon runs them) with 8 in flight, each
// signaled and its CQE taken before the next is posted, under each
// firmware. Run it with -cpu 1: the guest side then only runs when the
// NICs have nothing to do, so ns/op is the daemon's work per 64 KiB plus
// the guest's posting and polling.
func BenchmarkRDMAPipelined64K(b *testing.B) {
	for _, op := range []struct {
		name string
		code uint32
	}{{"write", verbs.WRWrite}, {"read", verbs.WRRead}} {
		for _, fw := range []string{port.FirmwareSwift, port.FirmwareFixed} {
			b.Run(op.name+"/"+fw, func(b *testing.B) { benchPipelined(b, op.code, port.FirmwareSpec{Name: fw}) })
		}
	}
}

func benchPipelined(b *testing.B, op uint32, fw port.FirmwareSpec) {
	const n, depth = 64 << 10, 8
	t := &testing.T{}
	p := newBenchPairFirmware(t, n, fw)
	wqe := p.signaled(op, n)
	b.SetBytes(n)
	b.ResetTimer()
	posted := 0
	for ; posted < depth && posted < b.N; posted++ {
		p.a.post(p.qa, 16, wqe)
	}
	for done := 0; done < b.N; done++ {
		if st := p.a.spinCQ(p.qa.scq); st != verbs.WCSuccess {
			b.Fatalf("status %v", st)
		}
		if posted < b.N {
			p.a.post(p.qa, 16, wqe)
			posted++
		}
	}
}

// BenchmarkRDMAPingPong8B measures latency-style ping-pong: an 8-byte
// WRITE_WITH_IMM from A to B, then one from B to A, each waited for on the
// receiver's CQ (ib_write_lat's pattern with immediate data), with the
// NICs' doorbell polling off (every post rings DB_SQ), on, and on without
// its switch-off when polls run late (the host's load deschedules the
// benchmark's thread for longer than verbs.DefaultPollLate, which switches
// polling off as it would on a starved daemon). It reports the DB_SQ
// frames per post and the process's CPU time per round trip.
func BenchmarkRDMAPingPong8B(b *testing.B) {
	for _, c := range []struct {
		name    string
		poll    PollConfig
		oneCore bool
	}{
		{"polling=off", PollConfig{}, false},
		{"polling=on", PollConfig{On: true}, false},
		{"polling=on,late=1s", PollConfig{On: true, Late: time.Second}, false},
		{"polling=off,one-core", PollConfig{}, true},
		{"polling=on,one-core", PollConfig{On: true}, true},
	} {
		b.Run(c.name, func(b *testing.B) { pingPong8B(b, c.poll, c.oneCore) })
	}
}

func pingPong8B(b *testing.B, poll PollConfig, oneCore bool) {
	t := &testing.T{}
	p := newBenchPair(t, 8)
	if oneCore {
		p = newBenchPairOneCore(t, 8)
	}
	for _, v := range []*vm{p.a, p.b} {
		v.r.Call(func(r *Func) { r.SetPolling(poll) })
	}
	_, rbufA := p.a.regMR(2, 64, verbs.AccessLocalWrite)
	_, rbufB := p.b.regMR(2, 64, verbs.AccessLocalWrite)
	postRecv := func(v *vm, q qpRings, va uint64) {
		v.r.Call(func(*Func) {
			prod := binary.LittleEndian.Uint32(v.at(q.rq+128, 4))
			w := verbs.RecvWQE(v.at(q.rq+384+uint64(prod&15)<<7, 128))
			clear(w)
			w.SGE(0).Set(va, 64, 2<<8)
			w.SetNumSGE(1)
			w.SetLength(64)
			binary.LittleEndian.PutUint32(v.at(q.rq+128, 4), (prod+1)&15)
		})
	}
	rang := 0
	write := func(v *vm, q qpRings, qpn uint32, src, dst uint64) {
		if v.post(q, qpn, func(w verbs.SendWQE) {
			w.SetOpcode(verbs.WRWriteImm)
			w.SetImm(1)
			w.SetRemoteAddr(dst)
			w.SetRKey(p.dstKey)
			w.SGE(0).Set(src, 8, p.srcKey)
			w.SetNumSGE(1)
			w.SetLength(8)
		}) {
			rang++
		}
	}
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		postRecv(p.b, p.qb, rbufB)
		postRecv(p.a, p.qa, rbufA)
		write(p.a, p.qa, 16, p.srcVA, p.dstVA)
		if st := p.b.spinCQ(p.qb.rcq); st != verbs.WCSuccess {
			b.Fatalf("ping %v", st)
		}
		write(p.b, p.qb, 17, p.dstVA, p.srcVA)
		if st := p.a.spinCQ(p.qa.rcq); st != verbs.WCSuccess {
			b.Fatalf("pong %v", st)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(rang)/float64(2*b.N), "db/post")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	var starved uint64
	for _, v := range []*vm{p.a, p.b} {
		v.r.Call(func(r *Func) { starved += r.Status()["verbs.poll_starved_off"] })
	}
	b.ReportMetric(float64(starved), "starved-offs")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
