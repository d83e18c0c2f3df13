package device

import (
	"context"
	"falconnic/device/vsock"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// checkVsock validates the vsock devices of the config: names and sockets
// unique among themselves and against the NICs and the control socket.
func (cfg *Config) checkVsock(names, sockets map[string]bool) error {
	for i := range cfg.Vsock {
		v := &cfg.Vsock[i]
		if !nicName.MatchString(v.Name) {
			return fmt.Errorf("vsock[%d]: name %q must match %s", i, v.Name, nicName)
		}
		if names[v.Name] {
			return fmt.Errorf("vsock[%d]: name %q used twice", i, v.Name)
		}
		names[v.Name] = true
		if err := v.Check(); err != nil {
			return fmt.Errorf("vsock %s: %w", v.Name, err)
		}
		for _, s := range []string{v.Socket, v.UDS} {
			if s == "" {
				continue
			}
			if sockets[s] {
				return fmt.Errorf("vsock %s: socket %s used twice", v.Name, s)
			}
			sockets[s] = true
		}
	}
	return nil
}

// addVsocks builds the config's vsock devices.
func (d *Daemon) addVsocks() error {
	for _, vc := range d.cfg.Vsock {
		if vc.Clock == nil {
			vc.Clock = d.clk
		}
		for _, p := range []string{vc.Socket, vc.UDS} {
			if p != "" && !(vc.Dial && p == vc.Socket) {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return fmt.Errorf("vsock %s: %w", vc.Name, err)
				}
			}
		}
		v, err := vsock.New(vc)
		if err != nil {
			return fmt.Errorf("vsock %s: %w", vc.Name, err)
		}
		d.vsocks = append(d.vsocks, v)
	}
	return nil
}

func (d *Daemon) runVsocks(ctx context.Context, wg *sync.WaitGroup) {
	for _, v := range d.vsocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := v.Serve(ctx); err != nil && ctx.Err() == nil {
				d.log.Error("vsock stopped", "err", err)
			}
		}()
	}
}

func (d *Daemon) closeVsocks() {
	for _, v := range d.vsocks {
		if err := v.Close(); err != nil {
			d.log.Warn("closing vsock", "err", err)
		}
	}
}
