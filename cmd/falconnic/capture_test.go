package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"

	"falconnic/device/capture"
	"falconnic/psp/cmauth"
)

// TestCaptureWritesAPcapng: `falconnic capture --nic n0 --count 5` writes
// the first five datagrams that reach NIC n0 over the fabric, inbound, on
// the interface n0:fabric, and ignores those for the other NIC.
func TestCaptureWritesAPcapng(t *testing.T) {
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	listen := freeUDP(t)
	cfg := fmt.Sprintf(`{
  "control": "ctl.sock",
  "nics": [{"name": "n0", "socket": "n0.sock", "mac": "52:54:00:12:34:56"},
           {"name": "n1", "socket": "n1.sock", "mac": "52:54:00:12:34:57"}],
  "fabric": {"listen": %q, "peers": [%q], "insecure": true}
}`, listen, peer.LocalAddr().String())
	dir, _ := startServe(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fakePeer(ctx, t, peer, listen, net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56})
	go fakePeer(ctx, t, peer, listen, net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x57})

	out := filepath.Join(dir, "n0.pcapng")
	var stderr bytes.Buffer
	err = run(context.Background(), []string{"capture", "--socket", filepath.Join(dir, "ctl.sock"), "--nic", "n0",
		"--count", "5", "--duration", "30s", "-w", out}, io.Discard, &stderr)
	if err != nil {
		t.Fatalf("capture: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "5 packets written") {
		t.Errorf("capture said %q", stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		intf, err := r.Interface(ci.InterfaceIndex)
		if err != nil || intf.Name != "n0:fabric" {
			t.Errorf("packet %d on interface %q (%v)", n, intf.Name, err)
		}
		// Ethernet (14) + IPv4 (20) + UDP (8) + fabric header (12), then
		// the frame for n0.
		if len(data) < 54+6 || !bytes.Equal(data[54:60], []byte{0x52, 0x54, 0, 0x12, 0x34, 0x56}) {
			t.Errorf("packet %d is not the frame for n0: % x", n, data[:min(len(data), 60)])
		}
	}
	if n != 5 {
		t.Errorf("%d packets in the file, want 5", n)
	}
	if r.NInterfaces() != 2 {
		t.Errorf("%d interfaces, want n0:fabric and n0:portlink", r.NInterfaces())
	}
}

// TestCaptureKeyLog: `falconnic capture --keylog FILE` on a secure fabric
// writes the key log mode 0600 — also over an existing file that others
// could read — starting with its header and holding the fabric's CM key.
func TestCaptureKeyLog(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "fabric.key")
	if err := cmauth.GenerateKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{
  "control": "ctl.sock",
  "nics": [{"name": "n0", "socket": "n0.sock", "mac": "52:54:00:12:34:56"}],
  "fabric": {"listen": %q, "peers": [%q], "key_file": %q}
}`, freeUDP(t), freeUDP(t), keyFile)
	sdir, _ := startServe(t, cfg)
	keys := filepath.Join(dir, "keys.log")
	if err := os.WriteFile(keys, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"capture", "--socket", filepath.Join(sdir, "ctl.sock"), "--duration", "1s",
		"-w", filepath.Join(dir, "c.pcapng"), "--keylog", keys}, io.Discard, &stderr)
	if err != nil {
		t.Fatalf("capture: %v\n%s", err, stderr.String())
	}
	fi, err := os.Stat(keys)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key log mode %#o, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(keys)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != capture.KeyLogHeader || len(lines) != 2 || !strings.HasPrefix(lines[1], "CMAUTH ") ||
		len(strings.Fields(lines[1])) != 4 || len(strings.Fields(lines[1])[3]) != 64 {
		t.Errorf("key log:\n%s", b)
	}
	if !strings.Contains(stderr.String(), "1 keys written") {
		t.Errorf("capture said %q", stderr.String())
	}
}
