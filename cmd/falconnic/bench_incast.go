package main

import (
	"flag"
	"fmt"
	"math"
	"time"

	"falconnic/falcon/sim"
	"falconnic/internal/svgplot"
)

func benchIncast(fs *flag.FlagSet) func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
	senders := fs.Int("senders", 5, "sending hosts (one rack with the receiver)")
	qps := fs.String("qps", "1,10,100,1000", "comma-separated QPs per sender, one point each")
	size := fs.Int("size", 1<<20, "bytes per write")
	window := fs.Duration("window", 0, "measurement window (0: 2.6 × the ideal op latency, at least 10 ms; --short-window beyond --max-window)")
	maxWindow := fs.Duration("max-window", 1200*time.Millisecond, "longest automatic window (the default judges every goal at 5 × 1000 QPs, whose ideal op takes 419 ms: a few minutes of one core)")
	shortWindow := fs.Duration("short-window", 30*time.Millisecond, "window of points whose latency --max-window cannot judge (rate goals only)")
	return func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
		if c.Quick {
			*qps, *size, *maxWindow = "1,10", 64<<10, 3*time.Millisecond
		}
		q, err := intList(*qps)
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		cfg := sim.IncastConfig{Common: c, Senders: *senders, QPs: q, Size: *size, Window: *window, MaxWindow: *maxWindow, ShortWindow: *shortWindow}
		if c.Quick {
			cfg.Window, cfg.Warmup = 2*time.Millisecond, 500*time.Microsecond
		}
		pts, err := sim.RunIncast(cfg)
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		doc := sim.Doc{Setup: map[string]any{
			"fabric": sim.DefaultFabric(1, *senders+1, 1, c.Seed), "senders": *senders, "size": *size,
			"firmware": c.FirmwareDesc,
			"loop":     "closed, one write outstanding per QP",
			"tables":   fmt.Sprintf("TX window and initiator table %d per connection", sim.IncastTable),
			"ideal":    "N·size/rate + base RTT, N = senders × QPs",
			"seed":     c.Seed,
		}, Points: points(pts)}
		var x, jain, util, p50, p99, rto []float64
		for _, p := range pts {
			tag := fmt.Sprintf("incast %dx%d", p.Senders, p.QPs)
			p99v := p.P99Ideal
			if p.LatencyUnknown {
				p99v = -1
			}
			doc.Goals = append(doc.Goals,
				sim.NewGoal(tag+" utilization", p.Utilization, ">=", 0.95),
				sim.NewGoal(tag+" jain", p.Jain, ">=", 0.99),
				sim.NewGoal(tag+" p99/ideal", p99v, "<=", 2.5),
				sim.NewGoal(tag+" rto_retx_pct", p.RTOPct, "<=", 0.1))
			if p99v < 0 {
				doc.Goals[len(doc.Goals)-2].Met = false
			}
			x = append(x, float64(p.QPs))
			jain, util = append(jain, p.Jain), append(util, p.Utilization)
			if p.LatencyUnknown { // not drawn: the window was too short
				p50, p99 = append(p50, math.NaN()), append(p99, math.NaN())
			} else {
				p50, p99 = append(p50, p.P50Ideal), append(p99, p.P99Ideal)
			}
			rto = append(rto, p.RTOPct)
		}
		xl := "QPs per sender"
		charts := []svgplot.Chart{
			{Title: "Jain fairness over QPs", XLabel: xl, YLabel: "Jain index", LogX: true,
				Series: []svgplot.Series{{Name: "jain", X: x, Y: jain}}, Refs: []svgplot.Ref{{Name: "target 0.99", Y: 0.99}}},
			{Title: "receiver link utilization", XLabel: xl, YLabel: "utilization", LogX: true,
				Series: []svgplot.Series{{Name: "utilization", X: x, Y: util}}, Refs: []svgplot.Ref{{Name: "target 0.95", Y: 0.95}}},
			{Title: "op latency over ideal", XLabel: xl, YLabel: "latency / ideal", LogX: true,
				Series: []svgplot.Series{{Name: "p50", X: x, Y: p50}, {Name: "p99", X: x, Y: p99}}, Refs: []svgplot.Ref{{Name: "p99 target 2.5", Y: 2.5}}},
			{Title: "RTO retransmissions", XLabel: xl, YLabel: "% of packets", LogX: true,
				Series: []svgplot.Series{{Name: "RTO retx %", X: x, Y: rto}}, Refs: []svgplot.Ref{{Name: "target 0.1 %", Y: 0.1}}},
		}
		return doc, charts, fmt.Sprintf("incast: %d senders, %d-byte writes, %s firmware", *senders, *size, c.Firmware), nil
	}
}
