package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"falconnic/qemu"
)

func TestNICFlagParsesOptions(t *testing.T) {
	var nics []qemu.NIC
	f := nicFlag{&nics, false}
	if err := f.Set("/run/a0.sock,mac=52:54:00:00:00:0a,ip=10.0.0.1/24,mtu=9000,queues=2"); err != nil {
		t.Fatal(err)
	}
	want := qemu.NIC{VhostUser: "/run/a0.sock", MAC: "52:54:00:00:00:0a", CIDR: "10.0.0.1/24", MTU: 9000, Queues: 2}
	if !reflect.DeepEqual(nics, []qemu.NIC{want}) {
		t.Fatalf("got %+v", nics)
	}
	for _, bad := range []string{"", ",mac=x", "/s,mtu=big", "/s,queues=x", "/s,color=red", "/s,server=on", "/s,novalue"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStreamFlagListensWhenTheSocketIsNotThereYet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "link.sock")
	var nics []qemu.NIC
	f := nicFlag{&nics, true}
	if err := f.Set(path + ",ip=10.0.0.1/24"); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := f.Set(path + ",ip=10.0.0.2/24"); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(path + ",server=on"); err != nil {
		t.Fatal(err)
	}
	if !nics[0].StreamServer || nics[1].StreamServer || !nics[2].StreamServer {
		t.Fatalf("server sides: %v %v %v, want true false true", nics[0].StreamServer, nics[1].StreamServer, nics[2].StreamServer)
	}
}

func TestParseMem(t *testing.T) {
	for in, want := range map[string]int{"1G": 1024, "3G": 3072, "1536M": 1536, "512": 512} {
		if got, err := parseMem(in); err != nil || got != want {
			t.Errorf("parseMem(%q) = %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1G", "1T", "lots"} {
		if _, err := parseMem(bad); err == nil {
			t.Errorf("parseMem(%q) accepted", bad)
		}
	}
}

func TestVMSubcommandsRejectBadUsage(t *testing.T) {
	state := t.TempDir()
	for _, args := range [][]string{
		{"vm"},
		{"vm", "fly"},
		{"vm", "run", "--state", state},
		{"vm", "stop", "--state", state},
		{"vm", "exec"},
		{"vm", "exec", "A", "--state", state},
		{"image"},
	} {
		err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
	err := run(context.Background(), []string{"vm", "exec", "nosuch", "--state", state, "--", "true"}, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, qemu.ErrUnknownVM) {
		t.Errorf("exec on an unknown VM: %v", err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"vm", "ls", "--state", state}, &out, &bytes.Buffer{}); err != nil || !strings.HasPrefix(out.String(), "NAME") {
		t.Errorf("vm ls on an empty state dir: %v %q", err, out.String())
	}
}
