package main

import (
	"context"
	"fmt"
	"io"
	"sort"
)

// benchmarks maps `falconnic bench NAME` to its runner. Each prints JSON.
// benchmark is one `falconnic bench NAME`: a line of summary and its run.
type benchmark struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var benchmarks = map[string]benchmark{
	"loss":      {"8 KiB pushes and pulls under drop and reordering: RACK-TLP, OOO-distance only, Go-Back-N", simRunner("loss", benchLoss)},
	"latency":   {"unloaded write latency p50/p99 over the ideal, 64 B … 1 MiB, across two racks", simRunner("latency", benchLatency)},
	"linkfail":  {"permutation traffic at 60 % load, one leaf–spine link fails (blackhole, withdrawn, flap): recovery time, stalled connections", simRunner("linkfail", benchLinkFail)},
	"multipath": {"Poisson 128 KiB writes rack to rack at load 0.3–0.9, 1 vs 4 flows: carried load, p50/p99 latency", simRunner("multipath", benchMultipath)},
	"hostcong":  {"a receiver whose ULP drains at half rate for a window: time to adapt and recover in RTTs, RTOs", simRunner("hostcong", benchHostCong)},
	"incast":    {"S senders × Q QPs writing to one receiver: utilization, Jain, p50/p99 over ideal, RTOs", simRunner("incast", benchIncast)},
}

// simRunner adapts a fabric bench to the benchmarks table.
func simRunner(name string, b simBench) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		return runSimBench(name, b, args, stdout, stderr)
	}
}

func init() {
	register("bench", "run a benchmark and print JSON (falconnic bench NAME -h)", runBench)
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdout, "usage: falconnic bench NAME [FLAGS]")
		names := make([]string, 0, len(benchmarks))
		for n := range benchmarks {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(stdout, "  %-10s %s\n", n, benchmarks[n].summary)
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown benchmark %q (falconnic bench -h lists them)", errUsage, args[0])
	}
	if vmPlotBenches[args[0]] {
		rest, plot, err := takePlotFlag(args[1:])
		if err != nil {
			return err
		}
		if plot != "" {
			return runWithPlot(ctx, b, rest, plot, stdout, stderr)
		}
	}
	return b.run(ctx, args[1:], stdout, stderr)
}
