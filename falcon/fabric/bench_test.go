package fabric

import (
	"testing"
	"time"

	"falconnic/internal/clock"
)

// BenchmarkFabricEvents drives 4 KiB packets between the racks of a
// 2 × 8 × 4 fabric and reports packet events per second of wall time.
func BenchmarkFabricEvents(b *testing.B) {
	clk := clock.NewManual(0)
	f := New(clk, Config{Racks: 2, HostsPerRack: 8, Spines: 4, HostDelay: 500 * time.Nanosecond,
		SpineDelay: time.Microsecond, Pipeline: 600 * time.Nanosecond, PortBytes: 512 << 10, PoolBytes: 8 << 20, Alpha: 8, Seed: 1})
	for h := 0; h < f.Hosts(); h++ {
		f.Attach(h, func([]byte, uint32, Meta) {})
	}
	pkt := make([]byte, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for h := 0; h < 16; h++ {
			f.Send(h, (h+8)%16, pkt, uint32(i))
		}
		clk.Advance(400 * time.Nanosecond)
		f.Poll()
	}
	for f.Pending() > 0 {
		t, _ := f.NextDue()
		clk.Set(t)
		f.Poll()
	}
	b.ReportMetric(float64(f.Events)/b.Elapsed().Seconds(), "events/s")
}
