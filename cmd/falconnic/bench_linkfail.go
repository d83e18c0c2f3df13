package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/sim"
	"falconnic/internal/svgplot"
)

func benchLinkFail(fs *flag.FlagSet) func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
	hosts := fs.Int("hosts", 4, "hosts per rack (two racks)")
	spines := fs.Int("spines", 4, "spine switches")
	qps := fs.Int("qps", 4, "connections per host to its partner")
	load := fs.Float64("load", 0.6, "offered load per host, fraction of its link")
	size := fs.Int("size", 64<<10, "bytes per write (Poisson arrivals)")
	flows := fs.String("flows", "1,4", "flows per connection, one point each")
	modes := fs.String("modes", "blackhole,withdrawn,flap", "failure variants: blackhole (still hashed), withdrawn (out of ECMP after 1 ms), flap (blackhole 0.5 ms down / 0.5 ms up × 5)")
	failAt := fs.Duration("fail-at", 20*time.Millisecond, "when the leaf 0 – spine 0 link fails")
	end := fs.Duration("end", 40*time.Millisecond, "simulated run length")
	policy := fs.String("policy", "max-open", "path policy over a connection's flows: round-robin, weighted, max-open")
	bin := fs.Duration("bin", 100*time.Microsecond, "goodput sampling bin")
	return func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
		if c.Quick {
			*hosts, *spines, *qps, *flows, *modes = 2, 2, 2, "4", "blackhole,withdrawn"
			*failAt, *end = 2*time.Millisecond, 5*time.Millisecond
		}
		pol, ok := falcon.ParsePathPolicy(*policy)
		if !ok {
			return sim.Doc{}, nil, "", fmt.Errorf("%w: policy %q (round-robin, weighted, max-open)", errUsage, *policy)
		}
		c.Policy = pol
		fl, err := intList(*flows)
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		var ms []string
		for _, m := range strings.Split(*modes, ",") {
			m = strings.TrimSpace(m)
			if m != "blackhole" && m != "withdrawn" && m != "flap" {
				return sim.Doc{}, nil, "", fmt.Errorf("%w: mode %q", errUsage, m)
			}
			ms = append(ms, m)
		}
		if *end <= *failAt || *bin <= 0 {
			return sim.Doc{}, nil, "", fmt.Errorf("%w: --end must follow --fail-at", errUsage)
		}
		pts, err := sim.RunLinkFail(sim.LinkFailConfig{Common: c, Hosts: *hosts, Spines: *spines, QPs: *qps, Load: *load,
			Size: *size, Flows: fl, Modes: ms, FailAt: *failAt, End: *end, Bin: *bin, Smooth: 5})
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		doc := sim.Doc{Setup: map[string]any{
			"fabric": sim.DefaultFabric(2, *hosts, *spines, c.Seed), "traffic": "permutation rack to rack, Poisson writes",
			"load": *load, "size": *size, "qps_per_host": *qps, "fail": "leaf 0 – spine 0, both directions, at " + failAt.String(),
			"recovery":     "from the failure until the goodput averaged over the last 5 bins is back at 90 % of the pre-failure mean (recover_90pct_us: the trailing average holds a dip for 5 bins, so it reads ≥ 500 µs whatever the transport does)",
			"recovery_fwd": "the goal's figure: from the failure to the end of the first bin, after the first bin below 90 % of the pre-failure mean, that is back at 90 % and from which the next 5 bins average 90 % too (recover_90pct_fwd_us)",
			"stalled":      "connections with operations waiting and no transaction completed in the last quarter of the run",
			"firmware":     c.FirmwareDesc + "; retransmissions keep their flow",
			"policy":       *policy,
			"reroute":      c.Reroute,
			"end":          end.String(),
			"seed":         c.Seed,
		}, Points: points(pts)}
		for _, p := range pts {
			if p.Flows != 4 {
				continue
			}
			tag := fmt.Sprintf("linkfail %s 4 flows", p.Mode)
			doc.Goals = append(doc.Goals,
				sim.NewGoal(tag+" stalled connections", float64(p.Stalled), "<=", 0),
				sim.NewGoal(tag+" recover 90% (µs)", p.RecoverFwdUs, "<=", float64(2*c.MinRTO)/1e3))
			if p.RecoverFwdUs < 0 {
				doc.Goals[len(doc.Goals)-1].Met = false
			}
		}
		var charts []svgplot.Chart
		for _, f := range fl {
			ch := svgplot.Chart{Title: fmt.Sprintf("goodput, %d flow(s) per connection", f), XLabel: "time (ms)", YLabel: "Gb/s"}
			for _, p := range pts {
				if p.Flows != f {
					continue
				}
				sr := svgplot.Series{Name: p.Mode}
				for i, v := range p.Series {
					sr.X = append(sr.X, float64(i)*p.BinUs/1e3)
					sr.Y = append(sr.Y, v)
				}
				ch.Series = append(ch.Series, sr)
				if len(ch.Refs) == 0 {
					ch.Refs = []svgplot.Ref{{Name: "90 % of pre-failure", Y: 0.9 * p.PreGbps}}
				}
			}
			charts = append(charts, ch)
		}
		return doc, charts, fmt.Sprintf("linkfail: permutation at %.0f %% load, leaf–spine link down at %v", *load*100, *failAt), nil
	}
}
