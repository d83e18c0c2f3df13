package falcon

import (
	"testing"
)

// The loss benchmark completes every run; selective repeat needs fewer
// retransmissions than Go-Back-N under loss.
func TestLossBench(t *testing.T) {
	r, err := RunLossBench(LossBenchConfig{Losses: []float64{0, 0.05}, Transactions: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Points) != 4 {
		t.Fatalf("%d points, want 4", len(r.Points))
	}
	for _, p := range r.Points {
		t.Logf("%+v", p)
		if !p.Completed || p.Transactions != 2000 || p.GoodputGbps <= 0 {
			t.Errorf("run %+v did not complete", p)
		}
	}
	sr, gbn := r.Points[2], r.Points[3]
	if sr.Retransmissions >= gbn.Retransmissions {
		t.Errorf("5%% loss: selective repeat resent %d, Go-Back-N %d", sr.Retransmissions, gbn.Retransmissions)
	}
}

// BenchmarkLoss reports goodput (simulated) for each mode and loss rate.
func BenchmarkLoss(b *testing.B) {
	for i := 0; i < b.N; i++ {
		r, err := RunLossBench(LossBenchConfig{Transactions: 5000})
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			for _, p := range r.Points {
				b.Logf("%-16s loss=%.2f goodput=%.2f Gb/s retx=%d", p.Mode, p.Loss, p.GoodputGbps, p.Retransmissions)
			}
		}
	}
}
