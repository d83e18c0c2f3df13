package fabric

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"falconnic/psp"
)

// benchSizes are the Falcon packet sizes the fabric benchmark sends: an
// ACK-sized packet, a 1 KiB push and a full Falcon MTU (falcon.Config's
// default, 4096 + 256).
var benchSizes = []int{64, 1024, 4096 + 256}

// benchBurst is how many packets the sending side hands over per burst
// (what a port's endpoint sends while it handles one burst of work).
const benchBurst = 32

// benchWindow bounds the datagrams in flight, so the receiver's socket
// buffer never overflows on loopback.
const benchWindow = 256

// BenchmarkFabricDatagrams pushes Falcon packets from one fabric port to
// another over loopback, sealed with PSP as a secure daemon's connections
// are (sealLink's Seal on the sender, RxSA.Open in place on the receiver)
// or plaintext (an insecure fabric). One op is one datagram sent and
// received; the metrics are datagrams per second of wall time, and the
// process's CPU time (user + system, both fabrics and both sides) per
// datagram and its inverse, datagrams per CPU-second (per core).
func BenchmarkFabricDatagrams(b *testing.B) { benchFabricSizes(b, Options{}) }

// BenchmarkFabricDatagramsNoOffload is BenchmarkFabricDatagrams with UDP
// GSO and GRO off: sendmmsg and recvmmsg batches of single datagrams.
func BenchmarkFabricDatagramsNoOffload(b *testing.B) { benchFabricSizes(b, Options{NoOffload: true}) }

// BenchmarkFabricDatagramsPaths2 is BenchmarkFabricDatagrams over two
// paths: two sockets and read goroutines per fabric port, the packets
// alternating between them.
func BenchmarkFabricDatagramsPaths2(b *testing.B) { benchFabricSizes(b, Options{Paths: 2}) }

func benchFabricSizes(b *testing.B, opts Options) {
	for _, sealed := range []bool{false, true} {
		for _, size := range benchSizes {
			name := fmt.Sprintf("insecure/%dB", size)
			if sealed {
				name = fmt.Sprintf("sealed/%dB", size)
			}
			b.Run(name, func(b *testing.B) { benchFabric(b, opts, size, sealed) })
		}
	}
}

// benchRig is two fabric ports on loopback, a sender and a receiver.
type benchRig struct {
	tx, rx   *Fabric
	got      atomic.Int64
	lost     atomic.Int64
	progress chan struct{}
}

func newBenchRig(b *testing.B, opts Options, recv func(payload []byte)) *benchRig {
	b.Helper()
	r := &benchRig{progress: make(chan struct{}, 1)}
	var err error
	quiet := opts
	quiet.Listen, quiet.Logger = loopback, discardLogger()
	if r.tx, err = New(quiet); err != nil {
		b.Fatal(err)
	}
	if r.rx, err = New(quiet); err != nil {
		b.Fatal(err)
	}
	if err := r.tx.AddPeer(r.rx.LocalAddr()); err != nil {
		b.Fatal(err)
	}
	if err := r.rx.AddPeer(r.tx.LocalAddr()); err != nil {
		b.Fatal(err)
	}
	_ = r.rx.Handle(KindFalcon, ReceiverFunc(func(_ netip.AddrPort, _ uint32, payload []byte) {
		recv(payload)
		r.got.Add(1)
		select {
		case r.progress <- struct{}{}:
		default:
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for _, f := range []*Fabric{r.tx, r.rx} {
		go func() { _ = f.Run(ctx); done <- struct{}{} }()
	}
	b.Cleanup(func() {
		cancel()
		<-done
		<-done
	})
	return r
}

// wait blocks until at most benchWindow datagrams are in flight; a
// datagram that has not arrived 200 ms after the receiver last made
// progress is taken as lost (counted, reported).
func (r *benchRig) wait(sent int64) {
	for sent-r.got.Load()-r.lost.Load() >= benchWindow {
		select {
		case <-r.progress:
		case <-time.After(200 * time.Millisecond):
			r.lost.Add(sent - r.got.Load() - r.lost.Load())
		}
	}
}

func (r *benchRig) drain(sent int64) {
	for r.got.Load()+r.lost.Load() < sent {
		select {
		case <-r.progress:
		case <-time.After(200 * time.Millisecond):
			r.lost.Add(sent - r.got.Load() - r.lost.Load())
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchFabric(b *testing.B, opts Options, size int, sealed bool) {
	pkt := make([]byte, size)
	binary.BigEndian.PutUint32(pkt, 1<<28|7) // a Falcon packet's first word: CID 7
	for i := 4; i < size; i++ {
		pkt[i] = byte(i)
	}
	var (
		tx   *psp.TxSA
		rxSA *psp.RxSA
	)
	if sealed {
		keys, err := psp.NewMasterKeys([psp.MasterKeyLen]byte{1, 2, 3})
		if err != nil {
			b.Fatal(err)
		}
		spi := keys.NewSPI(7)
		if rxSA, err = psp.NewRxSA(keys, psp.AESGCM128, spi, nil); err != nil {
			b.Fatal(err)
		}
		key, _, err := keys.Derive(nil, spi, psp.AESGCM128)
		if err != nil {
			b.Fatal(err)
		}
		if tx, err = psp.NewTxSA(psp.AESGCM128, spi, key, nil); err != nil {
			b.Fatal(err)
		}
	}
	// The receiver does what a port does with a datagram: copies it to a
	// buffer of its own, and opens it there if sealed.
	own := make([]byte, 0, HeaderLen+MaxPayload)
	var badOpen atomic.Int64
	var mu sync.Mutex // with several paths, several read goroutines receive
	r := newBenchRig(b, opts, func(payload []byte) {
		if opts.Paths > 1 {
			mu.Lock()
			defer mu.Unlock()
		}
		d := append(own[:0], payload...)
		if rxSA != nil {
			if _, _, drop := rxSA.Open(d); drop != 0 {
				badOpen.Add(1)
			}
		}
	})
	s := newBenchSender(r.tx, r.rx.LocalAddr())
	sealBuf := make([]byte, 0, size+psp.Overhead)

	// One datagram first: both read loops are up, their buffers made.
	s.send(pkt, 0)
	s.flush()
	r.drain(1)
	r.got.Store(0)
	r.lost.Store(0)
	badOpen.Store(0) // the warm-up datagram was not sealed

	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	var sent int64
	for sent < int64(b.N) {
		r.wait(sent)
		n := min(int64(benchBurst), int64(b.N)-sent)
		for range n {
			out := pkt
			if tx != nil { // as the connection manager's sealLink does
				dst := s.reserve(size + psp.Overhead)
				if dst == nil {
					dst = sealBuf
				}
				var err error
				if out, err = tx.Seal(dst[:0], pkt, 1); err != nil {
					b.Fatal(err)
				}
			}
			s.send(out, uint32(sent))
			sent++
		}
		s.flush()
	}
	r.drain(sent)
	wall, cpu := time.Since(t0), cpuTime()-cpu0
	b.StopTimer()
	if badOpen.Load() != 0 {
		b.Fatalf("%d datagrams did not open", badOpen.Load())
	}
	got := r.got.Load()
	b.ReportMetric(float64(got)/wall.Seconds(), "dgrams/s")
	if got > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(got), "cpu-ns/dgram")
		b.ReportMetric(float64(got)/cpu.Seconds(), "dgrams/cpu-s")
	}
	b.ReportMetric(float64(r.lost.Load())/float64(sent), "lost/dgram")
}
