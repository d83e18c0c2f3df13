package device

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"falconnic/device/capture"
	"falconnic/device/cm"
	"falconnic/device/fabric"
	"falconnic/device/l2"
	"falconnic/device/port"
	"falconnic/device/vsock"
	"falconnic/internal/clock"
	"falconnic/internal/control"
)

// DaemonOptions are the daemon's injected dependencies. Zero fields take
// defaults.
type DaemonOptions struct {
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// ether.New builds one guest NIC whose frames toward the network go to
	// uplink. Default: the vhost-user NIC (newVhostNIC).
	NewNIC func(spec NICSpec, uplink l2.Sink) (DaemonNIC, error)
	// RingWatchdogObserve has the disks' vhost-user ring watchdog count and
	// log lost notifications without curing them (diagnosis: the stall
	// stays for a stall report).
	RingWatchdogObserve bool
}

// DaemonNIC is what the daemon needs of a guest NIC.
type DaemonNIC interface {
	// Deliver hands a frame from the switch toward the guest.
	Deliver(frame []byte)
	// Serve runs the NIC until ctx is done.
	Serve(ctx context.Context) error
	// Close releases the NIC (its socket is removed).
	Close() error
	// StatusJSON reports the NIC's state for `falconnic status`.
	StatusJSON() any
}

// Daemon is one falconnic device daemon: its guest NICs, the switch between
// them, the fabric port to other daemons and the control socket.
//
// Lifecycle: NewDaemon builds everything and binds the control and fabric
// sockets, so the daemon is reachable once it returns; Run starts each
// NIC's Serve (which listens on, or dials, the NIC's vhost-user socket) and
// serves until ctx is done, then shuts down NICs, fabric and control socket
// in that order, removing the sockets they created.
type Daemon struct {
	cfg     *Config
	clk     clock.Clock
	log     *slog.Logger
	started clock.Time
	// watchObserve: disks' ring watchdogs count and log, and do not act
	watchObserve bool

	sw     *fabric.Switch
	sec    daemonSecurity // the fabric's secret and CM authentication (daemon_secure.go)
	fabric *fabric.Fabric // nil without a fabric section
	nics   []*daemonNIC   // each with the functions it owns (nic.go)
	vsocks []*vsock.Device
	cm     *cm.Manager // connection set-up for every protocol, and the fabric's Falcon demux
	ports  daemonPorts
	nvme   nvmeDaemon

	ctl   *control.Server
	ctlLn net.Listener

	// The capture (capture.go): the hub, and which NIC a MAC or a
	// port is.
	capture   *capture.Hub
	nicIndex  map[[6]byte]int
	portIndex map[cm.FalconReceiver]int
}

// NewDaemon builds a daemon from cfg (as checked by ParseConfig). On error,
// everything built so far is released.
func NewDaemon(cfg *Config, opts DaemonOptions) (_ *Daemon, err error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	d := &Daemon{cfg: cfg, clk: opts.Clock, log: opts.Logger, started: opts.Clock.Now(), watchObserve: opts.RingWatchdogObserve}
	if opts.NewNIC == nil {
		opts.NewNIC = d.newVhostNIC
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()

	ln, err := control.Listen(cfg.Control)
	if err != nil {
		return nil, err
	}
	d.ctlLn = ln
	d.ctl = control.NewServer(d.log)
	d.registerMethods()

	d.sw = fabric.NewSwitch(fabric.SwitchOptions{
		Clock:   d.clk,
		MACAge:  time.Duration(cfg.Switch.MACAge),
		MaxMACs: cfg.Switch.MaxMACs,
	})
	if fs := cfg.Fabric; fs != nil {
		listen, err := netip.ParseAddrPort(fs.Listen)
		if err != nil {
			return nil, fmt.Errorf("%w: fabric listen: %v", ErrConfig, err)
		}
		peers, err := fs.resolvePeers()
		if err != nil {
			return nil, err
		}
		d.fabric, err = fabric.New(fabric.Options{
			Listen:  listen,
			Peers:   peers,
			Paths:   fs.Paths,
			Clock:   d.clk,
			MACAge:  time.Duration(cfg.Switch.MACAge),
			MaxMACs: cfg.Switch.MaxMACs,
			Impair:  fs.impairment(),
			Logger:  d.log.With("part", "fabric"),
		})
		if err != nil {
			return nil, err
		}
		up := d.sw.AddPort("fabric")
		up.Connect(d.fabric)
		d.fabric.SetFrameSink(up)
	}
	d.cm = cm.NewOnFabric(d.fabric)
	if err := d.secureFabric(); err != nil {
		return nil, err
	}
	for _, spec := range cfg.NICs {
		n, err := d.newNIC(spec, opts.NewNIC)
		if err != nil {
			return nil, err
		}
		d.nics = append(d.nics, n)
	}
	d.startCapture()
	if err := d.addVsocks(); err != nil {
		return nil, err
	}
	d.runPorts(d.addNVMeFuncs(), cfg.portCores())
	if err := d.addNVMe(); err != nil {
		return nil, err
	}
	return d, nil
}

// Switch returns the daemon's switch.
func (d *Daemon) Switch() *fabric.Switch { return d.sw }

// Fabric returns the daemon's fabric port, or nil.
func (d *Daemon) Fabric() *fabric.Fabric { return d.fabric }

// ControlSocket returns the control socket's path.
func (d *Daemon) ControlSocket() string { return d.cfg.Control }

// Run serves until ctx is done, then shuts down: NICs first (their sockets
// are removed), then the fabric, then the control socket. A NIC whose Serve
// fails is logged and reported in status; the others keep running.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var ctlErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctlErr = d.ctl.Serve(ctx, d.ctlLn)
		if ctlErr != nil {
			d.log.Error("control socket failed", "err", ctlErr)
		}
	}()
	if d.fabric != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.fabric.Run(ctx)
		}()
	}
	for i := range d.nics {
		n := d.nics[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := n.eth.Serve(ctx)
			if err != nil && ctx.Err() == nil {
				n.mu.Lock()
				n.err = err
				n.mu.Unlock()
				d.log.Error("nic stopped", "nic", n.spec.Name, "err", err)
			}
		}()
	}
	d.runVsocks(ctx, &wg)
	d.runNVMe(ctx, &wg)
	sweep := d.startSweeper()
	rot := d.startRotation()
	d.log.Info("falconnic daemon serving", "control", d.cfg.Control, "nics", len(d.nics), "fabric", d.fabricAddr())

	<-ctx.Done()
	sweep.stop()
	rot.stop()
	d.log.Info("falconnic daemon shutting down")
	d.close()
	wg.Wait()
	d.log.Info("falconnic daemon stopped")
	return ctlErr
}

// close releases everything; it is safe after a partial NewDaemon.
func (d *Daemon) close() {
	for _, n := range d.nics {
		if err := n.eth.Close(); err != nil {
			d.log.Warn("closing nic", "nic", n.spec.Name, "err", err)
		}
		d.sw.RemovePort(n.sw)
	}
	d.closeVsocks()
	d.closeNVMe()
	d.closePorts()
	if d.fabric != nil {
		d.fabric.Close()
	}
	if d.ctlLn != nil {
		d.ctlLn.Close() // removes the socket file
	}
}

// after returns a channel closed dur from now on the daemon's clock, and
// the function that cancels it.
func (d *Daemon) after(dur time.Duration) (<-chan struct{}, func()) {
	c := make(chan struct{})
	t := d.clk.AfterFunc(dur, func() { close(c) })
	return c, func() { t.Stop() }
}

func (d *Daemon) fabricAddr() string {
	if d.fabric == nil {
		return "none"
	}
	return d.fabric.LocalAddr().String()
}

// sweeper periodically frees aged-out MAC entries (lookups already ignore
// them, so its period only bounds memory).
type sweeper struct {
	mu      sync.Mutex
	t       clock.Timer
	stopped bool
}

func (d *Daemon) startSweeper() *sweeper {
	s := &sweeper{}
	period := d.sw.MACAge() / 2
	var arm func()
	arm = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.stopped {
			return
		}
		s.t = d.clk.AfterFunc(period, func() {
			d.sw.Sweep()
			if d.fabric != nil {
				d.fabric.Sweep()
			}
			arm()
		})
	}
	arm()
	return s
}

func (s *sweeper) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.t != nil {
		s.t.Stop()
	}
}

// Status is the daemon's state as `falconnic status` shows it.
type Status struct {
	Uptime  time.Duration       `json:"uptime_ns"`
	Control string              `json:"control"`
	NICs    []NICReport         `json:"nics"`
	Switch  fabric.SwitchStatus `json:"switch"`
	Fabric  *fabric.Status      `json:"fabric,omitempty"`
	Vsock   []any               `json:"vsock,omitempty"`
	NVMe    *NVMeStatus         `json:"nvme,omitempty"`
	// CM are the connection manager's counters (every protocol).
	CM map[string]uint64 `json:"cm,omitempty"`
	// Security is how the fabric is secured (daemon_secure.go).
	Security *SecurityStatus `json:"security,omitempty"`
}

// NICReport is one NIC in the daemon status: its config, its switch port's
// counters and the NIC's own status.
type NICReport struct {
	Name       string            `json:"name"`
	Socket     string            `json:"socket"`
	MAC        string            `json:"mac"`
	QueuePairs int               `json:"queue_pairs"`
	Error      string            `json:"error,omitempty"`
	Port       map[string]uint64 `json:"port"`
	Device     json.RawMessage   `json:"device,omitempty"`
	// Falcon is the NIC's Falcon port: every Falcon ULP's connections
	// (per protocol) and the endpoint's counters.
	Falcon *FalconPortStatus `json:"falcon_port,omitempty"`
}

// Status reports the whole daemon.
func (d *Daemon) Status() Status {
	st := Status{
		Uptime:  d.clk.Now() - d.started,
		Control: d.cfg.Control,
		Switch:  d.sw.Status(),
	}
	for _, n := range d.nics {
		st.NICs = append(st.NICs, n.report())
	}
	if d.fabric != nil {
		fs := d.fabric.Status()
		st.Fabric = &fs
	}
	for _, v := range d.vsocks {
		st.Vsock = append(st.Vsock, v.StatusJSON())
	}
	st.NVMe = d.nvmeStatus()
	st.CM = d.cm.Stats.Set().Snapshot()
	st.Security = d.securityStatus()
	return st
}

// Control methods. Each is a row: name → handler.
func (d *Daemon) registerMethods() {
	for name, h := range map[string]control.HandlerFunc{
		"status": func(context.Context, json.RawMessage) (any, error) { return d.Status(), nil },
		"conns": func(_ context.Context, p json.RawMessage) (any, error) {
			var req struct {
				Top int `json:"top"`
			}
			if len(p) > 0 {
				if err := json.Unmarshal(p, &req); err != nil {
					return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
				}
			}
			if req.Top <= 0 || req.Top > MaxTopConns {
				req.Top = DefaultTopConns
			}
			return d.Conns(req.Top), nil
		},
		"fabric.impair": func(_ context.Context, p json.RawMessage) (any, error) {
			if d.fabric == nil {
				return nil, errors.New("this daemon has no fabric")
			}
			var im fabric.Impairment
			if err := json.Unmarshal(p, &im); err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			if err := d.fabric.SetImpairment(im); err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			d.log.Info("fabric impairment set", "loss_percent", im.LossPercent, "reorder_percent", im.ReorderPercent, "seed", im.Seed)
			return d.fabric.Impairment(), nil
		},
		"nic.firmware": func(_ context.Context, p json.RawMessage) (any, error) {
			var req struct {
				NIC      string             `json:"nic"`
				Firmware *port.FirmwareSpec `json:"firmware"`
			}
			if err := json.Unmarshal(p, &req); err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			n := d.nic(req.NIC)
			if n == nil {
				return nil, fmt.Errorf("%w: no NIC %q", control.ErrBadParams, req.NIC)
			}
			if req.Firmware != nil {
				if err := n.falcon.SwapFirmware(*req.Firmware); err != nil {
					if errors.Is(err, port.ErrFirmware) {
						err = fmt.Errorf("%w: %v", control.ErrBadParams, err)
					}
					return nil, err
				}
				d.log.Info("firmware swapped", "nic", req.NIC, "firmware", req.Firmware.Normalized().Name)
			}
			if st := n.portStatus(); st != nil {
				return st.Firmware, nil
			}
			return nil, port.ErrStopped
		},
		"fabric.add_peer": func(_ context.Context, p json.RawMessage) (any, error) {
			if d.fabric == nil {
				return nil, errors.New("this daemon has no fabric")
			}
			var req struct {
				Addr string `json:"addr"`
			}
			if err := json.Unmarshal(p, &req); err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			addr, err := (&FabricSpec{Peers: []string{req.Addr}}).resolvePeers()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			if err := d.fabric.AddPeer(addr[0]); err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			d.log.Info("fabric peer added", "peer", addr[0])
			return d.fabric.Status().Peers, nil
		},
	} {
		d.ctl.Handle(name, h)
	}
	for name, h := range d.captureMethods() {
		d.ctl.Handle(name, h)
	}
}
