package falcon

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
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
	p, err := NewPair(PairConfig{Conn: ConnConfig{SCID: 1, DCID: 2, Ordered: true, MaxTxns: 256,
		InitFcwnd: 128 << 10, InitNcwnd: 128}, ULPA: ua, ULPB: ub})
	if err != nil {
		b.Fatal(err)
	}
	ua.c = p.CA
	// Warm up: every ring slot and packet buffer gets allocated once.
	ua.total = 4096
	ua.fill()
	for ua.done < ua.total && p.Step() {
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
	for ua.done < ua.total && p.Step() {
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

var _ = wire.PSN(0)
