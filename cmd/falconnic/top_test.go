package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"falconnic/device/fabric"
)

// needTool returns the path of a program the test needs: skipped on a
// developer's machine without it, a failure in CI (CI set), where
// scripts/deps.sh installs it.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (scripts/deps.sh installs it): %v", name, err)
	}
	t.Skipf("%s is not installed (scripts/deps.sh installs it)", name)
	return ""
}

// fakePeer plays another daemon on the fabric: it sends datagrams to the
// daemon at dst from its own socket (a configured peer) until ctx is done.
func fakePeer(ctx context.Context, t *testing.T, c *net.UDPConn, dst string, nicMAC net.HardwareAddr) {
	to, err := net.ResolveUDPAddr("udp", dst)
	if err != nil {
		t.Error(err)
		return
	}
	frame := make([]byte, 64)
	copy(frame[0:6], nicMAC)
	copy(frame[6:12], []byte{0x02, 0, 0, 0, 0, 9})
	frame[12], frame[13] = 0x08, 0x00
	good := make([]byte, fabric.HeaderLen+len(frame))
	fabric.Encode(good, fabric.KindEthernet, 1, len(frame))
	copy(good[fabric.HeaderLen:], frame)
	bad := append([]byte(nil), good...)
	bad[0] = 0 // wrong magic: a drop by cause
	for i := 0; ctx.Err() == nil; i++ {
		c.WriteTo(good, to)
		if i%4 == 0 {
			c.WriteTo(bad, to)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTopUnderTmux: `falconnic top` in a terminal (tmux) shows the NICs,
// and while a peer sends over the fabric the rates and drop counts move
// from one refresh to the next; Ctrl-C ends it with status 0.
func TestTopUnderTmux(t *testing.T) {
	tmux := needTool(t, "tmux")
	dir := t.TempDir()
	bin := filepath.Join(dir, "falconnic")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	listen := freeUDP(t)
	cfg := fmt.Sprintf(`{
  "control": "ctl.sock",
  "nics": [{"name": "n0", "socket": "n0.sock", "mac": "52:54:00:12:34:56"},
           {"name": "n1", "socket": "n1.sock", "mac": "52:54:00:12:34:57"}],
  "fabric": {"listen": %q, "peers": [%q], "insecure": true}
}`, listen, peer.LocalAddr().String())
	sdir, _ := startServe(t, cfg)
	sock := filepath.Join(sdir, "ctl.sock")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fakePeer(ctx, t, peer, listen, net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56})

	session := fmt.Sprintf("falconnic-top-%d", os.Getpid())
	tm := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-L", session}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	shell := fmt.Sprintf("%s top --socket %s --interval 300ms; echo TOP-EXIT=$?; sleep 60", bin, sock)
	tm("new-session", "-d", "-s", session, "-x", "160", "-y", "40", shell)
	defer exec.Command(tmux, "-L", session, "kill-server").Run()

	// Two screens a few refreshes apart (bounded waits for a loaded host).
	screen := func() string { return tm("capture-pane", "-p", "-t", session) }
	ethRx := regexp.MustCompile(`(?m)^\s*n0\s+(\d+)`)
	var first, second string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		s := screen()
		if m := ethRx.FindStringSubmatch(s); m != nil && m[1] != "0" && strings.Contains(s, "fabric rx_bad_magic") {
			if first == "" {
				first = s
				continue
			}
			if s != first {
				second = s
				break
			}
		}
	}
	if second == "" {
		t.Fatalf("top never showed moving numbers; screen:\n%s", screen())
	}
	for _, want := range []string{"falconnic top", "NIC", "ETH-RX/s", "n1", "CONNS", "DROPS by cause", "(no connections)"} {
		if !strings.Contains(second, want) {
			t.Errorf("screen lacks %q:\n%s", want, second)
		}
	}
	t.Logf("top screen:\n%s", second)
	cancel()
	tm("send-keys", "-t", session, "C-c")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if s := screen(); strings.Contains(s, "TOP-EXIT=") {
			if !strings.Contains(s, "TOP-EXIT=0") {
				t.Errorf("top exited with an error:\n%s", s)
			}
			return
		}
	}
	t.Fatalf("top did not stop on Ctrl-C:\n%s", screen())
}

func freeUDP(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// TestServeMetricsPassPromtool: `serve --metrics ADDR` answers /metrics
// with what promtool accepts, two NICs and an NVMe disk in the daemon.
func TestServeMetricsPassPromtool(t *testing.T) {
	promtool := needTool(t, "promtool")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := `{
  "control": "ctl.sock",
  "nics": [{"name": "host", "socket": "host.sock", "mac": "52:54:00:00:00:01"},
           {"name": "store", "socket": "store.sock", "mac": "52:54:00:00:00:02"}],
  "nvme": {"namespaces": [{"nic": "store", "nsid": 1, "backing": "memory", "size": 4194304}],
           "disks": [{"name": "d0", "socket": "d0.sock", "nic": "host", "target": "store", "nsid": 1}]}
}`
	startServe(t, cfg, "--metrics", addr)
	var body []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			body = out
			break
		}
	}
	if body == nil {
		t.Fatal("no answer at /metrics")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	for _, want := range []string{`falconnic_falcon_connections{nic="host",protocol="nvme"} 1`, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
