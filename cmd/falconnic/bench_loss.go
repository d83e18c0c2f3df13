package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"falconnic/falcon/sim"
	"falconnic/internal/svgplot"
)

func benchLoss(fs *flag.FlagSet) func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
	ops := fs.String("ops", "push,pull", "operation kinds")
	modes := fs.String("modes", "rack-tlp,ooo-distance,go-back-n", "recovery modes")
	drops := fs.String("drop", "0,0.1,0.5,1,2,5", "drop percentages (each direction), reorder 0")
	reorders := fs.String("reorder", "0.1,0.5,1,2,5", "reorder percentages (each direction; held back 10 µs), drop 0")
	count := fs.Int("count", 20000, "operations per point")
	size := fs.Int("size", 8192, "bytes per operation (one transaction)")
	delay := fs.Duration("delay", 5*time.Microsecond, "one-way propagation delay")
	gbps := fs.Float64("gbps", 100, "link rate in Gb/s")
	return func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error) {
		if c.Quick {
			*drops, *reorders, *count = "1,5", "1", 500
		}
		// Swift's default targets are the emulated fabric's (7 µs base:
		// 3 µs over an unloaded rack's 4 µs round trip, about nine 4 KiB
		// packets queued at 100 Gb/s); this link's round trip is
		// 2 × delay plus a packet's serialisation, so the base target
		// keeps the same headroom over it in packets (6 µs for 8 KiB
		// packets) — with less, Swift holds the window at the path's
		// bandwidth-delay product, and every packet lost and being
		// repaired leaves the link idle.
		target := ""
		if c.Retarget != nil {
			headroom := time.Duration(float64(3*time.Microsecond) * float64(*size) / 4096 * 100 / *gbps)
			base := 2**delay + time.Duration(float64(*size)*8/(*gbps)) + headroom
			c.RUE = c.Retarget(base)
			target = base.String()
		}
		cfg := sim.LossConfig{Common: c, Count: *count, Size: *size, Delay: *delay, RateBps: uint64(*gbps * 1e9)}
		for _, o := range strings.Split(*ops, ",") {
			switch strings.TrimSpace(o) {
			case "push":
				cfg.Ops = append(cfg.Ops, sim.Write)
			case "pull":
				cfg.Ops = append(cfg.Ops, sim.Read)
			default:
				return sim.Doc{}, nil, "", fmt.Errorf("%w: op %q (push, pull)", errUsage, o)
			}
		}
		for _, m := range strings.Split(*modes, ",") {
			r := sim.Recovery(strings.TrimSpace(m))
			if r != sim.RACKTLP && r != sim.OOOOnly && r != sim.GoBackN {
				return sim.Doc{}, nil, "", fmt.Errorf("%w: mode %q", errUsage, m)
			}
			cfg.Modes = append(cfg.Modes, r)
		}
		var err error
		if cfg.Drops, err = floatList(*drops); err != nil {
			return sim.Doc{}, nil, "", err
		}
		if cfg.Reorders, err = floatList(*reorders); err != nil {
			return sim.Doc{}, nil, "", err
		}
		if *count <= 0 || *size <= 0 || *gbps <= 0 {
			return sim.Doc{}, nil, "", fmt.Errorf("%w: count, size and gbps must be positive", errUsage)
		}
		pts, err := sim.RunLoss(cfg)
		if err != nil {
			return sim.Doc{}, nil, "", err
		}
		doc := sim.Doc{Setup: map[string]any{
			"link": map[string]any{"gbps": *gbps, "delay": delay.String(), "reorder_hold": "10µs"},
			"size": *size, "count": *count, "connection": "one, ordered, initiator table kept full",
			"ratio": "goodput over the same op and mode without impairment", "seed": c.Seed,
			"firmware": c.FirmwareDesc, "swift_base_target": target, "ack_holes": c.AckHoles, "gate_inflight": c.GateInFlight,
		}, Points: points(pts)}
		find := func(op string, m sim.Recovery, drop, reorder float64) (float64, bool) {
			for _, p := range pts {
				if p.Op == op && p.Mode == string(m) && p.DropPct == drop && p.ReorderPct == reorder {
					return p.Ratio, true
				}
			}
			return 0, false
		}
		maxDrop := 0.0
		for _, d := range cfg.Drops {
			maxDrop = max(maxDrop, d)
		}
		for _, o := range cfg.Ops {
			op := o.String()
			for _, g := range []struct {
				drop, reorder, target float64
			}{{1, 0, 0.95}, {5, 0, 0.9}, {0, 1, 0.9}} {
				if v, ok := find(op, sim.RACKTLP, g.drop, g.reorder); ok {
					doc.Goals = append(doc.Goals, sim.NewGoal(fmt.Sprintf("loss %s rack-tlp ratio drop %g%% reorder %g%%", op, g.drop, g.reorder), v, ">=", g.target))
				}
			}
			r, ok1 := find(op, sim.RACKTLP, maxDrop, 0)
			gb, ok2 := find(op, sim.GoBackN, maxDrop, 0)
			if ok1 && ok2 && maxDrop > 0 {
				doc.Goals = append(doc.Goals, sim.NewGoal(fmt.Sprintf("loss %s rack-tlp/go-back-n ratio at %g%% drop", op, maxDrop), r/max(gb, 1e-9), ">=", 1.2))
			}
		}
		var charts []svgplot.Chart
		for _, o := range cfg.Ops {
			for _, sweep := range []string{"drop", "reorder"} {
				ch := svgplot.Chart{Title: fmt.Sprintf("%s: goodput ratio vs %s", o, sweep), XLabel: sweep + " % (each direction)", YLabel: "goodput / unimpaired"}
				for _, m := range cfg.Modes {
					sr := svgplot.Series{Name: string(m)}
					for _, p := range pts {
						if p.Op != o.String() || p.Mode != string(m) {
							continue
						}
						x := p.DropPct
						if sweep == "reorder" {
							x = p.ReorderPct
						}
						if (sweep == "drop" && p.ReorderPct == 0) || (sweep == "reorder" && p.DropPct == 0) {
							sr.X, sr.Y = append(sr.X, x), append(sr.Y, p.Ratio)
						}
					}
					ch.Series = append(ch.Series, sr)
				}
				charts = append(charts, ch)
			}
		}
		return doc, charts, fmt.Sprintf("loss: %d-byte ops on one connection, %g Gb/s, %v one way", *size, *gbps, *delay), nil
	}
}
