package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"falconnic/device"
	"falconnic/device/capture"
	"falconnic/internal/control"
)

func init() {
	register("capture", "record a NIC's fabric and port-link packets to a pcapng file: capture --nic NAME [--count N] -w FILE", captureCmd)
}

func captureCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("capture", flag.ContinueOnError)
	fl.SetOutput(stderr)
	socket := fl.String("socket", device.DefaultControlSocket, "daemon control socket `PATH`")
	nic := fl.String("nic", "", "the NIC whose packets to record (default: every NIC, and datagrams no NIC owns)")
	count := fl.Int("count", 0, "stop after `N` packets (0: until interrupted or --duration)")
	dur := fl.Duration("duration", 0, "stop after `D` (0: until interrupted or --count)")
	out := fl.String("w", "", "write the capture to `FILE` (pcapng; - for stdout)")
	snap := fl.Int("snap", 0, "keep at most `BYTES` of each packet (default 65535)")
	buffer := fl.Int("buffer", 0, "the daemon buffers at most `BYTES` for this capture (default 8 MiB; packets past it are dropped and counted)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: falconnic capture [--socket PATH] [--nic NAME] [--count N] [--duration D] -w FILE.pcapng")
		fmt.Fprintln(stderr, "Open the file with Wireshark or tshark and tools/wireshark/falcon.lua (see the README).")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *out == "" || fl.NArg() != 0 || *count < 0 || *dur < 0 {
		fl.Usage()
		return fmt.Errorf("%w: capture needs -w FILE and no other arguments", errUsage)
	}
	w := stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if *dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *dur)
		defer cancel()
	}
	c, err := control.Dial(ctx, *socket)
	if err != nil {
		return controlError(*socket, err)
	}
	defer c.Close()
	call := func(method string, params, result any) error {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Call(cctx, method, params, result)
	}
	var started device.CaptureStarted
	if err := call("capture.start", device.CaptureStartParams{NIC: *nic, Count: *count, Snap: *snap, Buffer: *buffer}, &started); err != nil {
		return controlError(*socket, err)
	}
	name := *nic
	if name == "" {
		name = "all"
	}
	pw, err := capture.NewPcapWriter(w, name)
	if err != nil {
		return err
	}
	var n int
	var last capture.Batch
	for ctx.Err() == nil {
		var b capture.Batch
		if err := call("capture.read", device.CaptureReadParams{ID: started.ID, WaitMs: 500}, &b); err != nil {
			return controlError(*socket, err)
		}
		for _, r := range b.Records {
			if err := pw.Write(r); err != nil {
				return err
			}
			n++
		}
		last = b
		if b.Done || *count > 0 && n >= *count {
			break
		}
	}
	if !last.Done {
		_ = call("capture.stop", map[string]uint64{"id": started.ID}, nil)
	}
	if err := pw.Close(last.Dropped); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "capture: %d packets written to %s, %d dropped by the daemon (buffer full), %d cut to the snap length\n",
		n, *out, last.Dropped, last.Truncated)
	return nil
}
