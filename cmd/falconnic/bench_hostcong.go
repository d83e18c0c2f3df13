package main

import (
	"flag"
	"fmt"
	"time"

	"falconnic/falcon/sim"
	"falconnic/internal/svgplot"
)

func benchHostCong(fs *flag.FlagSet) func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
	senders := fs.Int("senders", 2, "sending hosts (one rack with the receiver)")
	qps := fs.Int("qps", 4, "QPs per sender")
	depth := fs.Int("depth", 4, "writes outstanding per QP (closed loop)")
	size := fs.Int("size", 64<<10, "bytes per write")
	factor := fs.Float64("factor", 0.5, "the receiver ULP's drain rate in the window, fraction of its link")
	slowAt := fs.Duration("slow-at", 2*time.Millisecond, "start of the slow window")
	slowFor := fs.Duration("slow-for", 2*time.Millisecond, "length of the slow window")
	after := fs.Duration("after", 2*time.Millisecond, "run time after the window")
	return func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
		if c.Quick {
			*slowAt, *slowFor, *after = 500*time.Microsecond, 500*time.Microsecond, 500*time.Microsecond
		}
		if *factor <= 0 || *factor >= 1 {
			return sim.Doc{}, nil, "", fmt.Errorf("%w: --factor must be in (0, 1)", errUsage)
		}
		p, err := sim.RunHostCong(sim.HostCongConfig{Common: c, Senders: *senders, QPs: *qps, Depth: *depth, Size: *size,
			Factor: *factor, SlowAt: *slowAt, SlowFor: *slowFor, After: *after, Smooth: 4})
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		doc := sim.Doc{Setup: map[string]any{
			"fabric": sim.DefaultFabric(1, *senders+1, 1, c.Seed), "senders": *senders, "qps": *qps, "depth": *depth,
			"size": *size, "slow_window": fmt.Sprintf("%v from %v, ULP drains at %.2f × link", *slowFor, *slowAt, *factor),
			"adapt":    "from the window's start until the receiver link rate (4-RTT mean) ≤ 1.1 × the drain rate",
			"recover":  "from the window's end until the receiver link rate (4-RTT mean) ≥ 0.9 × before",
			"firmware": c.FirmwareDesc, "seed": c.Seed,
		}, Points: []any{p}}
		adapt, recov := p.AdaptRTTs, p.RecoverRTTs
		doc.Goals = []sim.Goal{
			sim.NewGoal("hostcong adapt (RTTs)", adapt, "<=", 20),
			sim.NewGoal("hostcong recover (RTTs)", recov, "<=", 50),
			sim.NewGoal("hostcong RTO retransmissions", float64(p.RetxRTO), "<=", 0),
		}
		for i, v := range []float64{adapt, recov} {
			if v < 0 {
				doc.Goals[i].Met = false
			}
		}
		sr := svgplot.Series{Name: "receiver link (4-RTT mean)"}
		for i := range p.Series {
			var sum float64
			for j := max(0, i-3); j <= i; j++ {
				sum += p.Series[j]
			}
			sr.X = append(sr.X, float64(i+1)*p.BaseRTTUs/1e3)
			sr.Y = append(sr.Y, sum/float64(i-max(0, i-3)+1))
		}
		ch := svgplot.Chart{Title: "receiver link rate", XLabel: "time (ms)", YLabel: "Gb/s",
			Series: []svgplot.Series{sr}, Refs: []svgplot.Ref{{Name: "drain rate", Y: p.DrainGbps}, {Name: "90 % of before", Y: 0.9 * p.PreGbps}}}
		return doc, []svgplot.Chart{ch}, fmt.Sprintf("hostcong: receiver ULP at %.0f %% from %v for %v", *factor*100, *slowAt, *slowFor), nil
	}
}
