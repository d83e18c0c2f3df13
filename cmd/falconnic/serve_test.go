package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// startServe runs `falconnic serve --config FILE` with cfg written to a temp
// dir and returns once the daemon logs that it is serving.
func startServe(t *testing.T, cfg string, extra ...string) (dir string, stop func() error) {
	t.Helper()
	dir = t.TempDir()
	path := filepath.Join(dir, "falconnic.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"serve", "--config", path}, extra...), io.Discard, pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "serving") {
				ready <- nil
				io.Copy(io.Discard, pr)
				return
			}
		}
		ready <- errors.New("serve exited before serving")
	}()
	select {
	case err := <-ready:
		if err != nil {
			cancel()
			t.Fatalf("%v: %v", err, <-done)
		}
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serve did not start")
	}
	var stopped bool
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { stop() })
	return dir, stop
}

const serveConfig = `{
  "control": "ctl.sock",
  "nics": [{"name": "n0", "socket": "n0.sock", "mac": "52:54:00:12:34:56"}],
  "fabric": {"listen": "127.0.0.1:0", "peers": ["127.0.0.1:9"], "insecure": true}
}`

func TestServeAnswersStatus(t *testing.T) {
	dir, stop := startServe(t, serveConfig, "--loss", "2.5", "--seed", "9")
	sock := filepath.Join(dir, "ctl.sock")

	var out bytes.Buffer
	if err := run(context.Background(), []string{"status", "--socket", sock}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"control " + sock, "52:54:00:12:34:56", filepath.Join(dir, "n0.sock"), "PORT", "static", "fabric", "fabric: listen 127.0.0.1:", "loss 2.5% reorder 0% seed 9", "127.0.0.1:9", "WARNING: the fabric is INSECURE"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := run(context.Background(), []string{"status", "--socket", sock, "--json"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Control string
		Switch  struct{ Ports []struct{ Name string } }
		Fabric  struct{ Peers []struct{ Addr string } }
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out.String())
	}
	if st.Control != sock || len(st.Switch.Ports) != 2 || st.Fabric.Peers[0].Addr != "127.0.0.1:9" {
		t.Errorf("--json: %+v", st)
	}

	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	for _, s := range []string{sock, filepath.Join(dir, "n0.sock")} {
		if _, err := os.Stat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket %s left after shutdown: %v", s, err)
		}
	}
}

func TestServeRejectsBadUsage(t *testing.T) {
	dir := t.TempDir()
	noFabric := filepath.Join(dir, "c.json")
	os.WriteFile(noFabric, []byte(`{"control":"ctl.sock","nics":[]}`), 0o644)
	for _, args := range [][]string{
		{"serve"},
		{"serve", "--config"},
		{"serve", "--config", noFabric, "extra"},
		{"serve", "--config", noFabric, "--loss", "3"},
		{"serve", "--config", noFabric, "--log-level", "loud"},
	} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	if err := run(context.Background(), []string{"serve", "--config", filepath.Join(dir, "missing.json")}, io.Discard, io.Discard); err == nil {
		t.Error("missing config accepted")
	}
}

func TestStatusWithoutDaemonIsOneLine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nobody.sock")
	err := run(context.Background(), []string{"status", "--socket", sock}, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("status succeeded without a daemon")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "no daemon at "+sock) {
		t.Errorf("error = %q, want one line naming the socket", msg)
	}
	// A socket file whose daemon died is reported the same way.
	os.WriteFile(sock, nil, 0o600)
	if err := run(context.Background(), []string{"status", "--socket", sock}, io.Discard, io.Discard); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("stale file: %v", err)
	}
}

func TestServeRefusesProcsOutOfRange(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	for _, bad := range []string{"-1", "257"} {
		if err := run(context.Background(), []string{"serve", "--config", "x.json", "--procs", bad}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--procs") {
			t.Fatalf("--procs %s: %v", bad, err)
		}
	}
	if runtime.GOMAXPROCS(0) != before {
		t.Fatal("a refused serve changed GOMAXPROCS")
	}
}

func TestServeProcsDefaultsToOneThreadUnlessTold(t *testing.T) {
	for _, c := range []struct {
		n    int
		env  string
		want int
	}{
		{0, "", 1},  // neither: one thread
		{0, "2", 0}, // the variable: Go applied it, serve leaves it
		{3, "", 3},  // the flag
		{3, "2", 3}, // the flag wins
	} {
		if got := serveProcs(c.n, c.env); got != c.want {
			t.Errorf("serveProcs(%d, %q) = %d, want %d", c.n, c.env, got, c.want)
		}
	}
}

func TestServeWritesItsCPUProfileWhenItStops(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "daemon.prof")
	_, stop := startServe(t, serveConfig, "--cpuprofile", prof)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is a gzipped protocol buffer.
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("%s is not a gzipped profile (%d bytes)", prof, len(b))
	}
}
