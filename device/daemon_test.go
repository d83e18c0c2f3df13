package device

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"falconnic/device/fabric"
	"falconnic/device/l2"
	"falconnic/device/port"
	"falconnic/internal/control"
)

// testNIC is a guest NIC without a guest: what the switch sends it lands in
// an inbox, and the test injects frames through its uplink.
type testNIC struct {
	*inbox
	spec   NICSpec
	uplink l2.Sink
	closed atomic.Bool
}

func (n *testNIC) Serve(ctx context.Context) error { <-ctx.Done(); return nil }
func (n *testNIC) Close() error                    { n.closed.Store(true); return nil }
func (n *testNIC) StatusJSON() any                 { return map[string]string{"session": "none"} }

type testDaemon struct {
	*Daemon
	nics map[string]*testNIC
	stop func() error
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// startDaemon writes cfg as a config file in a temp dir, loads it, builds a
// daemon with test NICs and runs it until the test ends.
func startDaemon(t testing.TB, cfgJSON string) *testDaemon {
	t.Helper()
	return startDaemonOpts(t, cfgJSON, DaemonOptions{})
}

// startDaemonOpts is startDaemon with opts (its Logger and NewNIC are the
// test's).
func startDaemonOpts(t testing.TB, cfgJSON string, opts DaemonOptions) *testDaemon {
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
	opts.Logger = quietLog
	opts.NewNIC = func(spec NICSpec, up l2.Sink) (DaemonNIC, error) {
		n := &testNIC{inbox: newInbox(), spec: spec, uplink: up}
		td.nics[spec.Name] = n
		return n, nil
	}
	td.Daemon, err = NewDaemon(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- td.Run(ctx) }()
	var stopped bool
	var runErr error
	td.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { td.stop() })
	return td
}

func (td *testDaemon) status(t *testing.T) Status {
	t.Helper()
	var st Status
	if err := control.Call(context.Background(), td.ControlSocket(), "status", nil, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

const twoNICs = `{
  "control": "ctl.sock",
  "nics": [
    {"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01"},
    {"name": "b", "socket": "sub/dir/b.sock", "mac": "52:54:00:00:00:02"}
  ]
}`

func TestDaemonSwitchesBetweenItsNICs(t *testing.T) {
	d := startDaemon(t, twoNICs)
	ping := testFrame(bcastMAC, testMAC(1), 0x0806, 28)
	d.nics["a"].uplink.Deliver(ping)
	if got := d.nics["b"].next(t, "broadcast at b"); !bytes.Equal(got, ping) {
		t.Fatalf("b got % x", got)
	}
	d.nics["a"].none(t, "a (the sender)")
}

func TestDaemonStatusOverControlSocket(t *testing.T) {
	d := startDaemon(t, twoNICs)
	d.nics["a"].uplink.Deliver(testFrame(bcastMAC, testMAC(1), 0x0806, 28))
	d.nics["b"].next(t, "broadcast at b")

	st := d.status(t)
	if len(st.NICs) != 2 || st.NICs[0].Name != "a" || st.NICs[1].MAC != "52:54:00:00:00:02" {
		t.Fatalf("nics = %+v", st.NICs)
	}
	if st.NICs[0].Port["rx_frames"] != 1 || st.NICs[1].Port["tx_frames"] != 1 {
		t.Errorf("port counters a=%v b=%v", st.NICs[0].Port, st.NICs[1].Port)
	}
	if string(st.NICs[0].Device) != `{"session":"none"}` {
		t.Errorf("device status = %s", st.NICs[0].Device)
	}
	if len(st.Switch.MACs) != 2 || st.Switch.MACs[0].Port != "a" || !st.Switch.MACs[1].Static || st.Fabric != nil {
		t.Errorf("switch macs %+v fabric %+v", st.Switch.MACs, st.Fabric)
	}
	if filepath.Base(st.Control) != "ctl.sock" || !filepath.IsAbs(st.NICs[0].Socket) {
		t.Errorf("paths: control %s socket %s", st.Control, st.NICs[0].Socket)
	}
	if fi, err := os.Stat(filepath.Dir(st.NICs[1].Socket)); err != nil || !fi.IsDir() {
		t.Errorf("the directory of a listening NIC's socket was not created: %v", err)
	}
	var methods []string
	control.Call(context.Background(), d.ControlSocket(), "methods", nil, &methods)
	if fmt.Sprint(methods) != "[capture.read capture.start capture.stop conns fabric.add_peer fabric.impair methods nic.firmware status]" {
		t.Errorf("methods = %v", methods)
	}
}

func TestDaemonLocksNICPortsToTheirMAC(t *testing.T) {
	d := startDaemon(t, `{
  "control": "ctl.sock",
  "nics": [
    {"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01"},
    {"name": "b", "socket": "b.sock", "mac": "52:54:00:00:00:02"},
    {"name": "c", "socket": "c.sock", "mac": "52:54:00:00:00:03", "any_source_mac": true}
  ]
}`)
	d.nics["a"].uplink.Deliver(testFrame(bcastMAC, testMAC(9), 0x0800, 20)) // a spoofs
	d.nics["b"].uplink.Deliver(testFrame(bcastMAC, testMAC(1), 0x0800, 20)) // b claims a's MAC
	d.nics["c"].uplink.Deliver(testFrame(bcastMAC, testMAC(2), 0x0800, 20)) // so does c, b's
	marker := testFrame(testMAC(1), testMAC(8), 0x0800, 20)                 // c may use any source
	d.nics["c"].uplink.Deliver(marker)
	if got := d.nics["a"].next(t, "c's frame at a"); !bytes.Equal(got, marker) {
		t.Fatalf("a got % x, want only c's frame", got)
	}
	d.nics["b"].none(t, "b")
	st := d.status(t)
	if st.NICs[0].Port["rx_spoofed"] != 1 || st.NICs[1].Port["rx_spoofed"] != 1 || st.NICs[2].Port["rx_pinned_source"] != 1 {
		t.Errorf("a %v\nb %v\nc %v", st.NICs[0].Port, st.NICs[1].Port, st.NICs[2].Port)
	}
}

func TestDaemonShutsDownCleanly(t *testing.T) {
	d := startDaemon(t, twoNICs)
	sock := d.ControlSocket()
	if err := d.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left behind: %v", err)
	}
	for name, n := range d.nics {
		if !n.closed.Load() {
			t.Errorf("nic %s not closed", name)
		}
	}
}

func TestDaemonRefusesABusyControlSocket(t *testing.T) {
	d := startDaemon(t, twoNICs)
	cfg := *d.cfg
	cfg.NICs = nil
	if _, err := NewDaemon(&cfg, DaemonOptions{Logger: quietLog}); !errors.Is(err, control.ErrInUse) {
		t.Fatalf("second daemon on the same socket: %v, want ErrInUse", err)
	}
	d.status(t) // the first one is undisturbed
}

func TestDaemonReleasesEverythingWhenANICFails(t *testing.T) {
	dir := t.TempDir()
	cfg, err := ParseConfig([]byte(twoNICs))
	if err != nil {
		t.Fatal(err)
	}
	cfg.resolve(dir)
	cfg.Fabric = &FabricSpec{Listen: "127.0.0.1:0", Paths: 1, KeyFile: testKeyFile}
	var built []*testNIC
	_, err = NewDaemon(cfg, DaemonOptions{Logger: quietLog, NewNIC: func(spec NICSpec, up l2.Sink) (DaemonNIC, error) {
		if spec.Name == "b" {
			return nil, errors.New("socket busy")
		}
		n := &testNIC{inbox: newInbox(), spec: spec, uplink: up}
		built = append(built, n)
		return n, nil
	}})
	if err == nil {
		t.Fatal("NewDaemon succeeded with a failing NIC")
	}
	if _, err := os.Stat(cfg.Control); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left behind: %v", err)
	}
	if len(built) != 1 || !built[0].closed.Load() {
		t.Error("the NIC built before the failure was not closed")
	}
}

func fabricConfig(nic, mac string) string {
	return fmt.Sprintf(`{
  "control": "ctl.sock",
  "nics": [{"name": %q, "socket": "n.sock", "mac": %q}],
  "fabric": {"listen": "127.0.0.1:0", "paths": 2%s}
}`, nic, mac, keyJSON())
}

func TestDaemonsExchangeFramesOverTheFabric(t *testing.T) {
	a := startDaemon(t, fabricConfig("a", "52:54:00:00:00:01"))
	b := startDaemon(t, fabricConfig("b", "52:54:00:00:00:02"))
	// Peers join at run time through the control socket.
	for _, pair := range [][2]*testDaemon{{a, b}, {b, a}} {
		var peers []fabric.PeerStatus
		err := control.Call(context.Background(), pair[0].ControlSocket(), "fabric.add_peer",
			map[string]string{"addr": pair[1].Fabric().LocalAddr().String()}, &peers)
		if err != nil || len(peers) != 1 {
			t.Fatalf("fabric.add_peer: %v %+v", err, peers)
		}
	}
	err := control.Call(context.Background(), a.ControlSocket(), "fabric.add_peer", map[string]string{"addr": "nowhere"}, nil)
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != control.CodeBadParams {
		t.Errorf("bad peer address: %v, want bad_params", err)
	}

	arp := testFrame(bcastMAC, testMAC(1), 0x0806, 28)
	a.nics["a"].uplink.Deliver(arp)
	if got := b.nics["b"].next(t, "broadcast at b"); !bytes.Equal(got, arp) {
		t.Fatalf("b got % x", got)
	}
	reply := testFrame(testMAC(1), testMAC(2), 0x0800, 1500-ethHeaderLen)
	b.nics["b"].uplink.Deliver(reply)
	if got := a.nics["a"].next(t, "reply at a"); !bytes.Equal(got, reply) {
		t.Fatalf("a got % x", got)
	}
	st := a.status(t)
	if st.Fabric == nil || st.Fabric.Paths != 2 || st.Fabric.Counters["rx_delivered"] != 1 || len(st.Fabric.Peers) != 1 {
		t.Errorf("fabric status = %+v", st.Fabric)
	}
	var sw map[string]uint64
	for _, p := range st.Switch.Ports {
		if p.Name == "fabric" {
			sw = p.Counters
		}
	}
	if sw["rx_frames"] != 1 || sw["tx_frames"] != 1 {
		t.Errorf("fabric switch port counters = %v", sw)
	}
}

func TestDaemonSetsImpairmentOverControlSocket(t *testing.T) {
	d := startDaemon(t, fabricConfig("a", "52:54:00:00:00:01"))
	var got fabric.Impairment
	err := control.Call(context.Background(), d.ControlSocket(), "fabric.impair", fabric.Impairment{LossPercent: 5, Seed: 7}, &got)
	if err != nil || got.LossPercent != 5 || got.Seed != 7 {
		t.Fatalf("impair: %+v, %v", got, err)
	}
	err = control.Call(context.Background(), d.ControlSocket(), "fabric.impair", fabric.Impairment{LossPercent: 500}, nil)
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != control.CodeBadParams {
		t.Errorf("500%% loss: %v, want bad_params", err)
	}
	if st := d.status(t); st.Fabric.Impairment.LossPercent != 5 {
		t.Errorf("status impairment = %+v", st.Fabric.Impairment)
	}
	raw, _ := json.Marshal(d.Status())
	if !bytes.Contains(raw, []byte(`"loss_percent":5`)) {
		t.Errorf("status JSON lacks the impairment: %s", raw)
	}
}

// TestDaemonRunsItsNICsPortsOnPortCoresGoroutines: by default every NIC's
// Falcon port runs on one goroutine; port_cores spreads them, in config
// order, and is bounded.
func TestDaemonRunsItsNICsPortsOnPortCoresGoroutines(t *testing.T) {
	const three = `{"control": "ctl.sock", %s "nics": [
	  {"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01"},
	  {"name": "b", "socket": "b.sock", "mac": "52:54:00:00:00:02"},
	  {"name": "c", "socket": "c.sock", "mac": "52:54:00:00:00:03"}]}`
	runsOn := func(d *testDaemon) []*port.Port {
		var r []*port.Port
		for _, name := range []string{"a", "b", "c"} {
			r = append(r, d.nic(name).falcon.RunsOn())
		}
		return r
	}
	d := startDaemon(t, fmt.Sprintf(three, ""))
	if r := runsOn(d); r[0] != d.nic("a").falcon || r[1] != r[0] || r[2] != r[0] {
		t.Fatal("default: the three ports do not all run on a's goroutine")
	}
	d = startDaemon(t, fmt.Sprintf(three, `"port_cores": 2,`))
	if r := runsOn(d); r[0] != d.nic("a").falcon || r[1] != d.nic("b").falcon || r[2] != r[0] {
		t.Fatal("port_cores 2: want a and b on their own goroutines, c on a's")
	}
	d = startDaemon(t, fmt.Sprintf(three, `"port_cores": 8,`))
	if r := runsOn(d); r[0] == r[1] || r[1] == r[2] || r[0] == r[2] {
		t.Fatal("port_cores 8: the three ports share a goroutine")
	}
	for _, bad := range []string{`"port_cores": -1,`, `"port_cores": 65,`} {
		if _, err := ParseConfig([]byte(fmt.Sprintf(three, bad))); err == nil || !strings.Contains(err.Error(), "port_cores") {
			t.Fatalf("%s: err %v", bad, err)
		}
	}
}
