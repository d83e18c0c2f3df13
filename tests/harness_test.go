package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"falconnic/psp/cmauth"
)

// mode is FALCONNIC_E2E: "" (skip), "ci" or "full".
var mode = os.Getenv("FALCONNIC_E2E")

func requireE2E(t *testing.T) {
	t.Helper()
	if mode == "" {
		t.Skip("end-to-end VM test: set FALCONNIC_E2E=ci or full (scripts/test.sh does) to boot QEMU guests")
	}
}

var (
	buildOnce sync.Once
	binPath   string
	binErr    error
	binDir    string

	imageOnce sync.Once
	imageErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// falconnic builds the binary once per test run.
func falconnic(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "falconnic-e2e-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "falconnic")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/falconnic")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// guestImage builds (or finds cached) the guest image once per test run.
func guestImage(t *testing.T) {
	t.Helper()
	bin := falconnic(t)
	imageOnce.Do(func() {
		cmd := exec.Command(bin, "image", "build")
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		t.Logf("image build:\n%s", out)
		if err != nil {
			imageErr = fmt.Errorf("image build: %v", err)
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
}

// stateDir is a short per-test directory for VM state (unix socket paths
// must stay under 108 bytes).
func stateDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "fn-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, d)
		}
		os.RemoveAll(d)
	})
	return d
}

// dumpLogs prints the tail of every console and QEMU log under dir.
func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("--- %s:\n%s", l, b)
	}
}

// vm is a guest started with `falconnic vm run` (no command: it keeps
// running until the test ends).
type vm struct {
	name, state string
	cmd         *exec.Cmd
	done        chan struct{}
	out         *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bootTimeout bounds boots: about 10 s alone, much more when the two
// cores are busy with other guests or builds.
const bootTimeout = 4 * time.Minute

// boot starts VM name and returns once `vm run` reports it ready.
func boot(t *testing.T, state, name string, args ...string) *vm {
	t.Helper()
	bin := falconnic(t)
	all := append([]string{"vm", "run", "--name", name, "--state", state, "--timeout", bootTimeout.String()}, args...)
	cmd := exec.Command(bin, all...)
	v := &vm{name: name, state: state, cmd: cmd, done: make(chan struct{}), out: &syncBuffer{}}
	pr, pw := io.Pipe()
	cmd.Stdout = v.out
	cmd.Stderr = io.MultiWriter(v.out, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); pw.Close(); close(v.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-v.done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-v.done
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "ready in") {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
	}()
	if !<-ready {
		t.Fatalf("vm %s did not boot:\n%s", name, v.out.String())
	}
	t.Logf("vm %s: %s", name, strings.TrimSpace(lastLine(v.out.String())))
	return v
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// exec runs a command in the guest and returns its standard output; a
// failure fails the test with the output.
func (v *vm) exec(t *testing.T, args ...string) string {
	t.Helper()
	out, err := v.tryExec(context.Background(), args...)
	if err != nil {
		t.Fatalf("vm %s: %s: %v\n%s", v.name, strings.Join(args, " "), err, out)
	}
	return out
}

func (v *vm) tryExec(ctx context.Context, args ...string) (string, error) {
	all := append([]string{"vm", "exec", v.name, "--state", v.state, "--"}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binPath, all...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

var pingReplies = regexp.MustCompile(`(?m)^\d+ bytes from `)

// ping checks that from reaches ip: every echo of three answered.
func ping(t *testing.T, from *vm, ip string) {
	t.Helper()
	out := from.exec(t, "ping", "-c", "3", ip)
	if n := len(pingReplies.FindAllString(out, -1)); n != 3 {
		t.Fatalf("ping %s from %s: %d of 3 replies:\n%s", ip, from.name, n, out)
	}
	t.Logf("ping %s → %s:\n%s", from.name, ip, strings.TrimSpace(out))
}

var xferLine = regexp.MustCompile(`bytes=(\d+) sha256=([0-9a-f]{64}) Mbit/s=([0-9.]+)`)

// transfer sends n deterministic bytes over TCP from one guest to another
// and checks that the receiver's SHA-256 equals the sender's. The sender
// starts once the receiver says it listens (a loaded host can take long).
func transfer(t *testing.T, from, to *vm, toIP string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "vm", "exec", to.name, "--state", to.state, "--", "xfer", "recv", "-l", ":5001")
	var stdout bytes.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = &stdout, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan struct{})
	var stderr syncBuffer
	go func() {
		sc := bufio.NewScanner(pr)
		seen := false
		for sc.Scan() {
			stderr.Write([]byte(sc.Text() + "\n"))
			if !seen && strings.Contains(sc.Text(), "listening on") {
				seen = true
				close(listening)
			}
		}
	}()
	recvDone := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); recvDone <- err }()
	select {
	case <-listening:
	case err := <-recvDone:
		t.Fatalf("xfer recv on %s ended before listening: %v\n%s", to.name, err, stderr.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("xfer recv on %s not listening after 5 minutes:\n%s", to.name, stderr.String())
	}
	sent := from.exec(t, "xfer", "send", "-n", fmt.Sprint(n), toIP+":5001")
	if err := <-recvDone; err != nil {
		t.Fatalf("xfer recv on %s: %v\n%s%s", to.name, err, stdout.String(), stderr.String())
	}
	got := stdout.String()
	s, g := xferLine.FindStringSubmatch(sent), xferLine.FindStringSubmatch(got)
	if s == nil || g == nil {
		t.Fatalf("xfer output not understood:\nsend: %s\nrecv: %s", sent, got)
	}
	if s[1] != fmt.Sprint(n) || g[1] != s[1] || g[2] != s[2] {
		t.Fatalf("transfer %s → %s corrupted:\nsend: %s\nrecv: %s", from.name, to.name, sent, got)
	}
	t.Logf("transfer %s → %s: %s bytes, sha256 %s…, %s Mbit/s (receiver)", from.name, to.name, g[1], g[2][:16], g[3])
}

// nicSpec is one NIC of a daemon config (device.Config's JSON).
type nicSpec struct {
	Name   string `json:"name"`
	Socket string `json:"socket"`
	MAC    string `json:"mac"`
}

type fabricSpec struct {
	Listen  string   `json:"listen"`
	Peers   []string `json:"peers,omitempty"`
	KeyFile string   `json:"key_file,omitempty"`
}

// fabricKey writes the deployment secret the daemons of a test share
// (mode 0600, in dir): the two-daemon tests run on a sealed fabric.
func fabricKey(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fabric.key")
	if err := cmauth.GenerateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

type daemonConfig struct {
	Control string      `json:"control"`
	NICs    []nicSpec   `json:"nics"`
	Fabric  *fabricSpec `json:"fabric,omitempty"`
}

// startDaemon runs `falconnic serve` with cfg in dir and waits until every
// NIC socket exists. A daemon whose NIC is not built yet skips the test.
func startDaemon(t *testing.T, dir string, cfg daemonConfig) {
	t.Helper()
	bin := falconnic(t)
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--config", path)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("daemon %s log:\n%s", path, out.String())
		}
	})
	deadline := time.After(30 * time.Second)
	for {
		all := true
		for _, n := range cfg.NICs {
			if fi, err := os.Stat(filepath.Join(dir, n.Socket)); err != nil || fi.Mode()&os.ModeSocket == 0 {
				all = false
			}
		}
		if all {
			return
		}
		select {
		case <-done:
			if strings.Contains(out.String(), "not in this build") {
				t.Skipf("the daemon cannot serve NICs yet: %s", strings.TrimSpace(out.String()))
			}
			t.Fatalf("falconnic serve exited:\n%s", out.String())
		case <-deadline:
			t.Fatalf("daemon NIC sockets did not appear in 30s:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freeUDPPort returns a loopback UDP port that was free a moment ago.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// transferBytes is the TCP transfer size: the 100 MB the tests promise.
func transferBytes() int {
	return 100 << 20
}

func timeAfter(seconds int) <-chan time.Time { return time.After(time.Duration(seconds) * time.Second) }
