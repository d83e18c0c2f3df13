package link

import (
	"testing"
	"time"

	"falconnic/internal/clock"
)

// BenchmarkMemSendPoll measures a steady stream of 4 KiB packets through an
// impaired in-memory link: one Send and one delivery per op.
func BenchmarkMemSendPoll(b *testing.B) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: 2 * time.Microsecond, RateBitsPerSec: 100e9, DropProb: 0.001, ReorderProb: 0.001, Seed: 1})
	pkt := make([]byte, 4096)
	delivered := 0
	rx := func([]byte, uint32) { delivered++ }
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Send(pkt, uint32(i))
		clk.Advance(400 * time.Nanosecond)
		m.Poll(rx)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}
