package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

const nfsSum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestParseNFSResult(t *testing.T) {
	r, err := parseNFSResult("noise\nnfsrdma: write bytes=33554432 sha256=" + nfsSum + " seconds=2.500 MBps=13.42\n")
	if err != nil {
		t.Fatal(err)
	}
	if r.bytes != 33554432 || r.sum != nfsSum || r.seconds != 2.5 || r.mbps != 13.42 {
		t.Fatalf("got %+v", r)
	}
	for _, bad := range []string{"", "nfsrdma: write bytes=1 sha256=abc seconds=1 MBps=1", "nfsrdma: read bytes=x"} {
		if _, err := parseNFSResult(bad); err == nil {
			t.Errorf("parseNFSResult(%q) succeeded", bad)
		}
	}
}

// A mountstats excerpt as Linux 6.1 prints it for an NFSv4.2 mount over
// RDMA (the xprt line's fields after "rdma" are xprtrdma's counters).
const nfsMountStatsRDMA = `device rootfs mounted on / with fstype rootfs
device 10.0.0.2:/ mounted on /mnt/nfs with fstype nfs4 statvers=1.1
	opts:	rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,acregmin=3,proto=rdma,port=20049,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.1
	age:	3
	xprt:	rdma 0 0 1 0 0 10 10 0 10 0 4 5 6 7 8 0 0 0 0 0 0 0 0 0 0 0 0
device 10.0.0.3:/ mounted on /mnt/other with fstype nfs4 statvers=1.1
	opts:	rw,vers=4.2,proto=tcp
	xprt:	tcp 0 0 1 0 0 10 10 0 10 0 0 0 0
`

func TestParseNFSMountStats(t *testing.T) {
	st, err := parseNFSMountStats(nfsMountStatsRDMA, "/mnt/nfs")
	if err != nil {
		t.Fatal(err)
	}
	if !st.isRDMA() {
		t.Fatalf("not RDMA: %+v", st)
	}
	x, err := st.rdmaCounters()
	if err != nil {
		t.Fatal(err)
	}
	if want := (nfsXprtRDMA{sends: 10, recvs: 10, readChunks: 4, writeChunks: 5, replyChunks: 6, rdmaRequest: 7, rdmaReply: 8}); x != want {
		t.Fatalf("counters %+v, want %+v", x, want)
	}
	st, err = parseNFSMountStats(nfsMountStatsRDMA, "/mnt/other")
	if err != nil {
		t.Fatal(err)
	}
	if st.isRDMA() {
		t.Fatalf("a TCP mount counts as RDMA: %+v", st)
	}
	if _, err := st.rdmaCounters(); err == nil {
		t.Fatal("a TCP transport line parsed as xprtrdma's")
	}
	if _, err := parseNFSMountStats(nfsMountStatsRDMA, "/mnt"); err == nil {
		t.Fatal("found a mount on /mnt")
	}
}

func TestCounterDeltas(t *testing.T) {
	a := map[string]uint64{"tx": 10, "rx": 5, "same": 3}
	b := map[string]uint64{"tx": 110, "rx": 105, "same": 3, "new": 7}
	got := strings.Join(counterDeltas(a, b, 3), ", ")
	if want := "rx +100, tx +100, new +7"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestTransferLimitGrowsWithSize(t *testing.T) {
	if transferLimit(1) < nfsSetupLimit || transferLimit(64) <= transferLimit(1) {
		t.Fatalf("limits %v, %v", transferLimit(1), transferLimit(64))
	}
	if l := transferLimit(32); l > 5*time.Minute {
		t.Fatalf("32 MiB limit %v", l)
	}
}

// Guest output is hostile: the parsers must not panic on any of it.
func FuzzParseNFSOutput(f *testing.F) {
	f.Add(nfsMountStatsRDMA)
	f.Add("nfsrdma: read bytes=1 sha256=" + nfsSum + " seconds=0.1 MBps=9")
	f.Add("device x mounted on /mnt/nfs \n xprt:\n opts:")
	f.Fuzz(func(t *testing.T, s string) {
		parseNFSResult(s)
		st, err := parseNFSMountStats(s, "/mnt/nfs")
		if err != nil {
			return
		}
		if st.isRDMA() && !strings.Contains(s, "proto=rdma") {
			t.Fatalf("RDMA without proto=rdma: %+v", st)
		}
		st.rdmaCounters()
	})
}

func TestNFSUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--daemons", "3"},
		{"--loss", "1"},
		{"--daemons", "2", "--loss", "100"},
		{"--mib", "0"},
		{"--mib", "257"},
		{"extra"},
	} {
		var out bytes.Buffer
		err := runNFS(context.Background(), args, &out, &out)
		if !errors.Is(err, errUsage) {
			t.Errorf("nfs %v: %v, want a usage error", args, err)
		}
	}
}

// An image without the NFS modules is refused before any guest boots.
func TestNFSRefusesAnImageWithoutNFSModules(t *testing.T) {
	cache := fakeImage(t, "kernel/drivers/nvme/host/nvme-rdma.ko", "kernel/net/sunrpc/xprtrdma/rpcrdma.ko")
	var out bytes.Buffer
	err := runNFS(context.Background(), []string{"--cache", cache}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "nfsd, nfsv4") {
		t.Fatalf("image without nfsd and nfsv4: %v", err)
	}
}
