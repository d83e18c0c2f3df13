package tests

import (
	"context"
	"encoding/hex"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"falconnic/device/rdmauapi"
)

// The guest driver's side of issue 18, finding 4: a control-channel frame
// that claims to be an event of another driver instance — here EV_PORT
// "port DOWN", once with instance 0 (what the NIC was once allowed to send
// before OPEN) and once with a made-up instance — reaches the guest's
// receive path and changes nothing: falcon0's port stays ACTIVE and the
// driver counts both in rx_event_bad_instance. The attacker's frame is put
// on the path from inside the guest: tc reflects EtherType 0x88B5 frames
// from eth0's egress into its ingress while rawframe sends them (the
// switch and the NIC never forward such frames between guests, so this is
// what a frame that got past them would look like). Then the daemon is
// killed and started again: the driver finds out that the NIC lost its
// instance (keepalive), opens again, reads the port (ACTIVE) and still
// drops forged events. Runs in ci and full (one guest, about a minute).
func TestAdversarialForeignPortEventIsDropped(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	state := stateDir(t)
	const mac = "52:54:00:fe:00:0a"
	d := newDaemonProc(t, state, fullConfig{daemonConfig: daemonConfig{
		Control: "control.sock",
		NICs:    []nicSpec{{Name: "a0", Socket: "a0.sock", MAC: mac}},
	}})
	a := boot(t, state, "A", "--nic", filepath.Join(state, "a0.sock")+",mac="+mac+",ip=10.0.0.1/24")
	waitPortState(t, a, "4: ACTIVE", 90*time.Second)

	hw, _ := net.ParseMAC(mac)
	var m [6]byte
	copy(m[:], hw)
	const ibPortDown = 1
	var frames []string
	for _, inst := range []uint64{0, 0x5eed_f00d_0bad_cafe} {
		frames = append(frames, hex.EncodeToString(rdmauapi.AppendEvent(nil, m, inst, rdmauapi.OpEvPort, 1, ibPortDown, 0)))
	}

	forge := func(round string) {
		t.Helper()
		before := driverCounters(t, a)
		a.exec(t, "tc", "qdisc", "add", "dev", "eth0", "clsact")
		a.exec(t, "tc", "filter", "add", "dev", "eth0", "egress", "protocol", "0x88b5", "matchall",
			"action", "mirred", "ingress", "redirect", "dev", "eth0")
		out := a.exec(t, append([]string{"rawframe", "eth0"}, frames...)...)
		a.exec(t, "tc", "qdisc", "del", "dev", "eth0", "clsact")
		after := driverCounters(t, a)
		state := strings.TrimSpace(a.exec(t, "cat", "/sys/class/infiniband/falcon0/ports/1/state"))
		t.Logf("%s: %s; rx_event_bad_instance %d → %d, rx_event %d → %d, port %q", round, strings.TrimSpace(out),
			before["rx_event_bad_instance"], after["rx_event_bad_instance"], before["rx_event"], after["rx_event"], state)
		if got := after["rx_event_bad_instance"] - before["rx_event_bad_instance"]; got != uint64(len(frames)) {
			t.Fatalf("%s: rx_event_bad_instance grew by %d, want %d (did the forged frames reach the driver?)", round, got, len(frames))
		}
		if after["rx_event"] != before["rx_event"] {
			t.Fatalf("%s: the driver took a forged event: rx_event %d → %d", round, before["rx_event"], after["rx_event"])
		}
		if state != "4: ACTIVE" {
			t.Fatalf("%s: a forged EV_PORT moved falcon0's port to %q", round, state)
		}
	}
	forge("before restart")

	d.kill()
	time.Sleep(outage)
	d.start()
	waitSessionsRunning(t, d, reconnectBound, "a0")
	// The driver's keepalive finds the restarted NIC without our instance,
	// flushes, opens again and reads the port.
	deadline := time.Now().Add(time.Minute)
	for driverCounters(t, a)["nic_lost"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the driver did not notice the daemon restart in a minute: %v", driverCounters(t, a))
		}
		time.Sleep(time.Second)
	}
	waitPortState(t, a, "4: ACTIVE", time.Minute)
	c := driverCounters(t, a)
	t.Logf("after restart: nic_lost %d, gsi_revived %d, gsi_revive_fail %d, kflush_wr %d, keepalive %d",
		c["nic_lost"], c["gsi_revived"], c["gsi_revive_fail"], c["kflush_wr"], c["keepalive"])
	if c["gsi_revived"] == 0 || c["gsi_revive_fail"] != 0 {
		t.Fatalf("ib_mad's QP1 was not re-created after the restart: %v", c)
	}
	out := a.exec(t, "ibv_devinfo", "-d", "falcon0")
	if !strings.Contains(out, "PORT_ACTIVE") {
		t.Fatalf("falcon0 after the restart:\n%s", out)
	}
	forge("after restart")
}

// waitPortState waits until falcon0's port 1 reports want in sysfs.
func waitPortState(t *testing.T, v *vm, want string, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		out, err := v.tryExec(context.Background(), "cat", "/sys/class/infiniband/falcon0/ports/1/state")
		if err == nil && strings.TrimSpace(out) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("vm %s: falcon0 port not %q after %v: %v %q", v.name, want, bound, err, out)
		}
		time.Sleep(time.Second)
	}
}

// driverCounters reads falcon0's driver counters (name value per line).
func driverCounters(t *testing.T, v *vm) map[string]uint64 {
	t.Helper()
	out := v.exec(t, "cat", "/sys/class/infiniband/falcon0/counters")
	c := map[string]uint64{}
	for _, l := range strings.Split(out, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(val, 10, 64); err == nil {
			c[name] = n
		}
	}
	return c
}
