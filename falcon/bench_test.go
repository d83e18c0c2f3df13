package falcon

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// benchULP keeps an initiator busy with one kind of transaction and answers
// requests at once on the target side.
type benchULP struct {
	c         *Conn
	kind      tl.Kind
	payload   []byte
	issued    int
	done      int
	total     int
	errs      int
	pullReply []byte
}

func (u *benchULP) fill() {
	for u.c != nil && u.issued < u.total {
		var err error
		if u.kind == tl.Push {
			_, err = u.c.Push(0, u.payload)
		} else {
			_, err = u.c.Pull(0, len(u.pullReply))
		}
		if err != nil {
			return
		}
		u.issued++
	}
}

func (u *benchULP) OnRequest(c *Conn, r *Request) {
	if r.Kind == tl.Push {
		c.AckPush(r.RSN)
		return
	}
	c.PullData(r.RSN, u.pullReply[:r.Length])
}

func (u *benchULP) OnCompletion(c *Conn, cpl *Completion) {
	u.done++
	if cpl.Status != tl.CmplAck {
		u.errs++
	}
	u.fill()
}

func (u *benchULP) OnXon(c *Conn) { u.fill() }

func benchTxn(b *testing.B, kind tl.Kind, size int) {
	ua := &benchULP{kind: kind, payload: make([]byte, size), pullReply: make([]byte, size)}
	ub := &benchULP{pullReply: make([]byte, size)}
	p, err := NewPair(PairConfig{Conn: benchConn, ULPA: ua, ULPB: ub})
	if err != nil {
		b.Fatal(err)
	}
	ua.c = p.CA
	runBench(b, ua, size, p.Step)
}

// benchConn is the benchmarks' connection (A's view).
var benchConn = ConnConfig{SCID: 1, DCID: 2, Ordered: true, MaxTxns: 256, InitFcwnd: 128 << 10, InitNcwnd: 128}

// runBench warms the initiator ua up, then has it complete b.N
// transactions of size bytes, step moving the engines on until it reports
// nothing is pending, and reports the rates.
func runBench(b *testing.B, ua *benchULP, size int, step func() bool) {
	// Warm up: every ring slot and packet buffer gets allocated once.
	ua.total = 4096
	ua.fill()
	for ua.done < ua.total && step() {
	}
	ua.issued, ua.done, ua.total = 0, 0, b.N
	b.ReportAllocs()
	// The engines run on this goroutine alone: pinned to its thread, the
	// thread's CPU time is the work's, whatever else loads the host.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	b.ResetTimer()
	ua.fill()
	for ua.done < ua.total && step() {
	}
	b.StopTimer()
	cpu := threadCPU(b) - cpu0
	if ua.done != b.N || ua.errs != 0 {
		b.Fatalf("completed %d of %d (%d errors)", ua.done, b.N, ua.errs)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "txn/s")
	b.ReportMetric(float64(b.N)*float64(size)*8/sec/1e9, "Gb/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "txn/cpu-s")
}

// directLink joins two endpoints as a daemon's port link joins two ports:
// in process (so the endpoint computes no ICV) and in order, with no
// delay, queue model or lock. Frames are copied into reused buffers.
type directLink struct {
	q, free [][]byte
}

func (l *directLink) Send(pkt []byte, _ uint32) {
	var b []byte
	if n := len(l.free); n > 0 {
		b, l.free = l.free[n-1], l.free[:n-1]
	}
	l.q = append(l.q, append(b[:0], pkt...))
}

func (*directLink) InProcess() {}

// deliver hands ep every frame queued, in one burst (as a port hands it a
// poll's frames), and reports how many there were. Only the other
// endpoint sends on l, so nothing joins the queue meanwhile.
func (l *directLink) deliver(ep *Endpoint) int {
	ep.BeginBurst()
	defer ep.EndBurst()
	for _, f := range l.q {
		ep.ReceiveInProcess(f, 0)
	}
	n := len(l.q)
	l.free = append(l.free, l.q...)
	clear(l.q)
	l.q = l.q[:0]
	return n
}

// benchDirect is benchTxn with the engines joined by directLinks: what the
// endpoints alone cost per transaction, without the in-memory link's model
// of a wire (its delivery heap, impairment draws and lock) or the ICV.
func benchDirect(b *testing.B, kind tl.Kind, size int) {
	clk := clock.NewManual(0)
	ab, ba := &directLink{}, &directLink{}
	ua := &benchULP{kind: kind, payload: make([]byte, size), pullReply: make([]byte, size)}
	ub := &benchULP{pullReply: make([]byte, size)}
	A := New(Config{Clock: clk, Link: ab, ULP: ua})
	B := New(Config{Clock: clk, Link: ba, ULP: ub})
	var err error
	if ua.c, err = A.Connect(benchConn); err != nil {
		b.Fatal(err)
	}
	if _, err := B.Connect(Mirror(benchConn)); err != nil {
		b.Fatal(err)
	}
	runBench(b, ua, size, func() bool {
		n := ab.deliver(B) + ba.deliver(A)
		now := clk.Now()
		A.OnTimer(now)
		B.OnTimer(now)
		if n > 0 || len(ab.q)+len(ba.q) > 0 { // or a timer sent
			return true
		}
		next, ok := A.NextDeadline()
		if t, has := B.NextDeadline(); has && (!ok || t < next) {
			next, ok = t, true
		}
		if ok {
			clk.Set(max(next, now+1))
		}
		return ok
	})
}

// rusageThread is Linux's RUSAGE_THREAD (the syscall package does not
// name it): getrusage for the calling thread only.
const rusageThread = 1

// threadCPU returns the CPU time (user and system) the calling thread
// has used.
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPush8 and friends run two engines over the in-memory link with no
// impairments: transactions per second (of wall time, and of the
// benchmark thread's CPU time: per second on one core), goodput and
// allocations.
func BenchmarkPush8(b *testing.B)  { benchTxn(b, tl.Push, 8) }
func BenchmarkPull8(b *testing.B)  { benchTxn(b, tl.Pull, 8) }
func BenchmarkPush4K(b *testing.B) { benchTxn(b, tl.Push, 4096) }
func BenchmarkPull4K(b *testing.B) { benchTxn(b, tl.Pull, 4096) }

// BenchmarkPush8Direct and BenchmarkPull8Direct are the endpoints' own
// cost (benchDirect): two engines as two ports of one daemon run them.
func BenchmarkPush8Direct(b *testing.B) { benchDirect(b, tl.Push, 8) }
func BenchmarkPull8Direct(b *testing.B) { benchDirect(b, tl.Pull, 8) }

var _ = wire.PSN(0)
