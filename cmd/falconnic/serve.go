package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"

	"falconnic/device"
	"falconnic/device/fabric"
	"falconnic/internal/metrics"
	"falconnic/internal/stats"
)

func init() {
	register("serve", "run the device daemon: NICs, switch, fabric, control socket", serveCmd)
}

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	cfgPath := fl.String("config", "", "daemon config `FILE` (JSON; see device.Config)")
	level := fl.String("log-level", "info", "log level: debug, info, warn or error")
	loss := fl.Float64("loss", -1, "fabric egress loss `PCT` (overrides the config)")
	reorder := fl.Float64("reorder", -1, "fabric egress reorder `PCT` (overrides the config)")
	seed := fl.Uint64("seed", 0, "seed for --loss/--reorder (overrides the config when set)")
	metricsAddr := fl.String("metrics", "", "serve Prometheus metrics at http://`ADDR`/metrics (overrides the config's metrics.listen)")
	procs := fl.Int("procs", 0, "the daemon's GOMAXPROCS: `N` threads run Go code (0: the GOMAXPROCS environment variable if set, else 1; see maxServeProcs)")
	cpuProfile := fl.String("cpuprofile", "", "write a CPU profile of the daemon to `FILE` (from start until it stops)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: falconnic serve --config FILE [--log-level LEVEL] [--loss PCT] [--reorder PCT] [--seed N] [--metrics ADDR] [--procs N] [--cpuprofile FILE]")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *cfgPath == "" || fl.NArg() != 0 {
		fl.Usage()
		return fmt.Errorf("%w: serve needs --config FILE and no other arguments", errUsage)
	}
	if *procs < 0 || *procs > maxServeProcs {
		return fmt.Errorf("%w: --procs %d out of range 0..%d", errUsage, *procs, maxServeProcs)
	}
	if n := serveProcs(*procs, os.Getenv("GOMAXPROCS")); n > 0 { // restored on return: serve runs in process in tests
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(*level))); err != nil {
		return fmt.Errorf("%w: --log-level %q", errUsage, *level)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))

	cfg, err := device.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	overrides := *loss >= 0 || *reorder >= 0 || *seed != 0
	if overrides {
		if cfg.Fabric == nil {
			return fmt.Errorf("%w: --loss/--reorder/--seed need a fabric section in %s", errUsage, *cfgPath)
		}
		if *loss >= 0 {
			cfg.Fabric.LossPercent = *loss
		}
		if *reorder >= 0 {
			cfg.Fabric.ReorderPercent = *reorder
		}
		if *seed != 0 {
			cfg.Fabric.Seed = *seed
		}
		if err := (fabric.Impairment{LossPercent: cfg.Fabric.LossPercent, ReorderPercent: cfg.Fabric.ReorderPercent}).Validate(); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if *metricsAddr != "" {
		if cfg.Metrics == nil {
			cfg.Metrics = &device.MetricsSpec{}
		}
		cfg.Metrics.Listen = *metricsAddr
		if cfg.Metrics.TopConns == 0 {
			cfg.Metrics.TopConns = device.DefaultTopConns
		}
	}
	var ln net.Listener
	if cfg.Metrics != nil {
		if ln, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		defer ln.Close()
	}
	d, err := device.NewDaemon(cfg, device.DaemonOptions{Logger: log})
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	return runDaemon(ctx, d, ln, cfg, log)
}

// runDaemon runs d and, when the config asks, its Prometheus endpoint
// beside it (until ctx is done or the daemon stops).
func runDaemon(ctx context.Context, d *device.Daemon, ln net.Listener, cfg *device.Config, log *slog.Logger) error {
	if ln == nil {
		return d.Run(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	top := cfg.Metrics.TopConns
	done := make(chan error, 1)
	go func() {
		done <- metrics.Serve(ctx, ln, func() []stats.Table { return d.CounterTables(top) })
	}()
	log.Info("metrics serving", "addr", ln.Addr().String())
	err := d.Run(ctx)
	cancel()
	if merr := <-done; merr != nil && err == nil {
		err = fmt.Errorf("metrics: %w", merr)
	}
	return err
}

// maxServeProcs bounds serve --procs. The default is one thread: every
// hand-off between the daemon's goroutines (a guest's kick to its NIC's
// port, a completion back to a virtqueue) is then a goroutine switch
// instead of a futex wake of another thread, and the host's other cores
// stay with the guests' vCPUs. Between two TCG guests on a 2-core host
// that made ib_write_bw 16-58 % faster at 11-20 % less daemon CPU per MiB
// and ib_send_lat 21 % shorter (README, "RDMA between two guests"). A
// daemon serving many busy NICs on a large host sets more (--procs N, or
// the GOMAXPROCS environment variable).
const maxServeProcs = 256

// serveProcs is the GOMAXPROCS serve sets (0: leave Go's) for --procs n
// and the GOMAXPROCS environment variable env: n if set, else none when
// the variable is set (Go applied it already), else one thread.
func serveProcs(n int, env string) int {
	if n == 0 && env == "" {
		return 1
	}
	return n
}

// startCPUProfile profiles this process into the file path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
