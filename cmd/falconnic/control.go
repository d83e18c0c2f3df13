package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"falconnic/device"
	"falconnic/internal/control"
)

func init() {
	register("control", "call a daemon control method: control [--socket PATH] METHOD [JSON-PARAMS]", controlCmd)
}

// controlCmd is the generic client of the control socket: it calls any
// method (`falconnic control methods` lists them) and prints the result as
// indented JSON, e.g.
//
//	falconnic control fabric.impair '{"loss_percent":1,"seed":7}'
func controlCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("control", flag.ContinueOnError)
	fl.SetOutput(stderr)
	socket := fl.String("socket", device.DefaultControlSocket, "daemon control socket `PATH`")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: falconnic control [--socket PATH] METHOD [JSON-PARAMS]")
		fmt.Fprintln(stderr, "       falconnic control methods   # what this daemon answers")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fl.NArg() < 1 || fl.NArg() > 2 {
		fl.Usage()
		return fmt.Errorf("%w: control needs a method and at most one JSON argument", errUsage)
	}
	var params any
	if fl.NArg() == 2 {
		raw := json.RawMessage(fl.Arg(1))
		if !json.Valid(raw) {
			return fmt.Errorf("%w: params %q are not JSON", errUsage, fl.Arg(1))
		}
		params = raw
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var result json.RawMessage
	if err := control.Call(ctx, *socket, fl.Arg(0), params, &result); err != nil {
		return controlError(*socket, err)
	}
	var v any
	if err := json.Unmarshal(result, &v); err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
