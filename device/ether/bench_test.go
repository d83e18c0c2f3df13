package ether

import (
	"testing"

	"golang.org/x/sys/unix"

	"falconnic/device/ether/ethertest"
	"falconnic/device/l2"
	"falconnic/vhostuser/vhostusertest"
)

// benchPipe drives guest A's TX ring and guest B's RX ring from one
// goroutine (the "guests"), with NIC A's uplink = NIC B: the Ethernet
// datapath guest A TX → NIC A → NIC B → guest B RX, one op per frame.
type benchPipe struct {
	ga, gb     *ethertest.Guest
	a, b       *NIC
	frame      []byte
	sent, recv int
}

// window bounds frames in flight below B's posted RX buffers and the
// NIC's RX queue, so the pipe runs without drops.
const benchWindow = 192

func newBenchPipe(b *testing.B, size int) *benchPipe {
	p := &benchPipe{a: newTestNIC(b, "a", macA, 1), b: newTestNIC(b, "b", macB, 1)}
	p.a.SetUplink(p.b)
	// A Linux guest acks everything offered and honours EVENT_IDX.
	all := p.a.dev.Features()
	p.ga, p.gb = attach(b, p.a, all), attach(b, p.b, all)
	for _, q := range append(p.ga.Qs, p.gb.Qs...) {
		q.EventIdx = true
	}
	p.frame = ethFrame(macB, macA, 0x0800, string(make([]byte, size-l2.HeaderLen)))
	p.gb.PostRX(0, testRingSize)
	return p
}

// step moves frames forward; it reports whether anything progressed.
func (p *benchPipe) step(limit int) bool {
	progressed := false
	posted := false
	for p.sent < limit && p.sent-p.recv < benchWindow && p.ga.Post(0, p.frame) {
		p.sent++
		posted = true
	}
	if posted {
		p.ga.Qs[1].PublishKick()
		progressed = true
	}
	rx := p.gb.Qs[0]
	got := 0
	for {
		u, ok := rx.PopUsed()
		if !ok {
			break
		}
		got++
		rx.Add([]vhostusertest.Seg{{GPA: rx.BufGPAOf(u.ID), Len: p.gb.RxLen, Write: true}})
	}
	if got > 0 {
		p.recv += got
		rx.PublishKick()
		progressed = true
	}
	return progressed
}

func (p *benchPipe) run(b *testing.B, n int) {
	limit := p.sent + n
	for p.recv < limit {
		if !p.step(limit) {
			if d := p.drops(); d != 0 {
				b.Fatalf("drops in the pipe: %d (%v %v)", d, p.a.Counters().Set().NonZero(), p.b.Counters().Set().NonZero())
			}
			// Sleep until NIC B signals guest B's RX ring (or 1 ms),
			// asking for that interrupt first.
			p.gb.Qs[0].EnableCallback()
			if p.step(limit) {
				continue
			}
			fds := []unix.PollFd{{Fd: int32(p.gb.Qs[0].CallFD), Events: unix.POLLIN}}
			unix.Poll(fds, 1)
			p.gb.Qs[0].Calls()
		}
	}
}

func (p *benchPipe) drops() uint64 {
	c := p.b.Counters()
	return c.RxQueueFull.Load() + c.RxNoPoolBuf.Load() + c.RxChainTooSmall.Load() + c.RxTooManyBufs.Load()
}

func benchEthernet(b *testing.B, size int) {
	p := newBenchPipe(b, size)
	p.run(b, 4*testRingSize) // warm up: every descriptor and buffer used once
	b.ReportAllocs()
	b.SetBytes(int64(size))
	kicks0 := p.a.VhostCounters().Kicks.Load() + p.b.VhostCounters().Kicks.Load()
	calls0 := p.a.VhostCounters().Calls.Load() + p.b.VhostCounters().Calls.Load()
	b.ResetTimer()
	p.run(b, b.N)
	b.StopTimer()
	kicks := p.a.VhostCounters().Kicks.Load() + p.b.VhostCounters().Kicks.Load() - kicks0
	calls := p.a.VhostCounters().Calls.Load() + p.b.VhostCounters().Calls.Load() - calls0
	b.ReportMetric(float64(kicks)/float64(b.N), "kicks/frame")
	b.ReportMetric(float64(calls)/float64(b.N), "calls/frame")
	secs := b.Elapsed().Seconds()
	if secs > 0 {
		b.ReportMetric(float64(b.N)/secs, "frames/s")
		b.ReportMetric(float64(b.N)*float64(size)*8/secs/1e9, "Gb/s")
	}
}

// BenchmarkEthernet64 measures 64-byte frames between two NICs.
func BenchmarkEthernet64(b *testing.B) { benchEthernet(b, 64) }

// BenchmarkEthernet1500 measures 1500-byte frames between two NICs.
func BenchmarkEthernet1500(b *testing.B) { benchEthernet(b, 1500) }
