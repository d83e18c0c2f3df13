package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"falconnic/qemu"
)

func init() {
	register("perftest", "run unmodified perftest between two VMs on falconnic NICs (falconnic perftest -h)", runPerftest)
}

const perftestUsage = `usage: falconnic perftest [--daemons 1|2] [--loss PCT] [--insecure] [--keep] [--state DIR] [--cache DIR] [--daemon-cpuprofile FILE]
                          -- PROGRAM ARGS... [-- PROGRAM ARGS...]...
Starts falconnic daemon(s) and two guests A and B with falconnic NICs, waits
until falcon0 is ACTIVE in both, then for each program runs the server side
(PROGRAM ARGS) in B and the client side (PROGRAM ARGS B's-IP) in A, and prints
the client's output. Exits non-zero if any side failed. Examples:
  falconnic perftest -- ib_write_bw -s 65536
  falconnic perftest --daemons 2 --loss 1 -- ib_write_bw -s 65536 -- ibv_rc_pingpong -g 1 -c
  falconnic perftest -- ib_write_bw -R -s 65536 -- rping -C 10 -v
With -R (rdma_cm) the client gets B's IP address like any other program;
rping gets -s in B and -c -a B's-IP in A.
Two daemons share a deployment secret written to the work directory
(fabric.key): the fabric between them is authenticated and encrypted;
--insecure runs it in plaintext instead (to measure what encryption costs).`

// pairKind selects what carries RDMA between the two guests.
type pairKind int

const (
	pairFalcon pairKind = iota // falconnic NICs and falconnic.ko (falcon0)
	pairRXE                    // a QEMU stream link and Linux Soft-RoCE (rxe0)
)

// pairOptions describes a two-guest RDMA setup.
type pairOptions struct {
	kind    pairKind
	daemons int     // 1 or 2 (falconnic only)
	loss    float64 // fabric loss percent per direction (2 daemons)
	// insecure: the two daemons' fabric in plaintext, not sealed with a
	// key file generated in dir
	insecure bool
	// doorbellPolling turns on the NICs' doorbell polling (the daemon's
	// default is off); firmware names the NICs' firmware ("" is the
	// daemon's default).
	doorbellPolling bool
	pollWindowCap   time.Duration // 0: the daemon's default
	firmware        string
	dir             string // work directory: configs, daemon logs, VM state
	cache           string // guest image cache
	bin             string // falconnic executable for `serve`
	// cpuProfile: each daemon writes a CPU profile (serve --cpuprofile) to
	// this path, daemon i of two to path.i
	cpuProfile string
	log        io.Writer
	tag        string // progress lines' prefix ("" is "perftest")
}

// prefix is what the pair's progress lines start with.
func (o pairOptions) prefix() string {
	if o.tag == "" {
		return "perftest"
	}
	return o.tag
}

// rdmaPair is two running guests A (client) and B (server) that can reach
// each other over RDMA, and the daemons behind them.
type rdmaPair struct {
	o       pairOptions
	a, b    *qemu.VM
	bIP     string
	device  string
	daemons []*exec.Cmd
	dlogs   []string
	dconfs  []string   // each daemon's config file
	dsocks  [][]string // each daemon's vhost-user sockets
}

const (
	pairIPA = "10.0.0.1"
	pairIPB = "10.0.0.2"
	pairMAC = "52:54:00:fc:00:0"
)

// daemonCPU is the falconnic daemons' CPU time so far (user + system,
// seconds; 0 without daemons).
func (p *rdmaPair) daemonCPU() float64 {
	t := 0.0
	for _, d := range p.daemons {
		if d.Process == nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.Process.Pid)); err == nil {
			t += vmnetProcStatCPU(b)
		}
	}
	return t
}

// startPair brings the setup up; on error everything started is stopped.
func startPair(ctx context.Context, o pairOptions) (_ *rdmaPair, err error) {
	p := &rdmaPair{o: o, bIP: pairIPB, device: "falcon0"}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	im, err := qemu.LoadImage(o.cache)
	if err != nil {
		return nil, err
	}
	machine := func(name string, nic qemu.NIC) qemu.Machine {
		return qemu.Machine{Name: name, Kernel: im.KernelPath(), Initrd: im.InitrdPath(), NICs: []qemu.NIC{nic}}
	}
	var ma, mb qemu.Machine
	switch o.kind {
	case pairFalcon:
		socks, err := p.startDaemons()
		if err != nil {
			return nil, err
		}
		ma = machine("A", qemu.NIC{VhostUser: socks[0], MAC: pairMAC + "a", CIDR: pairIPA + "/24"})
		mb = machine("B", qemu.NIC{VhostUser: socks[1], MAC: pairMAC + "b", CIDR: pairIPB + "/24"})
	case pairRXE:
		p.device = "rxe0"
		link := filepath.Join(o.dir, "link.sock")
		ma = machine("A", qemu.NIC{Stream: link, StreamServer: true, MAC: pairMAC + "a", CIDR: pairIPA + "/24"})
		mb = machine("B", qemu.NIC{Stream: link, MAC: pairMAC + "b", CIDR: pairIPB + "/24"})
		// rdma_rxe's netdev notifier oopses next to falconnic.ko.
		ma.Append = []string{"falconnic.noload=falconnic"}
		mb.Append = ma.Append
	}
	state := filepath.Join(o.dir, "vms")
	if p.a, err = qemu.Start(state, ma); err != nil {
		return nil, err
	}
	if o.kind == pairRXE {
		// B connects to A's listening stream socket.
		for i := 0; i < 100 && !isSock(ma.NICs[0].Stream); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if p.b, err = qemu.Start(state, mb); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.log, "%s: booting guests A and B (state %s)\n", o.prefix(), state)
	start := time.Now()
	if err := both(func(v *qemu.VM) error { return v.WaitReady(ctx, 4*time.Minute) }, p.a, p.b); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.log, "%s: guests ready in %.1fs\n", o.prefix(), time.Since(start).Seconds())
	if o.kind == pairRXE {
		setup := `while read -r m; do insmod "$m" || exit 1; done < /etc/falconnic/modules.staged && rdma link add rxe0 type rxe netdev eth0`
		if err := both(func(v *qemu.VM) error {
			out, err := guestOut(ctx, v, "sh", "-c", setup)
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		}, p.a, p.b); err != nil {
			return nil, fmt.Errorf("soft-RoCE setup: %w", err)
		}
	}
	if err := both(func(v *qemu.VM) error { return waitPortActive(ctx, v, p.device, 90*time.Second) }, p.a, p.b); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.log, "%s: %s ACTIVE in both guests after %.1fs\n", o.prefix(), p.device, time.Since(start).Seconds())
	return p, nil
}

// both runs f for a and b concurrently and returns the first error.
func both(f func(*qemu.VM) error, a, b *qemu.VM) error {
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, v := range []*qemu.VM{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(v) // errors name the VM

		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func isSock(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// daemonConfig is the subset of device.Config that perftest writes.
type daemonConfig struct {
	Control string      `json:"control"`
	NICs    []daemonNIC `json:"nics"`
	Fabric  *daemonFab  `json:"fabric,omitempty"`
}

type daemonNIC struct {
	Name     string          `json:"name"`
	Socket   string          `json:"socket"`
	MAC      string          `json:"mac"`
	RDMA     *daemonRDMA     `json:"rdma,omitempty"`
	Firmware *daemonFirmware `json:"firmware,omitempty"`
}

type daemonRDMA struct {
	DoorbellPolling string `json:"doorbell_polling,omitempty"`
	PollWindowCap   string `json:"poll_window_cap,omitempty"`
}

type daemonFirmware struct {
	Name string `json:"name,omitempty"`
}

type daemonFab struct {
	Listen      string   `json:"listen"`
	Peers       []string `json:"peers"`
	LossPercent float64  `json:"loss_percent,omitempty"`
	Seed        uint64   `json:"seed,omitempty"`
	KeyFile     string   `json:"key_file,omitempty"`
	Insecure    bool     `json:"insecure,omitempty"`
}

// nics is the pair's two NICs in a daemon's config.
func (o pairOptions) nics() []daemonNIC {
	nics := []daemonNIC{{Name: "a0", Socket: "a0.sock", MAC: pairMAC + "a"}, {Name: "b0", Socket: "b0.sock", MAC: pairMAC + "b"}}
	for i := range nics {
		if o.doorbellPolling {
			nics[i].RDMA = &daemonRDMA{DoorbellPolling: "on"}
			if o.pollWindowCap > 0 {
				nics[i].RDMA.PollWindowCap = o.pollWindowCap.String()
			}
		}
		if o.firmware != "" {
			nics[i].Firmware = &daemonFirmware{Name: o.firmware}
		}
	}
	return nics
}

// startDaemons starts one daemon with both NICs, or two daemons with one
// NIC each linked by the UDP fabric on loopback, and returns A's and B's
// vhost-user sockets once they exist.
func (p *rdmaPair) startDaemons() ([]string, error) {
	nics := p.o.nics()
	var cfgs []daemonConfig
	var dirs []string
	if p.o.daemons == 1 {
		cfgs = []daemonConfig{{Control: "control.sock", NICs: nics}}
		dirs = []string{filepath.Join(p.o.dir, "d1")}
	} else {
		ports, err := freeUDPPorts(2)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(p.o.dir, 0o755); err != nil {
			return nil, err
		}
		key, err := fabricKeyFile(p.o.dir, p.o.insecure)
		if err != nil {
			return nil, err
		}
		for i := range 2 {
			cfgs = append(cfgs, daemonConfig{Control: "control.sock", NICs: nics[i : i+1],
				Fabric: &daemonFab{Listen: ports[i], Peers: []string{ports[1-i]}, LossPercent: p.o.loss, Seed: uint64(i + 1),
					KeyFile: key, Insecure: p.o.insecure}})
			dirs = append(dirs, filepath.Join(p.o.dir, fmt.Sprintf("d%d", i+1)))
		}
	}
	var socks []string
	for i, cfg := range cfgs {
		if err := os.MkdirAll(dirs[i], 0o755); err != nil {
			return nil, err
		}
		path := filepath.Join(dirs[i], "daemon.json")
		b, _ := json.MarshalIndent(cfg, "", "  ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
		logPath := filepath.Join(dirs[i], "daemon.log")
		var extra []string
		if prof := p.o.cpuProfile; prof != "" {
			if len(cfgs) > 1 {
				prof = fmt.Sprintf("%s.%d", prof, i+1)
			}
			extra = []string{"--cpuprofile", prof}
		}
		cmd, err := startServeProc(p.o.bin, path, logPath, extra...)
		if err != nil {
			return nil, err
		}
		p.daemons = append(p.daemons, cmd)
		p.dlogs = append(p.dlogs, logPath)
		p.dconfs = append(p.dconfs, path)
		var own []string
		for _, n := range cfg.NICs {
			own = append(own, filepath.Join(dirs[i], n.Socket))
		}
		p.dsocks = append(p.dsocks, own)
		socks = append(socks, own...)
	}
	if s, ok := waitSockets(socks, 30*time.Second); !ok {
		return nil, fmt.Errorf("daemon socket %s did not appear in 30s: %s", s, p.daemonTails())
	}
	fmt.Fprintf(p.o.log, "%s: %d daemon(s) up (logs %s)\n", p.o.prefix(), len(cfgs), strings.Join(p.dlogs, " "))
	return socks, nil
}

// restartDaemons kills every daemon with SIGKILL (no cleanup, as in a
// crash), waits outage and starts each again on its config; QEMU
// reconnects the guests' NICs by itself. It returns once the new daemons'
// sockets are there.
func (p *rdmaPair) restartDaemons(outage time.Duration) error {
	for _, d := range p.daemons {
		d.Process.Kill()
		d.Wait()
	}
	time.Sleep(outage)
	var socks []string
	for i := range p.daemons {
		// Stale socket files of the killed daemon: gone, so that existence
		// means the new daemon listens.
		for _, s := range p.dsocks[i] {
			os.Remove(s)
		}
		cmd, err := startServeProc(p.o.bin, p.dconfs[i], p.dlogs[i])
		if err != nil {
			return err
		}
		p.daemons[i] = cmd
		socks = append(socks, p.dsocks[i]...)
	}
	if s, ok := waitSockets(socks, 30*time.Second); !ok {
		return fmt.Errorf("restarted daemon socket %s did not appear in 30s: %s", s, p.daemonTails())
	}
	return nil
}

func (p *rdmaPair) daemonTails() string {
	var s strings.Builder
	for _, l := range p.dlogs {
		b, _ := os.ReadFile(l)
		if len(b) > 1500 {
			b = b[len(b)-1500:]
		}
		fmt.Fprintf(&s, "\n--- %s:\n%s", l, b)
	}
	return s.String()
}

// startServeProc starts `falconnic serve` (bin) on config, with extra
// flags, in its own process group, dying with us, its output appended to
// logPath.
func startServeProc(bin, config, logPath string, extra ...string) (*exec.Cmd, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--config", config}, extra...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// waitSockets waits until every socket exists, at most d in all; it
// returns the first missing one when d passes.
func waitSockets(socks []string, d time.Duration) (string, bool) {
	deadline := time.Now().Add(d)
	for _, s := range socks {
		for !isSock(s) {
			if time.Now().After(deadline) {
				return s, false
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return "", true
}

// freeUDPPorts returns n loopback UDP addresses that were free a moment ago.
func freeUDPPorts(n int) ([]string, error) {
	var out []string
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		out = append(out, c.LocalAddr().String())
	}
	return out, nil
}

// close stops the guests, then the daemons.
func (p *rdmaPair) close() {
	for _, v := range []*qemu.VM{p.a, p.b} {
		if v != nil {
			v.Stop()
		}
	}
	for _, d := range p.daemons {
		d.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			d.Process.Kill()
			<-done
		}
	}
}

// guestOut runs argv in v and returns its combined output.
func guestOut(ctx context.Context, v *qemu.VM, argv ...string) (string, error) {
	var out bytes.Buffer
	err := execIn(ctx, v, "", argv, nil, &out, &out)
	return out.String(), err
}

// waitPortActive polls ibv_devinfo until dev's port is ACTIVE.
func waitPortActive(ctx context.Context, v *qemu.VM, dev string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		out, err := guestOut(ctx, v, "ibv_devinfo", "-d", dev)
		if err == nil && strings.Contains(out, "PORT_ACTIVE") {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("vm %s: %s not ACTIVE after %s: %v\n%s", v.Name, dev, d, err, out)
		}
		time.Sleep(time.Second)
	}
}

// notListening matches a client's failure to reach a server that does not
// listen yet (perftest, the libibverbs pingpong examples, rping).
func notListening(out string) bool {
	return strings.Contains(out, "Couldn't connect to") || cmRejected.MatchString(out)
}

// cmRejected is how perftest -R and rping report RDMA_CM_EVENT_REJECTED
// (8), and perftest -R -c UD an RDMA_CM_EVENT_UNREACHABLE with SIDR
// status 1 (IB_SIDR_UNSUPPORTED: the kernel CM found no listener for the
// service ID, drivers/infiniband/core/cm.c): either way the server's
// rdma_cm does not listen on the port yet.
var cmRejected = regexp.MustCompile(`Unexpected CM event bl blka 8\b|RDMA_CM_EVENT_REJECTED|RDMA_CM_EVENT_UNREACHABLE; error: 1\b`)

// perftestResult is one client/server run.
type perftestResult struct {
	Client, Server string
	ClientErr      error
	ServerErr      error
	Tries          int // client starts in the last run of both sides (runPair)
	CMRestarts     int // runs of both sides before it lost to perftest's rdma_cm retry (cmDataError)
	Calibrations   int // runs before it that perftest's CPU calibration failed
}

// badData matches the libibverbs pingpong examples' report of a received
// buffer that does not hold what was sent (with -c, on the server side);
// they exit 0 anyway.
var badData = regexp.MustCompile(`(?i)invalid data in page`)

// Err is the run's failure, naming the side(s) that failed.
func (r perftestResult) Err() error {
	var errs []error
	if badData.MatchString(r.Server) || badData.MatchString(r.Client) {
		errs = append(errs, errors.New("received data differs from what was sent"))
	}
	if r.ClientErr != nil {
		errs = append(errs, fmt.Errorf("client (A): %w", r.ClientErr))
	}
	if r.ServerErr != nil {
		errs = append(errs, fmt.Errorf("server (B): %w", r.ServerErr))
	}
	return errors.Join(errs...)
}

// run runs argv between the pair (runOnce), and runs it again, at most
// calibrationTries times in all, while either side fails perftest's own
// CPU-frequency calibration: perftest times its report by the TSC against
// gettimeofday, and when their samples disagree (r^2 < 0.9), which a TCG
// vCPU descheduled by a loaded host causes, it either exits ("Can't
// produce a report") or, in the latency tests, exits 0 with a report of
// inf and nan. That is the benchmark's clock, not the NIC; any other
// failure is returned at once.
func (p *rdmaPair) run(ctx context.Context, argv []string, timeout time.Duration) perftestResult {
	for try := 1; ; try++ {
		r := p.runOnce(ctx, argv, timeout)
		r.Calibrations = try - 1
		if !calibrationFailed(r) || try == calibrationTries || ctx.Err() != nil {
			return r
		}
	}
}

// calibrationFailed reports whether perftest's client or server said its
// CPU-frequency calibration failed, whatever its exit status (the server
// of a bandwidth test calibrates too, and exits 1 on it).
func calibrationFailed(r perftestResult) bool {
	return perftestCalibration.MatchString(r.Client) || perftestCalibration.MatchString(r.Server)
}

// calibrationTries bounds the runs of one program that perftest's
// CPU-frequency calibration may fail (rdmaPair.run).
const calibrationTries = 3

// perftestCalibration is perftest's message when its CPU-frequency
// samples disagree.
var perftestCalibration = regexp.MustCompile(`Correlation coefficient r\^2: [0-9.e+-]+ < 0\.9`)

// runOnce starts argv as the server in B and argv + B's address as the
// client in A, retrying the client while the server does not listen yet,
// and running both sides again while perftest's rdma_cm data connection
// fails (runPair).
func (p *rdmaPair) runOnce(ctx context.Context, argv []string, timeout time.Duration) perftestResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for restarts := 0; ; restarts++ {
		r, again := p.runPair(ctx, argv)
		r.CMRestarts = restarts
		if !again {
			return r
		}
	}
}

// cmDataError is perftest's report of a failed RDMA CM event on its test
// connections (-R: rdma_cm_event_error_handler, "RDMA CM event error:
// Event: RDMA_CM_EVENT_REJECTED; error: 8."): the client's connection
// request reached B before B's server listened (B's server creates its
// listening ID only after the out-of-band handshake, and a loaded host may
// run A's client first), or a UD client's SIDR found no listener. perftest
// 4.5 (Debian 12's 4.5+0.17) then retries on its own, with the IDs, event
// channel and node array it has just destroyed and freed
// (rdma_cm_client_connection → rdma_cm_destroy_cma): the client either
// crashes in librdmacm (a general protection fault in rdma_resolve_addr)
// or waits forever on a closed channel, while B's server waits for a
// connection that cannot come and no longer listens for a new client's
// handshake. Fixed upstream (perftest 3d9d8d0 and e2b3dcf, December 2025).
// Once either side prints it, that run is lost: both sides are killed and
// run again.
var cmDataError = regexp.MustCompile(`RDMA CM event error:`)

// runPair is one run of both sides: B's server, then A's client, retried
// while it finds no server listening for its handshake. When either side
// reports a failed RDMA CM event on the test connections (cmDataError),
// both are killed at once and runPair says to run them again (again),
// unless ctx has ended: then the failure stands.
func (p *rdmaPair) runPair(ctx context.Context, argv []string) (r perftestResult, again bool) {
	sctx, stopServer := context.WithCancel(ctx)
	defer stopServer()
	cctx, stopClient := context.WithCancel(ctx)
	defer stopClient()
	var lost atomic.Bool // a side printed cmDataError
	trip := func() {
		if !lost.Swap(true) {
			stopClient()
			stopServer()
		}
	}
	srvDone := make(chan struct{})
	server, client := sides(argv, p.bIP)
	go func() {
		defer close(srvDone)
		r.Server, r.ServerErr = guestOutWatch(sctx, p.b, cmDataError, trip, server...)
	}()
	for {
		r.Tries++
		time.Sleep(time.Second) // let the server start listening
		r.Client, r.ClientErr = guestOutWatch(cctx, p.a, cmDataError, trip, client...)
		if r.ClientErr == nil || !notListening(r.Client) || cctx.Err() != nil {
			break
		}
		select {
		case <-srvDone: // the server gave up: no point retrying
		default:
			continue
		}
		break
	}
	if r.ClientErr != nil {
		// A failed client leaves the server waiting for a peer.
		select {
		case <-srvDone:
		case <-time.After(20 * time.Second):
			stopServer()
		}
	}
	<-srvDone
	return r, lost.Load() && ctx.Err() == nil
}

// guestOutWatch is guestOut that calls trip, once, as soon as the output
// so far matches re (the command goes on until trip's caller stops it).
func guestOutWatch(ctx context.Context, v *qemu.VM, re *regexp.Regexp, trip func(), argv ...string) (string, error) {
	w := &watchWriter{re: re, trip: trip}
	err := execIn(ctx, v, "", argv, nil, w, w)
	return w.buf.String(), err
}

// watchWriter collects a command's output and trips when it first matches.
type watchWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	re      *regexp.Regexp
	trip    func()
	tripped bool
}

func (w *watchWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(b)
	hit := !w.tripped && w.re.Match(w.buf.Bytes())
	w.tripped = w.tripped || hit
	w.mu.Unlock()
	if hit {
		w.trip()
	}
	return len(b), nil
}

// sides returns the server's and the client's command lines for argv:
// perftest and the pingpong examples take the server's address as their
// last argument; rping (librdmacm's example) takes -s, or -c -a ADDR.
func sides(argv []string, serverIP string) (server, client []string) {
	if len(argv) > 0 && argv[0] == "rping" {
		server = append(append([]string(nil), argv...), "-s")
		client = append(append([]string(nil), argv...), "-c", "-a", serverIP)
		return server, client
	}
	return argv, append(append([]string(nil), argv...), serverIP)
}

// splitPrograms splits ARGS at "--" into program invocations.
func splitPrograms(args []string) [][]string {
	var progs [][]string
	cur := []string{}
	for _, a := range args {
		if a == "--" {
			if len(cur) > 0 {
				progs = append(progs, cur)
			}
			cur = []string{}
			continue
		}
		cur = append(cur, a)
	}
	if len(cur) > 0 {
		progs = append(progs, cur)
	}
	return progs
}

func runPerftest(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("perftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, perftestUsage); fs.PrintDefaults() }
	daemons := fs.Int("daemons", 1, "1: both NICs on one daemon; 2: one daemon each, linked by the UDP fabric on loopback")
	loss := fs.Float64("loss", 0, "fabric loss in percent, each direction (needs --daemons 2)")
	insecure := fs.Bool("insecure", false, "two daemons' fabric in plaintext (default: sealed with a key file generated in the work directory)")
	keep := fs.Bool("keep", false, "keep the guests and daemons running after the programs, until interrupted")
	state := fs.String("state", "", "work directory (default: a new temporary one, removed at the end unless --keep)")
	cache := fs.String("cache", qemu.DefaultCacheDir(), "guest image cache")
	timeout := fs.Duration("timeout", 10*time.Minute, "time limit per program")
	cpuProfile := fs.String("daemon-cpuprofile", "", "the daemon writes a CPU profile of the whole run to `FILE` (FILE.1 and FILE.2 with --daemons 2; serve --cpuprofile)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	progs := splitPrograms(fs.Args())
	if len(progs) == 0 {
		return fmt.Errorf("%w: falconnic perftest [FLAGS] -- PROGRAM ARGS... (e.g. -- ib_write_bw -s 65536)", errUsage)
	}
	if err := checkPairFabric(*daemons, *loss); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, done, err := pairWorkDir(*state, "fn-perftest-", *keep, stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := startPair(ctx, pairOptions{kind: pairFalcon, daemons: *daemons, loss: *loss, insecure: *insecure, dir: dir, cache: *cache, bin: bin, log: stderr,
		cpuProfile: *cpuProfile})
	if err != nil {
		return err
	}
	defer p.close()
	var failed []error
	for _, argv := range progs {
		server, client := sides(argv, p.bIP)
		fmt.Fprintf(stderr, "perftest: server B: %s; client A: %s\n", strings.Join(server, " "), strings.Join(client, " "))
		start := time.Now()
		r := p.run(ctx, argv, *timeout)
		fmt.Fprint(stdout, r.Client)
		if r.Calibrations > 0 {
			fmt.Fprintf(stderr, "perftest: %s: perftest's CPU-frequency calibration failed %d time(s) (a loaded host), run again\n", argv[0], r.Calibrations)
		}
		if r.CMRestarts > 0 {
			fmt.Fprintf(stderr, "perftest: %s: the rdma_cm test connection failed %d time(s) before B's server listened; perftest 4.5's own retry of it is unsafe (it reuses what it freed), so both sides ran again\n", argv[0], r.CMRestarts)
		}
		if err := r.Err(); err != nil {
			fmt.Fprintf(stderr, "perftest: %s failed after %.1fs: %v\n--- server output:\n%s", argv[0], time.Since(start).Seconds(), err, r.Server)
			failed = append(failed, fmt.Errorf("%s: %w", argv[0], err))
			continue
		}
		fmt.Fprintf(stderr, "perftest: %s done in %.1fs\n", argv[0], time.Since(start).Seconds())
	}
	p.fabricReport(ctx)
	if *keep {
		fmt.Fprintf(stderr, "perftest: keeping guests A (%s) and B (%s) until interrupted: falconnic vm exec A --state %s -- CMD\n",
			pairIPA, pairIPB, filepath.Join(dir, "vms"))
		<-ctx.Done()
	}
	return errors.Join(failed...)
}

// checkPairFabric checks a guest pair's --daemons and --loss flags
// (perftest, nvmf, nfs).
func checkPairFabric(daemons int, loss float64) error {
	if daemons != 1 && daemons != 2 {
		return fmt.Errorf("%w: --daemons must be 1 or 2", errUsage)
	}
	if loss < 0 || loss >= 100 {
		return fmt.Errorf("%w: --loss must be in [0, 100)", errUsage)
	}
	if loss > 0 && daemons == 1 {
		return fmt.Errorf("%w: --loss needs --daemons 2: with one daemon there is no fabric to impair", errUsage)
	}
	return nil
}

// pairWorkDir is a guest pair's work directory: state if given (created if
// need be, kept), else a new temporary one that done removes unless keep,
// or unless the run failed (err != nil): then done keeps it, with the
// daemons' logs and the guests' consoles, and says where it is.
func pairWorkDir(state, prefix string, keep bool, log io.Writer) (dir string, done func(err error), err error) {
	done = func(error) {}
	if state != "" {
		return state, done, os.MkdirAll(state, 0o755)
	}
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", done, err
	}
	if !keep {
		done = func(err error) {
			if err != nil {
				fmt.Fprintf(log, "%s: the run failed: its work directory (daemon logs, guest consoles) is kept in %s\n",
					strings.TrimSuffix(strings.TrimPrefix(prefix, "fn-"), "-"), dir)
				return
			}
			os.RemoveAll(dir)
		}
	}
	return dir, done, nil
}
