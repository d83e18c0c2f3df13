package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"falconnic/device"
	"falconnic/device/fabric"
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
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: falconnic serve --config FILE [--log-level LEVEL] [--loss PCT] [--reorder PCT] [--seed N]")
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
	d, err := device.NewDaemon(cfg, device.DaemonOptions{Logger: log})
	if err != nil {
		return err
	}
	return d.Run(ctx)
}
