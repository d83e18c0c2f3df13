package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"falconnic/falcon"
)

// benchmarks maps `falconnic bench NAME` to its runner. Each prints JSON.
var benchmarks = map[string]struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}{
	"loss":    {"push goodput under random loss: selective repeat (+RACK/TLP) vs Go-Back-N, simulated time", benchLoss},
	"latency": {"unloaded write latency p50/p99 over the ideal, 64 B … 1 MiB, across two racks", simRunner("latency", benchLatency)},
	"incast":  {"S senders × Q QPs writing to one receiver: utilization, Jain, p50/p99 over ideal, RTOs", simRunner("incast", benchIncast)},
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
	return b.run(ctx, args[1:], stdout, stderr)
}

func benchLoss(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench loss", flag.ContinueOnError)
	fs.SetOutput(stderr)
	losses := fs.String("loss", "0,1,5", "comma-separated loss percentages (each direction)")
	txns := fs.Int("txns", 20000, "pushes per run")
	size := fs.Int("size", 4096, "bytes per push (≤ 4096)")
	delay := fs.Duration("delay", 5*time.Microsecond, "one-way propagation delay")
	rate := fs.Float64("gbps", 100, "link rate in Gb/s")
	seed := fs.Int64("seed", 1, "impairment seed")
	rack := fs.Bool("rack-tlp", true, "turn on RACK and TLP for the selective-repeat runs")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	cfg := falcon.LossBenchConfig{
		Transactions: *txns, Size: *size, Delay: *delay,
		RateBps: uint64(*rate * 1e9), Seed: *seed, RACKTLP: *rack,
	}
	for _, f := range strings.Split(*losses, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || p < 0 || p >= 100 {
			return fmt.Errorf("%w: bad loss percentage %q", errUsage, f)
		}
		cfg.Losses = append(cfg.Losses, p/100)
	}
	if *txns <= 0 || *size <= 0 || *rate <= 0 || *delay < 0 {
		return fmt.Errorf("%w: txns, size and gbps must be positive", errUsage)
	}
	res, err := falcon.RunLossBench(cfg)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
