package tests

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// NFSv4.2 over RDMA between two guests: B's kernel nfsd serves a tmpfs on
// one RDMA listener (svcrdma, no TCP listener at all), with the export
// caches filled by the guest program nfsrdma instead of rpc.mountd; A's
// kernel client mounts it with proto=rdma (xprtrdma: FRWR registrations,
// RDMA READ/WRITE chunks), writes 16 MiB of random data and fsyncs,
// unmounts, mounts again and reads it back; B reads the file too. The three
// SHA-256 sums must agree and A's mountstats must show an RDMA transport.

// nfsPass is falconnic nfs's success line.
var nfsPass = regexp.MustCompile(`nfs: PASS (\d+) MiB over NFSv4\.2/RDMA: write ([0-9.]+) MB/s .* read ([0-9.]+) MB/s`)

// CI: one daemon. Full mode adds two daemons whose fabric drops 1 % of the
// datagrams each way.
func TestNFSOverRDMAWriteRemountChecksum(t *testing.T) {
	requireE2E(t)
	cases := []struct {
		name  string
		flags []string
	}{{"one daemon", nil}}
	if mode == "full" {
		cases = append(cases, struct {
			name  string
			flags []string
		}{"two daemons 1% loss", []string{"--daemons", "2", "--loss", "1"}})
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			guestImage(t)
			bin := falconnic(t)
			args := append(append([]string{"nfs"}, c.flags...), "--mib", "16")
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Dir = ".."
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			t.Logf("falconnic %s: %.1fs\n%s", strings.Join(args, " "), time.Since(start).Seconds(), stderr.String())
			if err != nil {
				t.Fatalf("falconnic nfs: %v\n%s", err, stdout.String())
			}
			m := nfsPass.FindStringSubmatch(stdout.String())
			if m == nil || m[1] != "16" {
				t.Fatalf("no PASS line for 16 MiB:\n%s", stdout.String())
			}
			if !strings.Contains(stderr.String(), "proto=rdma") {
				t.Fatalf("A's mountstats do not show proto=rdma")
			}
			t.Log(strings.TrimSpace(m[0]))
		})
	}
}
