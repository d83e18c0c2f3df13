package device

import (
	"bytes"
	"context"
	"encoding/json"
	"falconnic/psp"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"falconnic/device/capture"
	"falconnic/device/fabric"
	"falconnic/device/l2"
	"falconnic/device/storage"
	"falconnic/falcon/wire"
	"falconnic/internal/control"
)

// startDaemonWithCapture is startDaemon with a capture of every NIC
// running before the daemon does (so it sees connection set-up).
func startDaemonWithCapture(t *testing.T, cfgJSON string) (*testDaemon, *capture.Session) {
	t.Helper()
	return startDaemonWithCaptureOpts(t, cfgJSON, capture.Options{NIC: capture.AllNICs, Buffer: capture.MaxBuffer})
}

// startDaemonWithCaptureOpts is startDaemonWithCapture with the session's
// options.
func startDaemonWithCaptureOpts(t *testing.T, cfgJSON string, o capture.Options) (*testDaemon, *capture.Session) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "falconnic.json")
	if err := os.WriteFile(path, []byte(cfgJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{nics: map[string]*testNIC{}}
	td.Daemon, err = NewDaemon(cfg, DaemonOptions{Logger: quietLog, NewNIC: func(spec NICSpec, up l2.Sink) (DaemonNIC, error) {
		n := &testNIC{inbox: newInbox(), spec: spec, uplink: up}
		td.nics[spec.Name] = n
		return n, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := td.capture.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- td.Run(ctx) }()
	td.stop = func() error { cancel(); return <-done }
	t.Cleanup(func() { td.stop() })
	return td, s
}

// drain reads everything the session buffered.
func drain(s *capture.Session) (recs []capture.Record, dropped uint64) {
	for {
		t := time.NewTimer(50 * time.Millisecond)
		b := s.Read(1<<20, t.C)
		t.Stop()
		recs = append(recs, b.Records...)
		if len(b.Records) == 0 {
			return recs, b.Dropped
		}
	}
}

// sentFalcon is what a record's Falcon packet says, decoded with the wire
// package: the reference the dissector's fields are checked against.
type sentFalcon struct {
	typ      wire.PacketType
	cid      uint32
	psn, rsn uint32
	hasTxn   bool
}

// falconOf returns the Falcon packet in a record's payload (after the
// fabric header on the fabric; the whole frame on a port link), envelope
// removed, or nil.
func falconOf(r capture.Record) []byte {
	b := r.Data
	if r.Iface == capture.Fabric {
		h, payload, ok := fabric.Decode(b)
		if !ok || h.Kind() != fabric.KindFalcon {
			return nil
		}
		b = payload
	}
	if len(b) < 8 {
		return nil
	}
	return b[:len(b)-8] // IV timestamp and ICV
}

func decodeSent(t *testing.T, pkt []byte) sentFalcon {
	t.Helper()
	p, err := wire.Parse(pkt)
	if err != nil {
		t.Fatalf("captured packet does not parse: %v", err)
	}
	s := sentFalcon{typ: p.Type(), cid: p.CID()}
	if info, _ := p.Type().Info(); info.Txn {
		f := p.Txn().Fields()
		s.psn, s.rsn, s.hasTxn = uint32(f.PSN), uint32(f.RSN), true
	}
	return s
}

// TestCaptureSeesTheFabricAndPortLinks: a capture of every NIC on the
// daemon with the disk records the CM set-up and the NVMe traffic over a
// lossy UDP fabric, both directions, each datagram intact; a capture of
// the one-daemon disk records the frames between the two ports.
func TestCaptureSeesTheFabricAndPortLinks(t *testing.T) {
	t.Run("plaintext", func(t *testing.T) { captureFabric(t, false) })
	t.Run("sealed", func(t *testing.T) { captureFabric(t, true) })
}

// plainFabric turns a test config's secure fabric into a plaintext one.
func plainFabric(cfg string) string { return strings.Replace(cfg, keyJSON(), `, "insecure": true`, 1) }

// captureFabric is TestCaptureSeesTheFabricAndPortLinks over a plaintext
// or a sealed (PSP) fabric: sealed, the Falcon datagrams are PSP datagrams,
// still told to their NIC both ways (the sending NIC's link under the
// sealing, the CID in the clear word).
func captureFabric(t *testing.T, sealed bool) {
	la, lb := freeUDPPort(t), freeUDPPort(t)
	impair := `, "loss_percent": 2, "reorder_percent": 5, "seed": 5`
	store, hostCfg := storeConfig(lb, la, storage.NamespaceMemory, impair), hostConfig(la, lb, impair)
	if !sealed {
		store, hostCfg = plainFabric(store), plainFabric(hostCfg)
	}
	startDaemon(t, store)
	host, s := startDaemonWithCapture(t, hostCfg)
	one, err := host.capture.Start(capture.Options{NIC: 0}) // NIC "host" alone
	if err != nil {
		t.Fatal(err)
	}
	r := remoteDisk(t, host)
	for round := 0; round < 4; round++ {
		r.writeRead(uint64(round)*64*8, 16, byte(round+1))
	}
	// The NIC's own capture has its Falcon packets both ways: the sending
	// NIC of a fabric link, the owner of a received packet's CID.
	mine, _ := drain(one)
	var nicFalcon [2]int
	for _, rec := range mine {
		if h, _, ok := fabric.Decode(rec.Data); ok && h.Kind() == fabric.KindFalcon {
			nicFalcon[rec.Dir-1]++
		}
	}
	if nicFalcon[0] == 0 || nicFalcon[1] == 0 {
		t.Errorf("NIC host's capture: Falcon packets in/out %v", nicFalcon)
	}
	recs, dropped := drain(s)
	if dropped != 0 {
		t.Errorf("%d packets dropped", dropped)
	}
	kinds := map[fabric.Kind][2]int{}
	types := map[wire.PacketType]int{}
	for _, rec := range recs {
		if rec.Iface != capture.Fabric {
			t.Fatalf("record on %v: this daemon has no port links", rec.Iface)
		}
		h, _, ok := fabric.Decode(rec.Data)
		if !ok || rec.Len != len(rec.Data) {
			t.Fatalf("captured datagram does not decode (%d of %d bytes)", len(rec.Data), rec.Len)
		}
		k := kinds[h.Kind()]
		k[rec.Dir-1]++
		kinds[h.Kind()] = k
		if sealed {
			if _, p, _ := fabric.Decode(rec.Data); h.Kind() == fabric.KindFalcon && (len(p) < psp.MinDatagram || p[0] != psp.NextHeaderFalcon) {
				t.Fatalf("a Falcon datagram of a sealed fabric is not a PSP datagram: % x", p[:min(len(p), 16)])
			}
			continue
		}
		if pkt := falconOf(rec); pkt != nil {
			types[decodeSent(t, pkt).typ]++
		}
	}
	if k := kinds[fabric.KindCM]; k[0] == 0 || k[1] == 0 {
		t.Errorf("CM messages in/out: %v", k)
	}
	if k := kinds[fabric.KindFalcon]; k[0] == 0 || k[1] == 0 {
		t.Errorf("Falcon packets in/out: %v", k)
	}
	if !sealed && (types[wire.TypePushData] == 0 || types[wire.TypeBACK]+types[wire.TypeEACK] == 0) {
		t.Errorf("Falcon packet types %v", types)
	}
	if out := os.Getenv("FALCONNIC_CAPTURE_OUT"); out != "" && !sealed { // a sample for the README and the dissector
		writePcap(t, out, recs)
	}
}

func writePcap(t *testing.T, path string, recs []capture.Record) {
	t.Helper()
	var buf bytes.Buffer
	w, err := capture.NewPcapWriter(&buf, "all")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureOverControlSocket: capture.start for one NIC, capture.read
// until the count, and the session ends by itself; a one-daemon disk's
// traffic shows on the port-link interface, out on the host NIC.
func TestCaptureOverControlSocket(t *testing.T) {
	d := startVhostDaemon(t, metricsConfig)
	sock := d.ControlSocket()
	var st CaptureStarted
	if err := control.Call(context.Background(), sock, "capture.start", CaptureStartParams{NIC: "host", Count: 5}, &st); err != nil {
		t.Fatal(err)
	}
	if err := control.Call(context.Background(), sock, "capture.start", CaptureStartParams{NIC: "nope"}, nil); err == nil {
		t.Error("capture of an unknown NIC started")
	}
	r := remoteDisk(t, &testDaemon{Daemon: d}) // the disk's I/O crosses the port link
	r.writeRead(0, 4, 9)
	var got []capture.Record
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var b capture.Batch
		if err := control.Call(context.Background(), sock, "capture.read", CaptureReadParams{ID: st.ID, WaitMs: 200}, &b); err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Records...)
		if b.Done {
			break
		}
	}
	if len(got) != 5 {
		t.Fatalf("%d records, want the count of 5", len(got))
	}
	for _, r := range got {
		if r.Iface != capture.PortLink || decodeSent(t, falconOf(r)).cid == 0 {
			t.Errorf("record %+v", r)
		}
	}
	err := control.Call(context.Background(), sock, "capture.read", CaptureReadParams{ID: st.ID}, nil)
	if err == nil {
		t.Error("the session outlived its count")
	}
	raw, _ := json.Marshal(got[0])
	if !bytes.Contains(raw, []byte(`"if":1`)) {
		t.Errorf("record JSON %s", raw)
	}
}

// FuzzCaptureTapFabric: the capture's reading of a datagram from the
// fabric (which NIC it belongs to) takes any bytes without panicking, and
// a capture of every NIC keeps each one whole.
func FuzzCaptureTapFabric(f *testing.F) {
	d := startVhostDaemon(f, twoNICs) // no traffic of its own
	s, err := d.capture.Start(capture.Options{NIC: capture.AllNICs})
	if err != nil {
		f.Fatal(err)
	}
	hdr := make([]byte, fabric.HeaderLen)
	for _, k := range []fabric.Kind{fabric.KindEthernet, fabric.KindFalcon, fabric.KindCM, 9} {
		fabric.Encode(hdr, k, 7, 48)
		f.Add(true, append(append([]byte(nil), hdr...), make([]byte, 48)...))
		f.Add(false, append(append([]byte(nil), hdr...), bytes.Repeat([]byte{0xff}, 48)...))
	}
	f.Add(false, []byte{0xfa})
	local, remote := netip.MustParseAddrPort("127.0.0.1:7471"), netip.MustParseAddrPort("127.0.0.1:7472")
	f.Fuzz(func(t *testing.T, out bool, b []byte) {
		d.tapFabric(out, [6]byte{0x52, 0x54, 0, 0, 0, 1}, local, remote, b)
		tm := time.NewTimer(0)
		got := s.Read(1<<20, tm.C)
		tm.Stop()
		if len(got.Records) != 1 || !bytes.Equal(got.Records[0].Data, b) {
			t.Fatalf("capture of every NIC kept %d records for one datagram", len(got.Records))
		}
	})
}
