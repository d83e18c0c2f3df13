package litmus

import "testing"

// BenchmarkLock plays b.N guest rounds against a host goroutine on real
// hardware. xchg is the lock as written; guest-plain has the guest side
// store its entry words without a barrier, as TCG without CF_PARALLEL runs
// the guest's XCHG, while the host keeps XCHG: the control that shows the
// checks see store→load reordering when it happens. It reports violations
// and lost increments per million guest rounds (not asserted: they depend
// on how the two threads overlap).
func BenchmarkLock(b *testing.B) { benchTest(b, Peterson) }

// BenchmarkStoreBuffering is BenchmarkLock for the store-buffering test:
// its violations are the rounds in which both sides loaded an old value.
func BenchmarkStoreBuffering(b *testing.B) { benchTest(b, StoreBuffering) }

func benchTest(b *testing.B, test Test) {
	for _, plain := range []bool{false, true} {
		name := "xchg"
		if plain {
			name = "guest-plain"
		}
		b.Run(name, func(b *testing.B) {
			p := newPage(b, uint64(b.N))
			b.ResetTimer()
			res := playBoth(b, p, test, uint64(b.N), plain, 0)
			b.StopTimer()
			perM := 1e6 / float64(b.N)
			b.ReportMetric(float64(res[Guest].Violations+res[Host].Violations)*perM, "violations/Mround")
			if test == Peterson {
				b.ReportMetric(float64(res[Guest].Rounds+res[Host].Rounds-p.Counter())*perM, "lost/Mround")
			}
		})
	}
}
