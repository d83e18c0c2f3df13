package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// QEMUBinary is the QEMU program started for guests.
var QEMUBinary = "qemu-system-x86_64"

// VM errors.
var (
	ErrUnknownVM = errors.New("unknown VM")
	ErrRunning   = errors.New("VM already running")
	ErrNotReady  = errors.New("VM not ready")
)

// DefaultStateDir is where VM state directories live: $FALCONNIC_STATE,
// else $XDG_RUNTIME_DIR/falconnic/vms, else /tmp/falconnic-UID/vms. It is
// kept short: unix socket paths are limited to 107 bytes.
func DefaultStateDir() string {
	if d := os.Getenv("FALCONNIC_STATE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "falconnic", "vms")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("falconnic-%d", os.Getuid()), "vms")
}

// VM is one guest's state directory:
//
//	DIR/NAME/qemu.pid     QEMU's pid
//	DIR/NAME/console.log  the serial console
//	DIR/NAME/qemu.log     QEMU's own output
//	DIR/NAME/agent.sock   the agent's virtio-serial port
//	DIR/NAME/diag.sock    the agent's diagnosis port
//	DIR/NAME/qmp.sock     QEMU's QMP monitor
//	DIR/NAME/machine.json the Machine it was started with
type VM struct {
	Name string
	Dir  string
	cmd  *exec.Cmd // set when this process started it
	done chan struct{}
}

// ConsoleLog is the guest's serial console file.
func (v *VM) ConsoleLog() string { return filepath.Join(v.Dir, "console.log") }

// QEMULog holds QEMU's command line and its own output.
func (v *VM) QEMULog() string { return filepath.Join(v.Dir, "qemu.log") }

// AgentSock is the host end of the agent's virtio-serial port.
func (v *VM) AgentSock() string { return filepath.Join(v.Dir, "agent.sock") }

// DiagSock is the host end of the agent's diagnosis port.
func (v *VM) DiagSock() string { return filepath.Join(v.Dir, "diag.sock") }

// QMPSock is QEMU's QMP monitor socket.
func (v *VM) QMPSock() string { return filepath.Join(v.Dir, "qmp.sock") }

// PidFile holds QEMU's pid.
func (v *VM) PidFile() string { return filepath.Join(v.Dir, "qemu.pid") }
func (v *VM) machineFile() string {
	return filepath.Join(v.Dir, "machine.json")
}

// Pid returns QEMU's pid if it is running.
func (v *VM) Pid() (int, bool) {
	b, err := os.ReadFile(v.PidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, isQEMU(pid)
}

// isQEMU reports whether pid is alive and is a QEMU (not a reused pid).
func isQEMU(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(st, ')'); i >= 0 && len(st) > i+2 && st[i+2] == 'Z' {
			return false // a zombie: exited, not reaped yet
		}
	}
	return bytes.Contains(b, []byte("qemu"))
}

// Machine returns the Machine the VM was started with.
func (v *VM) Machine() (Machine, error) {
	var m Machine
	b, err := os.ReadFile(v.machineFile())
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

// Lookup returns the VM called name under stateDir, running or not.
func Lookup(stateDir, name string) (*VM, error) {
	if !validName(name) {
		return nil, fmt.Errorf("%w %q", ErrUnknownVM, name)
	}
	v := &VM{Name: name, Dir: filepath.Join(stateDir, name)}
	if _, err := os.Stat(v.machineFile()); err != nil {
		return nil, fmt.Errorf("%w %q (no state in %s)", ErrUnknownVM, name, stateDir)
	}
	return v, nil
}

// List returns the VMs under stateDir, sorted by name.
func List(stateDir string) ([]*VM, error) {
	es, err := os.ReadDir(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var vms []*VM
	for _, e := range es {
		if v, err := Lookup(stateDir, e.Name()); err == nil {
			vms = append(vms, v)
		}
	}
	sort.Slice(vms, func(i, j int) bool { return vms[i].Name < vms[j].Name })
	return vms, nil
}

// Start checks m's inputs, makes the state directory and starts QEMU in
// its own process group. m's ConsoleLog, AgentSock and PidFile are set to
// the state directory's.
func Start(stateDir string, m Machine) (*VM, error) {
	if !validName(m.Name) {
		return nil, fmt.Errorf("VM name %q: use 1-32 letters, digits, '-' or '_'", m.Name)
	}
	qemu, err := exec.LookPath(QEMUBinary)
	if err != nil {
		return nil, fmt.Errorf("%s not found: install qemu-system-x86 (scripts/deps.sh)", QEMUBinary)
	}
	for what, p := range map[string]string{"kernel": m.Kernel, "initramfs": m.Initrd} {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("guest %s %s missing: run `falconnic image build`", what, p)
		}
	}
	for i, n := range m.NICs {
		if n.VhostUser != "" && !isSocket(n.VhostUser) {
			return nil, fmt.Errorf("NIC %d: vhost-user socket %s does not exist (is the daemon running?)", i, n.VhostUser)
		}
		if n.Stream != "" && !n.StreamServer && !isSocket(n.Stream) {
			return nil, fmt.Errorf("NIC %d: stream socket %s does not exist (start the listening VM first)", i, n.Stream)
		}
	}
	for i, d := range m.Disks {
		if d.VhostUserBlk != "" && !isSocket(d.VhostUserBlk) {
			return nil, fmt.Errorf("disk %d: vhost-user-blk socket %s does not exist (is the daemon serving this disk?)", i, d.VhostUserBlk)
		}
		if d.File != "" {
			if fi, err := os.Stat(d.File); err != nil || !(fi.Mode().IsRegular() || fi.Mode()&os.ModeDevice != 0) {
				return nil, fmt.Errorf("disk %d: %s is not a file or block device", i, d.File)
			}
		}
	}
	if m.Vsock != nil && !isSocket(m.Vsock.VhostUser) {
		return nil, fmt.Errorf("vsock: vhost-user socket %s does not exist (is the daemon running?)", m.Vsock.VhostUser)
	}
	v := &VM{Name: m.Name, Dir: filepath.Join(stateDir, m.Name)}
	if pid, alive := v.Pid(); alive {
		return nil, fmt.Errorf("%w: %s (pid %d)", ErrRunning, m.Name, pid)
	}
	os.RemoveAll(v.Dir)
	if err := os.MkdirAll(v.Dir, 0o755); err != nil {
		return nil, err
	}
	if n := len(v.AgentSock()); n > 100 {
		return nil, fmt.Errorf("state directory %s is too deep for unix sockets (%d bytes)", stateDir, n)
	}
	m.ConsoleLog, m.AgentSock, m.DiagSock, m.QMPSock, m.PidFile = v.ConsoleLog(), v.AgentSock(), v.DiagSock(), v.QMPSock(), ""
	args, err := m.Args()
	if err != nil {
		return nil, err
	}
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(v.machineFile(), mb, 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(v.QEMULog())
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "%s %s\n", qemu, strings.Join(args, " "))
	cmd := exec.Command(qemu, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// QEMU lives in its own process group (a terminal's Ctrl-C reaches only
	// us; we stop it) and dies with us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting QEMU: %w", err)
	}
	v.cmd, v.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(v.done) }()
	if err := os.WriteFile(v.PidFile(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		v.Stop()
		return nil, err
	}
	return v, nil
}

func isSocket(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// Exited is closed when a VM this process started exits (nil otherwise).
func (v *VM) Exited() <-chan struct{} { return v.done }

// WaitReady waits until the guest prints ReadyMarker on its console, QEMU
// exits, timeout passes or ctx ends; errors carry the console's tail.
func (v *VM) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(v.ConsoleLog()); err == nil && bytes.Contains(b, []byte(ReadyMarker)) {
			return nil
		}
		if !v.alive() {
			return fmt.Errorf("%w: QEMU for %s exited%s\n%s", ErrNotReady, v.Name, v.exitStatus(), v.tails())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%w: %s not ready after %v\n%s", ErrNotReady, v.Name, timeout, v.tails())
		case <-v.done:
		case <-tick.C:
		}
	}
}

// alive reports whether QEMU runs: by its process when this process
// started it, else by the pid file.
func (v *VM) alive() bool {
	if v.done != nil {
		select {
		case <-v.done:
			return false
		default:
			return true
		}
	}
	_, ok := v.Pid()
	return ok
}

// exitStatus describes how QEMU ended, when this process started it.
func (v *VM) exitStatus() string {
	if v.done == nil {
		return ""
	}
	select {
	case <-v.done:
		return " (" + v.cmd.ProcessState.String() + ")"
	case <-time.After(time.Second):
		return " (still running?)"
	}
}

// tails returns the last lines of the console and QEMU logs.
func (v *VM) tails() string {
	var s strings.Builder
	for _, f := range []string{v.QEMULog(), v.ConsoleLog()} {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&s, "--- %s:\n%s\n", f, strings.Join(lines, "\n"))
	}
	return s.String()
}

// Stop terminates QEMU (SIGTERM, then SIGKILL after a grace period) and
// removes the pid file and sockets; the logs stay.
func (v *VM) Stop() error {
	pid, alive := v.Pid()
	if v.cmd != nil && v.cmd.Process != nil {
		pid, alive = v.cmd.Process.Pid, true
	}
	if alive {
		syscall.Kill(pid, syscall.SIGTERM)
		if !v.waitGone(pid, 5*time.Second) {
			syscall.Kill(pid, syscall.SIGKILL)
			v.waitGone(pid, 5*time.Second)
		}
	}
	os.Remove(v.PidFile())
	os.Remove(v.AgentSock())
	os.Remove(v.DiagSock())
	os.Remove(v.QMPSock())
	return nil
}

// waitGone waits until pid is gone or d passes.
func (v *VM) waitGone(pid int, d time.Duration) bool {
	if v.done != nil {
		select {
		case <-v.done:
			return true
		case <-time.After(d):
			return false
		}
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if !isQEMU(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
