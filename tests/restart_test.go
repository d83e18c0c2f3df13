package tests

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"falconnic/device/ether"
)

// killAtFraction is how far into the transfer the daemon dies: late
// enough that the connection is in full flow, early enough that most of
// the bytes must cross the restarted daemon.
const killAtFraction = 4 // kill after 1/4 of the bytes

// outage is how long the daemon stays dead: over QEMU's reconnect period
// (1 s), so that at least one reconnect attempt fails.
const outage = 2500 * time.Millisecond

// reconnectBound bounds QEMU's reconnect and the NICs' restart after the
// daemon is back (about a second when the host is idle).
const reconnectBound = time.Minute

// A daemon killed (SIGKILL) in the middle of a TCP transfer between two
// guests and started again with the same config: QEMU's chardevs reconnect
// (reconnect=1) and restart the NICs without the guests' help, TCP
// retransmits what the outage lost, and the receiver's SHA-256 matches the
// sender's. The kill is timed by the daemon's own port counters, not by a
// sleep, and the restarted daemon must carry most of the bytes: proof that
// the kill landed mid-transfer. Control goes over virtio-serial: QEMU 7.2's
// vhost-user-vsock does not survive a daemon restart. Runs in ci and full.
func TestDaemonKilledMidTransferRestartsAndTheTransferCompletes(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	state := stateDir(t)
	d := newDaemonProc(t, state, fullConfig{daemonConfig: daemonConfig{
		Control: "control.sock",
		NICs: []nicSpec{
			{Name: "a0", Socket: "a0.sock", MAC: "52:54:00:fc:00:0a"},
			{Name: "b0", Socket: "b0.sock", MAC: "52:54:00:fc:00:0b"},
		},
	}})
	a := boot(t, state, "A", "--nic", filepath.Join(state, "a0.sock")+",mac=52:54:00:fc:00:0a,ip=10.0.0.1/24")
	b := boot(t, state, "B", "--nic", filepath.Join(state, "b0.sock")+",mac=52:54:00:fc:00:0b,ip=10.0.0.2/24")
	ping(t, a, "10.0.0.2")

	n := transferBytes()
	st, err := d.status()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := nicReport(st, "a0")
	x := startTransfer(t, a, b, "10.0.0.2", n)

	// Poll a0's switch port until a quarter of the bytes went through.
	killAt := before.Port["rx_bytes"] + uint64(n/killAtFraction)
	var seen uint64
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	giveUp := time.After(5 * time.Minute)
	for seen < killAt {
		select {
		case <-poll.C:
		case <-giveUp:
			t.Fatalf("a0 carried %d bytes in 5 minutes, waiting for %d", seen, killAt)
		}
		if x.finished() {
			t.Fatalf("transfer ended before the daemon was killed (a0 RxBytes %d, kill at %d)", seen, killAt)
		}
		st, err := d.status()
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		r, ok := nicReport(st, "a0")
		if !ok {
			t.Fatalf("status has no NIC a0: %+v", st)
		}
		seen = r.Port["rx_bytes"]
	}
	d.kill()
	killed := time.Now()
	t.Logf("daemon killed after a0 carried %d bytes (%d MiB into a %d MiB transfer)", seen-before.Port["rx_bytes"], (seen-before.Port["rx_bytes"])>>20, n>>20)
	if x.finished() {
		t.Fatal("the transfer ended before the kill took effect")
	}
	// Stay down long enough for QEMU's once-a-second reconnect to fail
	// at least once against the dead socket, as after a real crash.
	time.Sleep(outage)
	d.start()
	t.Logf("daemon restarted %.2fs after the kill", time.Since(killed).Seconds())
	if x.finished() {
		t.Fatal("the transfer ended while the daemon was dead")
	}
	// QEMU must come back by itself: both NICs' sessions running again
	// within a bounded time, else the transfer would only hang.
	waitSessionsRunning(t, d, reconnectBound, "a0", "b0")
	t.Logf("both NICs running again %.2fs after the kill", time.Since(killed).Seconds())
	x.wait(t)

	// The restarted daemon carried the rest: at least half of the bytes
	// entered its a0 port and left through b0.
	st, err = d.status()
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := nicReport(st, "a0")
	rb, _ := nicReport(st, "b0")
	t.Logf("restarted daemon: a0 RxBytes %d, b0 TxBytes %d; a0 vhost sessions %d", ra.Port["rx_bytes"], rb.Port["tx_bytes"], nicCounters(t, ra)["vhost.sessions"])
	if ra.Port["rx_bytes"] < uint64(n/2) || rb.Port["tx_bytes"] < uint64(n/2) {
		t.Fatalf("the restarted daemon carried too little of the %d bytes: a0 RxBytes %d, b0 TxBytes %d", n, ra.Port["rx_bytes"], rb.Port["tx_bytes"])
	}
	// The link stays usable both ways.
	ping(t, b, "10.0.0.1")
}

// waitSessionsRunning waits until each named NIC's vhost-user session has a
// running ring, or fails the test after bound.
func waitSessionsRunning(t *testing.T, d *daemonProc, bound time.Duration, nics ...string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		st, err := d.status()
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		var waiting []string
		for _, name := range nics {
			r, ok := nicReport(st, name)
			var ns ether.Status
			if ok {
				json.Unmarshal(r.Device, &ns)
			}
			if ns.Session != "running" {
				waiting = append(waiting, name+"="+ns.Session)
			}
		}
		if len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("NIC sessions not running %v after the daemon came back: %v", bound, waiting)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
