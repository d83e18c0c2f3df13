package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"falconnic/device"
	"falconnic/device/capture"
	"falconnic/internal/control"
)

func init() {
	register("capture", "record a NIC's fabric and port-link packets to a pcapng file: capture --nic NAME [--count N] -w FILE [--keylog KEYFILE]", captureCmd)
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
	keylog := fl.String("keylog", "", "also write the keys the daemon uses while capturing to `KEYFILE` (created mode 0600), so the dissector can decrypt the sealed datagrams; "+
		"the file is a SECRET: with it anyone can read and forge the captured connections' traffic until their keys rotate, and open every CM message of the fabric")
	buffer := fl.Int("buffer", 0, "the daemon buffers at most `BYTES` for this capture (default 8 MiB; packets past it are dropped and counted)")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: falconnic capture [--socket PATH] [--nic NAME] [--count N] [--duration D] -w FILE.pcapng [--keylog KEYFILE]")
		fmt.Fprintln(stderr, "Open the file with Wireshark or tshark and tools/wireshark/falcon.lua (see the README);")
		fmt.Fprintln(stderr, "with --keylog, add -o falcon.keylog:KEYFILE to decrypt. WARNING: the key log is a secret (see --keylog).")
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
	var kl *os.File
	if *keylog != "" {
		f, err := createKeyLog(*keylog)
		if err != nil {
			return err
		}
		defer f.Close()
		kl = f
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
	if err := call("capture.start", device.CaptureStartParams{NIC: *nic, Count: *count, Snap: *snap, Buffer: *buffer, KeyLog: kl != nil}, &started); err != nil {
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
	var n, keys int
	var last capture.Batch
	for ctx.Err() == nil {
		var b capture.Batch
		if err := call("capture.read", device.CaptureReadParams{ID: started.ID, WaitMs: 500}, &b); err != nil {
			return controlError(*socket, err)
		}
		if kl != nil && len(b.Keys) > 0 {
			if _, err := io.WriteString(kl, strings.Join(b.Keys, "\n")+"\n"); err != nil {
				return fmt.Errorf("key log: %w", err)
			}
			keys += len(b.Keys)
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
	if kl != nil {
		if err := kl.Close(); err != nil {
			return fmt.Errorf("key log: %w", err)
		}
		fmt.Fprintf(stderr, "capture: %d keys written to %s (keep it secret; delete it when done)\n", keys, *keylog)
	}
	return nil
}

// createKeyLog creates the key log at path, mode 0600 whatever the umask
// and even if the file existed, and writes its header.
func createKeyLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("key log: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("key log: %w", err)
	}
	if _, err := io.WriteString(f, capture.KeyLogHeader+"\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("key log: %w", err)
	}
	return f, nil
}
