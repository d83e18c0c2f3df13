package tests

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

var litmusLine = regexp.MustCompile(`litmus test=peterson maxcpus=(\d+) guest_rounds=(\d+) guest_violations=(\d+) host_rounds=(\d+) host_violations=(\d+) counter=(\d+) lost=(-?\d+)`)

// litmusRun is one `falconnic vm litmus` result.
type litmusRun struct {
	maxcpus, guestRounds, guestViolations, hostRounds, hostViolations, counter, lost int64
}

func (r litmusRun) violations() int64 { return r.guestViolations + r.hostViolations }

// runLitmus runs `falconnic vm litmus` with args and reads its line.
func runLitmus(t *testing.T, state string, args ...string) litmusRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	all := append([]string{"vm", "litmus", "--state", state, "--name", "litmus"}, args...)
	out, err := exec.CommandContext(ctx, falconnic(t), all...).CombinedOutput()
	if err != nil {
		t.Fatalf("vm litmus %v: %v\n%s", args, err, out)
	}
	m := litmusLine.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("vm litmus output not understood:\n%s", out)
	}
	var v [7]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(m[i+1], 10, 64)
	}
	r := litmusRun{v[0], v[1], v[2], v[3], v[4], v[5], v[6]}
	t.Logf("%s", m[0])
	return r
}

// The fix for issue 22 (qemu.smpArg: maxcpus 2): a guest vCPU and a host
// thread playing Peterson's lock over guest RAM never meet inside it, which
// needs the guest's XCHG to be a store→load barrier on the host.
func TestLitmusGuestBarriersHoldWithTheDefaultMachine(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	state := stateDir(t)
	const rounds = 100_000
	r := runLitmus(t, state, "--rounds", strconv.Itoa(rounds))
	if r.maxcpus != 2 || r.guestRounds != rounds {
		t.Fatalf("maxcpus %d, guest rounds %d; want 2 and %d", r.maxcpus, r.guestRounds, rounds)
	}
	if r.violations() != 0 || r.lost != 0 || r.counter != r.guestRounds+r.hostRounds {
		t.Fatalf("mutual exclusion broken with the default machine: %+v", r)
	}
}
