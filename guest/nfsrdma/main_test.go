package main

import (
	"net"
	"testing"
)

// The export cache entries are the lines rpc.mountd would write: the
// client's address in the domain, the fsid=0 key (FSID_NUM, four zero
// bytes in hex) and the export with NFSEXP_FSID, each ending in a newline
// (the kernel's parsers reject a message without one).
func TestCacheLines(t *testing.T) {
	got := cacheLines(net.ParseIP("10.0.0.1").To4(), "/srv/nfs", 2000000000)
	want := [][2]string{
		{"/proc/net/rpc/auth.unix.ip/channel", "nfsd 10.0.0.1 2000000000 falconnic\n"},
		{"/proc/net/rpc/nfsd.fh/channel", "falconnic 1 \\x00000000 2000000000 /srv/nfs\n"},
		{"/proc/net/rpc/nfsd.export/channel", "falconnic /srv/nfs 2000000000 9218 65534 65534 0\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"bogus"},
		{"serve", "-client", "not-an-ip"},
		{"serve", "-client", "::1"},
		{"mount", "-server", "10.0.0.2", "-client", "10.0.0.1"},
		{"mount", "-server", "x", "-client", "10.0.0.1", "/mnt"},
		{"write", "-mib", "0", "/tmp/f"},
		{"read"},
	} {
		if err := run(args, nil); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
