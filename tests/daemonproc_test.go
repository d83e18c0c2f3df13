package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"falconnic/device"
	"falconnic/device/ether"
	"falconnic/internal/control"
)

// vsockSpec is one vhost-user-vsock device of a daemon config
// (device.VsockConfig's JSON).
type vsockSpec struct {
	Name     string `json:"name"`
	Socket   string `json:"socket"`
	GuestCID uint64 `json:"guest_cid"`
	UDS      string `json:"uds,omitempty"`
}

// fullConfig is a daemon config with the sections harness_test.go's
// daemonConfig does not carry.
type fullConfig struct {
	daemonConfig
	Vsock []vsockSpec `json:"vsock,omitempty"`
}

// daemonProc is a `falconnic serve` that a test can kill and start again
// with the same config file, as an operator restarting a crashed daemon
// would.
type daemonProc struct {
	t       *testing.T
	dir     string
	config  string
	control string
	sockets []string // vhost-user sockets the daemon serves
	cmd     *exec.Cmd
	done    chan struct{}
	out     *syncBuffer
	runs    int
}

// newDaemonProc writes cfg to dir/daemon.json and starts the daemon; it
// returns once every NIC and vsock socket is there.
func newDaemonProc(t *testing.T, dir string, cfg fullConfig) *daemonProc {
	t.Helper()
	falconnic(t)
	b, _ := json.MarshalIndent(cfg, "", "  ")
	d := &daemonProc{t: t, dir: dir, config: filepath.Join(dir, "daemon.json"),
		control: filepath.Join(dir, cfg.Control), out: &syncBuffer{}}
	if err := os.WriteFile(d.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range cfg.NICs {
		d.sockets = append(d.sockets, filepath.Join(dir, n.Socket))
	}
	for _, v := range cfg.Vsock {
		d.sockets = append(d.sockets, filepath.Join(dir, v.Socket))
		if v.UDS != "" {
			d.sockets = append(d.sockets, filepath.Join(dir, v.UDS))
		}
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("daemon %s log (%d runs):\n%s", d.config, d.runs, d.out.String())
		}
	})
	d.start()
	return d
}

// start runs the daemon and waits until each of its sockets exists. After
// a SIGKILL the old socket files are still there, and a new socket may even
// get the old one's inode, so start removes them first (no daemon runs now):
// existence then means the new daemon listens.
func (d *daemonProc) start() {
	d.t.Helper()
	for _, s := range d.sockets {
		if fi, err := os.Lstat(s); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(s)
		}
	}
	d.runs++
	fmt.Fprintf(d.out, "=== run %d\n", d.runs)
	d.cmd = exec.Command(binPath, "serve", "--config", d.config)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	done := make(chan struct{})
	d.done = done
	cmd := d.cmd
	go func() { cmd.Wait(); close(done) }()
	deadline := time.After(30 * time.Second)
	for {
		fresh := true
		for _, s := range d.sockets {
			fi, err := os.Stat(s)
			if err != nil || fi.Mode()&os.ModeSocket == 0 {
				fresh = false
			}
		}
		if fresh {
			return
		}
		select {
		case <-done:
			d.t.Fatalf("falconnic serve exited:\n%s", d.out.String())
		case <-deadline:
			d.t.Fatalf("daemon sockets did not appear in 30s:\n%s", d.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill ends the daemon with SIGKILL: no cleanup, sockets left behind,
// QEMU's connections simply drop.
func (d *daemonProc) kill() {
	d.t.Helper()
	d.cmd.Process.Kill()
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.t.Fatal("daemon did not die after SIGKILL")
	}
}

// stop ends the daemon gracefully if it runs.
func (d *daemonProc) stop() {
	if d.cmd == nil {
		return
	}
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
}

// status asks the running daemon for its status.
func (d *daemonProc) status() (device.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var st device.Status
	err := control.Call(ctx, d.control, "status", nil, &st)
	return st, err
}

// nic returns NIC name's report from st.
func nicReport(st device.Status, name string) (device.NICReport, bool) {
	for _, n := range st.NICs {
		if n.Name == name {
			return n, true
		}
	}
	return device.NICReport{}, false
}

// nicCounters returns a NIC's own counters (Ethernet function and
// "vhost."-prefixed back-end counters) from its report.
func nicCounters(t *testing.T, r device.NICReport) map[string]uint64 {
	t.Helper()
	var ns ether.Status
	if err := json.Unmarshal(r.Device, &ns); err != nil {
		t.Fatalf("NIC %s status: %v\n%s", r.Name, err, r.Device)
	}
	return ns.Counters
}

// xferRun is a TCP transfer between two guests that runs in the
// background: start it, watch it, then wait for its verdict.
type xferRun struct {
	from, to   *vm
	n          int
	cancel     context.CancelFunc
	recvDone   chan error
	sendDone   chan error
	recvOut    bytes.Buffer
	recvErr    syncBuffer
	sent       string
	started    time.Time
	sendFinish time.Time
}

// startTransfer starts `xfer recv` on to, waits until it listens, then
// starts `xfer send -n n` on from; both run through the agents'
// virtio-serial ports.
func startTransfer(t *testing.T, from, to *vm, toIP string, n int) *xferRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	x := &xferRun{from: from, to: to, n: n, cancel: cancel, recvDone: make(chan error, 1), sendDone: make(chan error, 1)}
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binPath, "vm", "exec", to.name, "--state", to.state, "--via", "serial", "--", "xfer", "recv", "-l", ":5001")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = &x.recvOut, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			x.recvErr.Write([]byte(sc.Text() + "\n"))
			if !seen && strings.Contains(sc.Text(), "listening on") {
				seen = true
				close(listening)
			}
		}
	}()
	go func() { err := cmd.Wait(); pw.Close(); x.recvDone <- err }()
	select {
	case <-listening:
	case err := <-x.recvDone:
		t.Fatalf("xfer recv on %s ended before listening: %v\n%s", to.name, err, x.recvErr.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("xfer recv on %s not listening after 5 minutes:\n%s", to.name, x.recvErr.String())
	}
	x.started = time.Now()
	go func() {
		out, err := from.execVia(ctx, "serial", "xfer", "send", "-n", fmt.Sprint(n), toIP+":5001")
		x.sent, x.sendFinish = out, time.Now()
		x.sendDone <- err
	}()
	return x
}

// finished reports whether the receiver has ended (successfully or not).
func (x *xferRun) finished() bool {
	select {
	case err := <-x.recvDone:
		x.recvDone <- err
		return true
	default:
		return false
	}
}

// wait waits for both ends and checks that the receiver got exactly the n
// bytes the sender sent, with the same SHA-256.
func (x *xferRun) wait(t *testing.T) {
	t.Helper()
	defer x.cancel()
	if err := <-x.sendDone; err != nil {
		t.Fatalf("xfer send on %s: %v\n%s", x.from.name, err, x.sent)
	}
	if err := <-x.recvDone; err != nil {
		t.Fatalf("xfer recv on %s: %v\n%s%s", x.to.name, err, x.recvOut.String(), x.recvErr.String())
	}
	sent, got := x.sent, x.recvOut.String()
	s, g := xferLine.FindStringSubmatch(sent), xferLine.FindStringSubmatch(got)
	if s == nil || g == nil {
		t.Fatalf("xfer output not understood:\nsend: %s\nrecv: %s", sent, got)
	}
	if s[1] != fmt.Sprint(x.n) || g[1] != s[1] || g[2] != s[2] {
		t.Fatalf("transfer %s → %s corrupted:\nsend: %s\nrecv: %s", x.from.name, x.to.name, sent, got)
	}
	t.Logf("transfer %s → %s: %s bytes, sha256 %s…, %.1fs end to end, %s Mbit/s (receiver)",
		x.from.name, x.to.name, g[1], g[2][:16], x.sendFinish.Sub(x.started).Seconds(), g[3])
}

// execVia runs a command in the guest through the agent transport via
// (serial or vsock) and returns its standard output, or its output and
// error.
func (v *vm) execVia(ctx context.Context, via string, args ...string) (string, error) {
	all := append([]string{"vm", "exec", v.name, "--state", v.state, "--via", via, "--"}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binPath, all...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}
