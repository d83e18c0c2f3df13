package litmus

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"falconnic/internal/clock"
)

// BenchmarkLock plays b.N guest rounds against a host goroutine on real
// hardware. xchg is the lock as written; guest-plain has the guest side
// store its entry words without a barrier, as TCG without CF_PARALLEL runs
// the guest's XCHG, while the host keeps XCHG: the control that shows the checks see store→load reordering when
// it happens. It reports violations and lost increments per million guest
// rounds (not asserted: they depend on how the two threads overlap).
func BenchmarkLock(b *testing.B) {
	for _, plain := range []bool{false, true} {
		name := "xchg"
		if plain {
			name = "guest-plain"
		}
		b.Run(name, func(b *testing.B) {
			p := newPage(b, uint64(b.N))
			deadline := clock.Real.Now() + 10*time.Minute
			var wg sync.WaitGroup
			var res [2]Result
			b.ResetTimer()
			for _, s := range []Side{Guest, Host} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					o := Options{Clock: clock.Real, Deadline: deadline}
					if s == Guest {
						o.Rounds, o.Plain = uint64(b.N), plain
					}
					var err error
					if res[s], err = Play(p, s, o); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			perM := 1e6 / float64(b.N)
			b.ReportMetric(float64(res[Guest].Violations+res[Host].Violations)*perM, "violations/Mround")
			b.ReportMetric(float64(res[Guest].Rounds+res[Host].Rounds-p.Counter())*perM, "lost/Mround")
		})
	}
}
