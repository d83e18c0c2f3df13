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

// fixedRUE is the fixed-window firmware: one RUE per host.
func fixedRUE(int) rue.Engine {
	return firmware.NewFixed(firmware.FixedConfig{MinRTO: benchMinRTO})
}

// swiftRUE is the Swift firmware at its defaults (targets for the emulated
// fabric, see package firmware), one RUE per host.
func swiftRUE(int) rue.Engine {
	return firmware.NewSwift(firmware.SwiftConfig{MinRTO: benchMinRTO})
}

// parseSwift reads --swift: comma-separated key=value settings over
// Swift's defaults (base, hop, fs: durations; ai, beta, mdf, sub, min:
// numbers; level: the target rx-buffer level; plb, earlycuts (rtoonly,
// its former inverse): 0 or 1;
// reqalpha: the connections' request alpha scale, RM-8; delay: fabric,
// forward or reverse).
func parseSwift(s string) (firmware.SwiftConfig, error) {
	cfg := firmware.SwiftConfig{MinRTO: benchMinRTO}
	if s == "" {
		return cfg, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return cfg, fmt.Errorf("--swift %q: want key=value", kv)
		}
		var err error
		dur := func(d *time.Duration) { *d, err = time.ParseDuration(v) }
		num := func(f *float64) { *f, err = strconv.ParseFloat(v, 64) }
		switch k {
		case "base":
			dur(&cfg.BaseTarget)
		case "hop":
			dur(&cfg.PerHop)
		case "fs":
			dur(&cfg.FSRange)
		case "ai":
			num(&cfg.AI)
		case "beta":
			num(&cfg.Beta)
		case "mdf":
			num(&cfg.MaxMDF)
		case "sub":
			num(&cfg.SubOneGain)
		case "min":
			num(&cfg.MinFcwnd)
		case "level":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 8)
			cfg.TargetLevel = uint8(n)
		case "plb":
			cfg.PLB = v == "1"
		case "earlycuts": // 1: every early retransmission cuts; congested: those on a flow whose delay was above target
			cfg.EarlyRetxCuts, cfg.CongestedRetxCuts = v == "1", v == "congested"
		case "rtoonly": // the former name, inverted
			cfg.EarlyRetxCuts = v == "0"
		case "delay": // the delay signal: fabric (default), forward or reverse (synchronised clocks: the simulator's)
			switch v {
			case "fabric":
				cfg.Delay = firmware.DelayFabric
			case "forward":
				cfg.Delay = firmware.DelayForward
			case "reverse":
				cfg.Delay = firmware.DelayReverse
			default:
				err = fmt.Errorf("%q: fabric, forward or reverse", v)
			}
		case "reqalpha":
			num(&cfg.ReqAlpha)
		default:
			return cfg, fmt.Errorf("--swift: unknown setting %q", k)
		}
		if err != nil {
			return cfg, fmt.Errorf("--swift %s: %v", k, err)
		}
	}
	return cfg, nil
}

// benchFirmware is what --firmware selects: the engine per host and the
// setup's description.
var benchFirmware = map[string]struct {
	rue  func(int) rue.Engine
	init rue.Fixed
	desc string
}{
	"fixed": {fixedRUE, 32 * rue.One, "fixed window (fcwnd 32, ncwnd 64), min RTO " + benchMinRTO.String()},
	"swift": {swiftRUE, rue.One, "Swift (base target 7 µs + 2 µs/hop + ≤ 20 µs flow scaling, ncwnd to rx-buffer level 15), min RTO " + benchMinRTO.String()},
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
	fw := fs.String("firmware", "swift", "congestion control of every NIC: swift or fixed")
	swiftSet := fs.String("swift", "", "Swift settings over its defaults: base=7us,hop=2us,fs=20us,ai=1,beta=0.8,mdf=0.5,sub=0,min=0.01,level=15,plb=0,earlycuts=0 (1: every early retransmission cuts; congested: those on a flow whose delay was over 1.25 × target),reqalpha=0,delay=fabric")
	rackTLP := fs.Bool("rack-tlp", true, "RACK and tail-loss probes on every connection (false: RTO and early retransmission only)")
	ackPerConn := fs.Bool("ack-per-conn", false, "one ACK per coalescing round on the latest packet's label, not one per flow (the behaviour before per-flow ACKs)")
	gateInFlight := fs.Bool("gate-inflight", true, "fcwnd bounds the packets in flight (sent, neither acknowledged nor reported received past a hole), as Isekai's Gen3 does; false: the PSN distance from the window's base (Rev 0.9 §9.1.2)")
	ackHoles := fs.Bool("ack-holes", false, "with --rack-tlp, receivers acknowledge a packet beyond a hole, or filling one, at once")
	reroute := fs.Bool("reroute", true, "protective reroute: a flow whose packet times out moves to a new path")
	rerouteProbe := fs.Bool("reroute-probe", true, "protective reroute on RACK and tail-loss-probe retransmissions too")
	alpha := fs.Float64("alpha", 0, "dynamic threshold: a connection may hold at most alpha × the NIC's free Tx request packets (0: no limit)")
	initW := fs.Float64("init-fcwnd", 0, "initial fabric window of every connection (0: the firmware's choice — 1 for swift, 32 for fixed)")
	run := def(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	f, ok := benchFirmware[*fw]
	if !ok {
		return fmt.Errorf("%w: --firmware %q: want swift or fixed", errUsage, *fw)
	}
	var retarget func(time.Duration) func(int) rue.Engine
	if *fw == "swift" {
		cfg, err := parseSwift(*swiftSet)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if *swiftSet != "" {
			f.rue = func(int) rue.Engine { return firmware.NewSwift(cfg) }
			f.desc += " with " + *swiftSet
		}
		if cfg.BaseTarget == 0 { // --swift base= wins over a bench's own target
			retarget = func(base time.Duration) func(int) rue.Engine {
				c := cfg
				c.BaseTarget = base
				return func(int) rue.Engine { return firmware.NewSwift(c) }
			}
		}
	}
	init := f.init
	if *initW > 0 {
		init = rue.FixedFrom(*initW)
	}
	doc, charts, title, err := run(sim.Common{Seed: *seed, Quick: *quick, RUE: f.rue, Retarget: retarget, MinRTO: benchMinRTO,
		Firmware: *fw, FirmwareDesc: f.desc + ", initial fcwnd " + init.String(), InitFcwnd: init, RACKTLP: *rackTLP, AckHoles: *ackHoles, GateInFlight: *gateInFlight, AckPerConn: *ackPerConn, Reroute: *reroute, RerouteOnProbe: *rerouteProbe, Alpha: *alpha})
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
