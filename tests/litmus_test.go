package tests

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runLitmus runs `falconnic vm litmus` with args and returns the figures
// of its result line ("litmus test=T key=value ..."), by key.
func runLitmus(t *testing.T, state string, args ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	all := append([]string{"vm", "litmus", "--state", state, "--name", "litmus"}, args...)
	out, err := exec.CommandContext(ctx, falconnic(t), all...).CombinedOutput()
	if err != nil {
		t.Fatalf("vm litmus %v: %v\n%s", args, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "litmus test=") {
			continue
		}
		t.Logf("%s", line)
		kv := map[string]string{}
		for _, f := range strings.Fields(line)[1:] {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		return kv
	}
	t.Fatalf("vm litmus: no result line:\n%s", out)
	return nil
}

// num reads figure k of a result line.
func num(t *testing.T, kv map[string]string, k string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(kv[k], 10, 64)
	if err != nil {
		t.Fatalf("result line: %s=%q: %v", k, kv[k], err)
	}
	return n
}

// The fix for issue 22 (qemu.smpArg: maxcpus 2): a guest vCPU and a host
// thread playing Peterson's lock over guest RAM never meet inside it, which
// needs the guest's XCHG to be a store→load barrier on the host.
func TestLitmusPetersonHoldsWithTheDefaultMachine(t *testing.T) {
	requireE2E(t)
	guestImage(t)
	const rounds = 50_000
	kv := runLitmus(t, stateDir(t), "--test", "peterson", "--rounds", strconv.Itoa(rounds))
	if num(t, kv, "maxcpus") != 2 || num(t, kv, "guest_rounds") != rounds {
		t.Fatalf("maxcpus %s, guest rounds %s; want 2 and %d", kv["maxcpus"], kv["guest_rounds"], rounds)
	}
	if num(t, kv, "guest_violations")+num(t, kv, "host_violations") != 0 || num(t, kv, "lost") != 0 ||
		num(t, kv, "counter") != num(t, kv, "guest_rounds")+num(t, kv, "host_rounds") {
		t.Fatalf("mutual exclusion broken with the default machine: %v", kv)
	}
}
