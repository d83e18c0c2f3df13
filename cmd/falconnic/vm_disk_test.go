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
	for _, s := range []string{"/run/d0.sock", "/run/d1.sock,queues=4", "file=/tmp/l.img,serial=loc", "file=/tmp/m.img,intx=on"} {
		if err := f.Set(s); err != nil {
			t.Fatalf("--disk %s: %v", s, err)
		}
	}
	want := []qemu.Disk{{VhostUserBlk: "/run/d0.sock"}, {VhostUserBlk: "/run/d1.sock", Queues: 4},
		{File: "/tmp/l.img", Serial: "loc"}, {File: "/tmp/m.img", INTx: true}}
	if len(disks) != len(want) {
		t.Fatalf("disks %+v, want %+v", disks, want)
	}
	for i := range want {
		if disks[i] != want[i] {
			t.Fatalf("disks %+v, want %+v", disks, want)
		}
	}
	for _, bad := range []string{"", ",queues=1", "/s,queues=0", "/s,queues=17", "/s,queues=x", "/s,size=1G", "/s,queues",
		"file=", "file=/x,queues=2", "file=/x,serial", "file=/x,intx=yes"} {
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
	if err := checkDiskSockets([]qemu.Disk{{File: plain}}); err != nil {
		t.Errorf("a regular file refused as a file disk: %v", err)
	}
	if err := checkDiskSockets([]qemu.Disk{{File: dir}}); err == nil {
		t.Error("a directory accepted as a file disk")
	}
	for _, p := range []string{stale, plain, filepath.Join(dir, "none.sock")} {
		err := checkDiskSockets([]qemu.Disk{{VhostUserBlk: live}, {VhostUserBlk: p}})
		if err == nil || !strings.Contains(err.Error(), "falconnic serve") {
			t.Errorf("%s: err %v, want one naming falconnic serve", filepath.Base(p), err)
		}
	}
}
