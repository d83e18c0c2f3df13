package main

import (
	"flag"
	"fmt"

	"falconnic/falcon/sim"
	"falconnic/internal/svgplot"
)

func benchLatency(fs *flag.FlagSet) func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
	sizes := fs.String("sizes", "64,256,1024,4096,16384,65536,262144,1048576", "comma-separated write sizes in bytes")
	ops := fs.Int("ops", 200, "writes per size, one at a time")
	return func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
		if c.Quick {
			*sizes, *ops = "64,4096,65536", 20
		}
		sz, err := intList(*sizes)
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		pts, err := sim.RunLatency(sim.LatencyConfig{Common: c, Sizes: sz, Ops: *ops})
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		doc := sim.Doc{Setup: map[string]any{
			"fabric": sim.DefaultFabric(2, 1, 4, c.Seed), "path": "host → leaf → spine → leaf → host",
			"ops": *ops, "loop": "closed, one write outstanding",
			"firmware": c.FirmwareDesc,
			"ideal":    "base RTT of the first packet + serialization of the rest at the host rate",
			"seed":     c.Seed,
		}, Points: points(pts)}
		var x, r50, r99, l50, lid []float64
		for _, p := range pts {
			tag := fmt.Sprintf("latency %dB", p.Size)
			doc.Goals = append(doc.Goals,
				sim.NewGoal(tag+" p50/ideal", p.P50Ideal, "<=", 1.05),
				sim.NewGoal(tag+" p99/ideal", p.P99Ideal, "<=", 1.05))
			x = append(x, float64(p.Size))
			r50, r99 = append(r50, p.P50Ideal), append(r99, p.P99Ideal)
			l50, lid = append(l50, p.P50Us), append(lid, p.IdealUs)
		}
		charts := []svgplot.Chart{
			{Title: "unloaded latency over ideal", XLabel: "write size (bytes)", YLabel: "latency / ideal", LogX: true,
				Series: []svgplot.Series{{Name: "p50", X: x, Y: r50}, {Name: "p99", X: x, Y: r99}}, Refs: []svgplot.Ref{{Name: "target 1.05", Y: 1.05}}},
			{Title: "unloaded latency", XLabel: "write size (bytes)", YLabel: "µs", LogX: true, LogY: true,
				Series: []svgplot.Series{{Name: "p50", X: x, Y: l50}, {Name: "ideal", X: x, Y: lid}}},
		}
		return doc, charts, "latency: one QP across two racks, unloaded, " + c.Firmware + " firmware", nil
	}
}
