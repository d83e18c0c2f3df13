package tests

import (
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
	for _, c := range pairCases() {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			stdout, stderr := pairCommand(t, 6*time.Minute, append(append([]string{"nfs"}, c.flags...), "--mib", "16"))
			m := nfsPass.FindStringSubmatch(stdout)
			if m == nil || m[1] != "16" {
				t.Fatalf("no PASS line for 16 MiB:\n%s", stdout)
			}
			if !strings.Contains(stderr, "proto=rdma") {
				t.Fatalf("A's mountstats do not show proto=rdma")
			}
			t.Log(strings.TrimSpace(m[0]))
		})
	}
}
