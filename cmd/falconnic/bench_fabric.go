package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/sim"
	"falconnic/firmware"
	"falconnic/internal/svgplot"
)

// errGoalsUnmet is what --check returns when a goal is not met (exit 1).
var errGoalsUnmet = errors.New("bench: goals not met")

// benchMinRTO is the firmware's RTO floor in the benches (the fixed RUE's
// default), the unit of goals stated in RTOs.
const benchMinRTO = 250 * time.Microsecond

// fixedRUE is today's firmware: one fixed-window RUE per host.
func fixedRUE(int) rue.Engine {
	return firmware.NewFixed(firmware.FixedConfig{MinRTO: benchMinRTO})
}

// simBench is one fabric bench: it adds its flags to fs and returns the
// function that runs it with the common settings.
type simBench func(fs *flag.FlagSet) func(c sim.Common) (sim.Doc, []svgplot.Chart, string, error)

// runSimBench parses the common flags (--seed, --quick, --check, --plot)
// and the bench's own, runs it, prints its JSON document, writes the plot
// and enforces --check.
func runSimBench(name string, def simBench, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "seed of the fabric and the generators (same flags, same numbers)")
	quick := fs.Bool("quick", false, "small, fast run (CI smoke test)")
	check := fs.Bool("check", false, "exit 1 when a goal is not met")
	plot := fs.String("plot", "", "write the figure to this .svg file")
	run := def(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	doc, charts, title, err := run(sim.Common{Seed: *seed, Quick: *quick, RUE: fixedRUE, MinRTO: benchMinRTO})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	if *plot != "" {
		if err := os.WriteFile(*plot, svgplot.Render(title, charts, 2), 0o644); err != nil {
			return err
		}
	}
	if *check && !doc.AllMet() {
		for _, g := range doc.Goals {
			if !g.Met {
				fmt.Fprintf(stderr, "unmet: %s = %v (target %s %v)\n", g.Name, g.Value, g.Op, g.Target)
			}
		}
		return errGoalsUnmet
	}
	return nil
}

// intList parses "1,10,100".
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%w: bad count %q", errUsage, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// floatList parses "0,0.1,0.5".
func floatList(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: bad number %q", errUsage, f)
		}
		out = append(out, v)
	}
	return out, nil
}

func points[T any](p []T) []any {
	out := make([]any, len(p))
	for i := range p {
		out[i] = p[i]
	}
	return out
}
