package tests

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The guest agent over the daemon's vhost-user-vsock device: `vm run
// --vsock SOCK,uds=BRIDGE` attaches it, and `vm exec --via vsock` goes
// through the daemon's hybrid bridge (CONNECT 1024) to the agent's vsock
// listener. The command's output and exit status come back, and
// falconnic exits with the guest command's status. Runs in ci and full
// (one guest, no NIC: cheap).
func TestAgentOverTheDaemonsVsock(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	state := stateDir(t)
	d := newDaemonProc(t, state, fullConfig{
		daemonConfig: daemonConfig{Control: "control.sock"},
		Vsock:        []vsockSpec{{Name: "vs0", Socket: "vs0.sock", GuestCID: 3, UDS: "vs0.uds"}},
	})
	v := boot(t, state, "V", "--vsock", filepath.Join(state, "vs0.sock")+",uds="+filepath.Join(state, "vs0.uds"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	viaVsock, err := v.execVia(ctx, "vsock", "uname", "-a")
	if err != nil {
		t.Fatalf("uname -a over vsock: %v\n%s", err, viaVsock)
	}
	viaSerial, err := v.execVia(ctx, "serial", "uname", "-a")
	if err != nil {
		t.Fatalf("uname -a over virtio-serial: %v\n%s", err, viaSerial)
	}
	if !strings.HasPrefix(viaVsock, "Linux V ") || viaVsock != viaSerial {
		t.Fatalf("uname -a over vsock = %q, over virtio-serial = %q; want the same \"Linux V ...\" line", viaVsock, viaSerial)
	}
	t.Logf("over vsock: %s", strings.TrimSpace(viaVsock))

	// A failing command: its stderr and status come through, and
	// falconnic's own exit code is the guest command's.
	cmd := exec.CommandContext(ctx, binPath, "vm", "exec", "V", "--state", state, "--via", "vsock", "--",
		"sh", "-c", "echo out; echo err >&2; exit 3")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit 3 over vsock: falconnic ended with %v, want exit status 3:\n%s", err, out)
	}
	if !strings.Contains(string(out), "out\n") || !strings.Contains(string(out), "err\n") || !strings.Contains(string(out), "status 3") {
		t.Fatalf("exit 3 over vsock: output lacks the command's output or status:\n%s", out)
	}

	// Without --via, a VM with a vsock bridge uses it; several sessions in
	// a row each get their own vsock connection.
	for i := 0; i < 3; i++ {
		got := v.exec(t, "hostname")
		if strings.TrimSpace(got) != "V" {
			t.Fatalf("hostname over the default transport = %q", got)
		}
	}
	// Five sessions went over vsock (uname, exit 3, three hostnames), the
	// virtio-serial one did not.
	vs := vsockStatus(t, d, "vs0")
	if got := vs.Counters["host_connects"]; got != 5 {
		t.Fatalf("vs0 counted %d host connects, want 5 (the vsock sessions): %+v", got, vs.Counters)
	}
	t.Logf("vs0: %d host connects, %d bytes to the guest, %d from it", vs.Counters["host_connects"], vs.Counters["bytes_to_guest"], vs.Counters["bytes_to_host"])
}

// vsockReport is the part of a vsock device's status the tests read.
type vsockReport struct {
	Name     string            `json:"name"`
	Counters map[string]uint64 `json:"counters"`
	Session  struct {
		State      string `json:"state"`
		MemRegions int    `json:"mem_regions"`
	} `json:"session"`
}

// vsockStatus returns vsock device name's status from the daemon.
func vsockStatus(t *testing.T, d *daemonProc, name string) vsockReport {
	t.Helper()
	st, err := d.status()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range st.Vsock {
		b, _ := json.Marshal(v)
		var r vsockReport
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("vsock status: %v\n%s", err, b)
		}
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("daemon status has no vsock device %s: %v", name, st.Vsock)
	return vsockReport{}
}
