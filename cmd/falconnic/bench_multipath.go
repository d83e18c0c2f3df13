package main

import (
	"flag"
	"fmt"
	"time"

	"falconnic/falcon/sim"
	"falconnic/internal/svgplot"
)

func benchMultipath(fs *flag.FlagSet) func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
	hosts := fs.Int("hosts", 4, "hosts per rack (rack 0 writes to rack 1)")
	spines := fs.Int("spines", 4, "spine switches")
	loads := fs.String("loads", "0.3,0.5,0.7,0.9", "offered loads (fraction of each sender's link)")
	flows := fs.String("flows", "1,4", "flows per connection")
	size := fs.Int("size", 128<<10, "bytes per write")
	warmup := fs.Duration("warmup", 2*time.Millisecond, "time before measuring")
	run := fs.Duration("run", 20*time.Millisecond, "measured time (arrivals stop at its end)")
	policy := fs.String("policy", "round-robin", "path policy over a connection's flows (round-robin; weighted and max-open are not built yet)")
	bg := fs.Float64("background", 0, "open-loop non-Falcon load on every leaf 0 → spine link (fraction of its rate)")
	return func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
		if c.Quick {
			*hosts, *spines, *loads, *warmup, *run = 2, 2, "0.9", 500*time.Microsecond, 3*time.Millisecond
		}
		if *policy != "round-robin" {
			return sim.Doc{}, nil, "", fmt.Errorf("%w: policy %q is not built (only round-robin today)", errUsage, *policy)
		}
		ld, err := floatList(*loads)
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		fl, err := intList(*flows)
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		pts, err := sim.RunMultipath(sim.MultipathConfig{Common: c, Hosts: *hosts, Spines: *spines, Loads: ld, Flows: fl,
			Size: *size, Warmup: *warmup, Run: *run, Background: *bg})
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		doc := sim.Doc{Setup: map[string]any{
			"fabric": sim.DefaultFabric(2, *hosts, *spines, c.Seed), "traffic": "rack 0 → rack 1, Poisson writes, one connection per host pair",
			"size": *size, "warmup": warmup.String(), "run": run.String(), "background": *bg,
			"policy":   "round robin over flows (the only policy today; weighted and max-open come with the control loops)",
			"latency":  "arrival to completion; operations still running at the end count with their age",
			"firmware": c.FirmwareDesc, "seed": c.Seed,
		}, Points: points(pts)}
		top := 0.0
		for _, l := range ld {
			top = max(top, l)
		}
		var p99one, p99four float64
		for _, p := range pts {
			if p.Load != top {
				continue
			}
			switch p.Flows {
			case 4:
				doc.Goals = append(doc.Goals, sim.NewGoal(fmt.Sprintf("multipath load %g 4 flows carried/offered (%s)", top, p.Policy), p.Carried, ">=", 0.97))
				p99four = p.P99Us
			case 1:
				p99one = p.P99Us
			}
		}
		if p99one > 0 && p99four > 0 {
			doc.Goals = append(doc.Goals, sim.NewGoal(fmt.Sprintf("multipath load %g p99 1 flow / p99 4 flows", top), p99one/p99four, ">=", 10))
		}
		var charts []svgplot.Chart
		carried := svgplot.Chart{Title: "carried load", XLabel: "offered load", YLabel: "carried / offered", Refs: []svgplot.Ref{{Name: "target 0.97", Y: 0.97}}}
		p99 := svgplot.Chart{Title: "p99 write latency", XLabel: "offered load", YLabel: "µs", LogY: true}
		p50 := svgplot.Chart{Title: "p50 write latency", XLabel: "offered load", YLabel: "µs", LogY: true}
		for _, f := range fl {
			name := fmt.Sprintf("%d flow(s)", f)
			a, b, d := svgplot.Series{Name: name}, svgplot.Series{Name: name}, svgplot.Series{Name: name}
			for _, p := range pts {
				if p.Flows == f {
					a.X, a.Y = append(a.X, p.Load), append(a.Y, p.Carried)
					b.X, b.Y = append(b.X, p.Load), append(b.Y, p.P99Us)
					d.X, d.Y = append(d.X, p.Load), append(d.Y, p.P50Us)
				}
			}
			carried.Series, p99.Series, p50.Series = append(carried.Series, a), append(p99.Series, b), append(p50.Series, d)
		}
		charts = append(charts, carried, p99, p50)
		return doc, charts, fmt.Sprintf("multipath: rack to rack over %d spines, %d-byte writes, round robin", *spines, *size), nil
	}
}
