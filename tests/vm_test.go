package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The baseline link without falconnic: QEMU's -netdev stream on a unix
// socket between two guests.
func TestTwoVMsOverAStreamLinkPingAndTransfer(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	state := stateDir(t)
	link := filepath.Join(state, "link.sock")
	a := boot(t, state, "A", "--net-stream", link+",ip=10.0.0.1/24,server=on")
	b := boot(t, state, "B", "--net-stream", link+",ip=10.0.0.2/24,server=off")
	ping(t, a, "10.0.0.2")
	ping(t, b, "10.0.0.1")
	transfer(t, a, b, "10.0.0.2", transferBytes())
}

// Two guests on one daemon: the daemon's switch forwards between its NICs.
func TestTwoVMsOnOneDaemonPingAndTransfer(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	state := stateDir(t)
	startDaemon(t, state, daemonConfig{
		Control: "control.sock",
		NICs: []nicSpec{
			{Name: "a0", Socket: "a0.sock", MAC: "52:54:00:fa:00:0a"},
			{Name: "b0", Socket: "b0.sock", MAC: "52:54:00:fa:00:0b"},
		},
	})
	a := boot(t, state, "A", "--nic", filepath.Join(state, "a0.sock")+",mac=52:54:00:fa:00:0a,ip=10.0.0.1/24")
	b := boot(t, state, "B", "--nic", filepath.Join(state, "b0.sock")+",mac=52:54:00:fa:00:0b,ip=10.0.0.2/24")
	ping(t, a, "10.0.0.2")
	transfer(t, a, b, "10.0.0.2", transferBytes())
}

// Two guests on two daemons joined by the UDP fabric on loopback.
func TestTwoVMsOnTwoDaemonsOverTheFabric(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	state := stateDir(t)
	d1, d2 := filepath.Join(state, "d1"), filepath.Join(state, "d2")
	for _, d := range []string{d1, d2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p1, p2 := freeUDPPort(t), freeUDPPort(t)
	key := fabricKey(t, state)
	startDaemon(t, d1, daemonConfig{
		Control: "control.sock",
		NICs:    []nicSpec{{Name: "a0", Socket: "a0.sock", MAC: "52:54:00:fb:00:0a"}},
		Fabric:  &fabricSpec{Listen: p1, Peers: []string{p2}, KeyFile: key},
	})
	startDaemon(t, d2, daemonConfig{
		Control: "control.sock",
		NICs:    []nicSpec{{Name: "b0", Socket: "b0.sock", MAC: "52:54:00:fb:00:0b"}},
		Fabric:  &fabricSpec{Listen: p2, Peers: []string{p1}, KeyFile: key},
	})
	a := boot(t, state, "A", "--nic", filepath.Join(d1, "a0.sock")+",mac=52:54:00:fb:00:0a,ip=10.0.0.1/24")
	b := boot(t, state, "B", "--nic", filepath.Join(d2, "b0.sock")+",mac=52:54:00:fb:00:0b,ip=10.0.0.2/24")
	ping(t, a, "10.0.0.2")
	transfer(t, a, b, "10.0.0.2", transferBytes())
}

// Bad input gets a one-line error and a non-zero exit, without a VM.
func TestVMCommandsRejectBadInput(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	bin := falconnic(t)
	state := stateDir(t)
	emptyCache := t.TempDir()
	brokenCache := t.TempDir()
	os.MkdirAll(filepath.Join(brokenCache, "images", "x"), 0o755)
	os.WriteFile(filepath.Join(brokenCache, "images", "latest"), []byte("x\n"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing NIC socket", []string{"vm", "run", "--name", "A", "--state", state, "--nic", "/nonexistent/n0.sock"}, "does not exist"},
		{"missing stream peer", []string{"vm", "run", "--name", "A", "--state", state, "--net-stream", "/nonexistent/l.sock,server=off"}, "does not exist"},
		{"unknown VM", []string{"vm", "exec", "nosuchvm", "--state", state, "--", "true"}, "unknown VM"},
		{"stop unknown VM", []string{"vm", "stop", "nosuchvm", "--state", state}, "unknown VM"},
		{"no image", []string{"vm", "run", "--name", "A", "--state", state, "--cache", emptyCache}, "image build"},
		{"broken image cache", []string{"vm", "run", "--name", "A", "--state", state, "--cache", brokenCache}, "broken image"},
		{"bad name", []string{"vm", "run", "--name", "a/b", "--state", state}, "name"},
		{"bad memory", []string{"vm", "run", "--name", "A", "--state", state, "--mem", "lots"}, "memory"},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(out))
		if err == nil {
			t.Errorf("%s: succeeded:\n%s", c.name, msg)
			continue
		}
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, msg, c.want)
		}
		if strings.Count(msg, "\n") > 0 {
			t.Errorf("%s: error is not one line:\n%s", c.name, msg)
		}
	}
}

// A command's output and exit status come back through the agent, and a
// VM started without a command can be listed and stopped.
func TestVMRunExecListStop(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	bin := falconnic(t)
	state := stateDir(t)
	out, err := exec.Command(bin, "vm", "run", "--name", "R", "--state", state, "--", "sh", "-c", "hostname; echo to-stderr >&2; exit 7").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "R\n") || !strings.Contains(string(out), "to-stderr") || !strings.Contains(string(out), "status 7") {
		t.Fatalf("vm run -- CMD: err %v, output:\n%s", err, out)
	}
	v := boot(t, state, "S")
	if got := v.exec(t, "cat", "/proc/sys/net/ipv6/conf/default/accept_dad"); strings.TrimSpace(got) != "0" {
		t.Errorf("accept_dad = %q, want 0", got)
	}
	mods := v.exec(t, "cat", "/proc/modules")
	for _, m := range []string{"virtio_net", "virtio_console", "ib_uverbs", "crc32_generic", "vmw_vsock_virtio_transport", "nvme"} {
		if !strings.Contains(mods, "\n"+m+" ") && !strings.HasPrefix(mods, m+" ") {
			t.Errorf("module %s not loaded:\n%s", m, mods)
		}
	}
	// A command past its deadline fails with a stall report: the guest's
	// view over the diagnosis port (the stalled exec holds the agent's
	// first port), QEMU's threads and its virtio queues through QMP.
	out, err = exec.Command(bin, "vm", "exec", "S", "--state", state, "--timeout", "3s", "--", "sleep", "60").CombinedOutput()
	for _, want := range []string{"gave no answer within 3s", "== guest (diagnosis port)", "-- interrupts 2 s later", "(sleep)",
		"== QEMU S (pid", "CPU 0/TCG", "info virtio-queue-status", "virtio-serial",
		"-- blk-mq state", "guest ring words: avail.flags", "== QEMU CPU samples", " HLT="} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("vm exec past its deadline: err %v, no %q in:\n%s", err, want, out)
		}
	}
	if !strings.Contains(string(out), "no answer within the exec's deadline") {
		t.Fatalf("vm exec past its deadline does not say so:\n%s", out)
	}
	ls, err := exec.Command(bin, "vm", "ls", "--state", state).CombinedOutput()
	if err != nil || !strings.Contains(string(ls), "S ") || !strings.Contains(string(ls), "running") {
		t.Fatalf("vm ls: %v\n%s", err, ls)
	}
	if out, err := exec.Command(bin, "vm", "stop", "S", "--state", state).CombinedOutput(); err != nil {
		t.Fatalf("vm stop: %v\n%s", err, out)
	}
	select {
	case <-v.done:
	case <-timeAfter(30):
		t.Fatal("vm run did not end after vm stop")
	}
	ls, _ = exec.Command(bin, "vm", "ls", "--state", state).CombinedOutput()
	if !strings.Contains(string(ls), "stopped") {
		t.Fatalf("vm ls after stop:\n%s", ls)
	}
	if out, err := exec.Command(bin, "vm", "stop", "S", "--state", state).CombinedOutput(); err != nil {
		t.Fatalf("vm stop of a stopped VM: %v\n%s", err, out)
	}
	ls, _ = exec.Command(bin, "vm", "ls", "--state", state).CombinedOutput()
	if strings.Contains(string(ls), "S ") {
		t.Fatalf("vm ls still lists S after it was forgotten:\n%s", ls)
	}
}

var bwLine = regexp.MustCompile(`(?m)^\s*65536\s+1000\s+([0-9.]+)\s+([0-9.]+)`)

// The Soft-RoCE baseline (README, Measured): rdma_rxe on each guest's
// eth0 over the stream link, and perftest's ib_write_bw between them. It
// proves the image's rdma-core, providers and perftest work (full mode).
func TestSoftRoCEBaselineOverAStreamLink(t *testing.T) {
	requireE2E(t)
	if mode != "full" {
		t.Skip("Soft-RoCE baseline runs with FALCONNIC_E2E=full")
	}
	guestImage(t)
	state := stateDir(t)
	link := filepath.Join(state, "link.sock")
	a := boot(t, state, "A", "--net-stream", link+",ip=10.0.0.1/24,server=on")
	b := boot(t, state, "B", "--net-stream", link+",ip=10.0.0.2/24,server=off")
	for _, v := range []*vm{a, b} {
		out := v.exec(t, "sh", "-c", "rmmod falconnic; while read -r m; do insmod \"$m\" || exit 1; done < /etc/falconnic/modules.staged && rdma link add rxe0 type rxe netdev eth0 && ibv_devinfo -d rxe0")
		if !strings.Contains(out, "PORT_ACTIVE") {
			t.Fatalf("%s: rxe0 not active:\n%s", v.name, out)
		}
	}
	srv := make(chan string, 1)
	go func() {
		out, err := b.tryExec(context.Background(), "sh", "-c", "ib_write_bw -n 1000 2>&1")
		if err != nil {
			out += "\n" + err.Error()
		}
		srv <- out
	}()
	var out string
	var m []string
	for try := 0; try < 20 && m == nil; try++ { // the server may not listen yet
		o, err := a.tryExec(context.Background(), "sh", "-c", "ib_write_bw -n 1000 10.0.0.2 2>&1")
		out += fmt.Sprintf("--- try %d (%v):\n%s", try, err, o)
		m = bwLine.FindStringSubmatch(o)
		if m == nil {
			time.Sleep(time.Second)
		}
	}
	if m == nil {
		t.Fatalf("ib_write_bw client output not understood:\n%s\nserver:\n%s", out, <-srv)
	}
	t.Logf("Soft-RoCE ib_write_bw 64 KiB: peak %s MB/s, average %s MB/s", m[1], m[2])
	<-srv
}
