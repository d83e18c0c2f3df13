package tests

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NVMe over Fabrics on RDMA between two guests: the guest kernel's
// nvmet-rdma target in B exports a RAM namespace on falcon0's address, the
// guest kernel's nvme-rdma host in A connects to it (rdma_cm over the NICs'
// GSI QPs, then RC QPs with fast registration, remote invalidation and
// softirq-polled CQs), and fio writes 4 KiB blocks at random at queue
// depth 16 and reads every one back, checking its crc32c.

// nvmfVerifyJob writes the whole 16 MiB span once (4096 blocks) and
// verifies it.
var nvmfVerifyJob = []string{"--name=verify", "--rw=randwrite", "--bs=4k", "--iodepth=16", "--ioengine=libaio",
	"--direct=1", "--size=16m", "--verify=crc32c", "--do_verify=1"}

// fioIssued is fio's count of I/Os issued: reads, writes, trims, syncs.
var fioIssued = regexp.MustCompile(`issued rwts: total=(\d+),(\d+),`)

// nvmfCommand runs falconnic nvmf with flags and fio's arguments, failing
// the test if it fails; it returns nvmf's standard output.
func nvmfCommand(t *testing.T, limit time.Duration, flags []string, fio ...string) string {
	t.Helper()
	stdout, _ := pairCommand(t, limit, append(append(append([]string{"nvmf"}, flags...), "--"), fio...))
	return stdout
}

// pairCommand runs `falconnic ARGS` (a guest-pair command: perftest, nvmf,
// nfs) from the repository's root within limit, logging its standard
// error, and fails the test if it fails; it returns both outputs.
func pairCommand(t *testing.T, limit time.Duration, args []string) (stdout, stderr string) {
	t.Helper()
	guestImage(t)
	bin := falconnic(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = ".."
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	t.Logf("falconnic %s: %.1fs\n%s", strings.Join(args, " "), time.Since(start).Seconds(), errOut.String())
	if err != nil {
		t.Fatalf("falconnic %s: %v\n%s", args[0], err, out.String())
	}
	return out.String(), errOut.String()
}

// pairCases are the fabrics a guest-pair command is tested over: one
// daemon (CI), and in full mode two daemons whose fabric drops 1 % of the
// datagrams each way.
func pairCases() []pairCase {
	cases := []pairCase{{"one daemon", nil}}
	if mode == "full" {
		cases = append(cases, pairCase{"two daemons 1% loss", []string{"--daemons", "2", "--loss", "1"}})
	}
	return cases
}

type pairCase struct {
	name  string
	flags []string
}

// checkVerified checks that fio's one job ended without error and wrote
// blocks 4 KiB blocks, each read back and verified.
func checkVerified(t *testing.T, out string, blocks int) {
	t.Helper()
	if !strings.Contains(out, "err= 0") {
		t.Fatalf("fio job did not end with err= 0:\n%s", out)
	}
	m := fioIssued.FindStringSubmatch(out)
	if n := strconv.Itoa(blocks); m == nil || m[1] != n || m[2] != n {
		t.Fatalf("fio issued %v, want %d writes verified by %d reads:\n%s", m, blocks, blocks, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "IOPS=") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

// CI: one daemon. Full mode adds two daemons whose fabric drops 1 % of
// the datagrams each way.
func TestNVMfOverRDMAFioVerify(t *testing.T) {
	requireE2E(t)
	for _, c := range pairCases() {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			checkVerified(t, nvmfCommand(t, 4*time.Minute, c.flags, nvmfVerifyJob...), 4096) // 16 MiB
		})
	}
}

// nvmfRestartJob writes 48 MiB (12,288 blocks) and verifies it: long
// enough that the daemon restart 3 s into fio lands in the middle.
var nvmfRestartJob = []string{"--name=verify", "--rw=randwrite", "--bs=4k", "--iodepth=16", "--ioengine=libaio",
	"--direct=1", "--size=48m", "--verify=crc32c", "--do_verify=1"}

// A daemon killed (SIGKILL) in the middle of fio on an nvme-rdma disk and
// started again 2.5 s later: both guests' drivers find out that the NIC
// lost their instance (keepalive), complete every outstanding kernel work
// request with a flush error, open again and re-create ib_mad's QP1; A's
// nvme-rdma error recovery ends (its DREQ send completes, cm_destroy_id
// does not hang) and the controller reconnects; fio's requests are retried
// and every block reads back as written. Full mode: over a minute.
func TestNVMfOverRDMADaemonRestart(t *testing.T) {
	requireE2E(t)
	if mode != "full" {
		t.Skip("full mode only (FALCONNIC_E2E=full): a daemon restart under nvme-rdma takes over a minute")
	}
	out := nvmfCommand(t, 6*time.Minute, []string{"--restart-after", "3s", "--timeout", "150s"}, nvmfRestartJob...)
	checkVerified(t, out, 12288) // 48 MiB
}
