package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"falconnic/qemu"
)

func TestDiskFlag(t *testing.T) {
	var disks []qemu.Disk
	f := diskFlag{&disks}
	for _, s := range []string{"/run/d0.sock", "/run/d1.sock,queues=4"} {
		if err := f.Set(s); err != nil {
			t.Fatalf("--disk %s: %v", s, err)
		}
	}
	want := []qemu.Disk{{VhostUserBlk: "/run/d0.sock"}, {VhostUserBlk: "/run/d1.sock", Queues: 4}}
	if len(disks) != 2 || disks[0] != want[0] || disks[1] != want[1] {
		t.Fatalf("disks %+v, want %+v", disks, want)
	}
	for _, bad := range []string{"", ",queues=1", "/s,queues=0", "/s,queues=17", "/s,queues=x", "/s,size=1G", "/s,queues"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("--disk %q accepted", bad)
		}
	}
}

// A --disk socket must exist and be served: a daemon that died leaves its
// socket file behind, and the error says to start the daemon.
func TestCheckDiskSockets(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.sock")
	l, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := checkDiskSockets([]qemu.Disk{{VhostUserBlk: live}}); err != nil {
		t.Fatalf("served socket refused: %v", err)
	}
	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetUnlinkOnClose(false)
	sl.Close()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o644)
	for _, p := range []string{stale, plain, filepath.Join(dir, "none.sock")} {
		err := checkDiskSockets([]qemu.Disk{{VhostUserBlk: live}, {VhostUserBlk: p}})
		if err == nil || !strings.Contains(err.Error(), "falconnic serve") {
			t.Errorf("%s: err %v, want one naming falconnic serve", filepath.Base(p), err)
		}
	}
}
