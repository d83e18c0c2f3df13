package device

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"falconnic/device/ether/ethertest"
	"falconnic/device/l2"
	"falconnic/internal/control"
)

// qemuSide plays QEMU with `-chardev socket,server=on`: it listens on the
// NIC's socket before the daemon starts, so the daemon's NIC (dial: true)
// connects and the test accepts without polling.
type qemuSide struct {
	path string
	ln   *net.UnixListener
}

func listenLikeQEMU(t *testing.T, dir, name string) *qemuSide {
	t.Helper()
	path := filepath.Join(dir, name+".sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &qemuSide{path: path, ln: ln}
}

// boot accepts the NIC's connection and replays QEMU 7.2's virtio-net init
// and start with one queue pair; the guest posts RX buffers.
func (q *qemuSide) boot(t *testing.T) *ethertest.Guest {
	t.Helper()
	c, err := q.ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	g := ethertest.AttachConn(t, c, 1, ethertest.Acked1)
	g.PostRX(0, 16)
	return g
}

// startRealDaemon runs a daemon with the real vhost-user NICs named in nics
// (dial mode, QEMU sides listening in dir) and an optional fabric.
func startRealDaemon(t *testing.T, dir string, fabric bool, nics ...string) (*Daemon, map[string]*qemuSide) {
	t.Helper()
	sides := map[string]*qemuSide{}
	var specs []string
	for _, name := range nics {
		sides[name] = listenLikeQEMU(t, dir, name)
		specs = append(specs, fmt.Sprintf(`{"name":%q,"socket":%q,"mac":"52:54:00:00:00:%02x","dial":true}`, name, sides[name].path, name[0]))
	}
	cfgJSON := fmt.Sprintf(`{"control":%q,"nics":[%s]`, filepath.Join(dir, "ctl-"+strings.Join(nics, "")+".sock"), strings.Join(specs, ","))
	if fabric {
		cfgJSON += `,"fabric":{"listen":"127.0.0.1:0"` + keyJSON() + `}`
	}
	cfg, err := ParseConfig([]byte(cfgJSON + "}"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDaemon(cfg, DaemonOptions{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon Run: %v", err)
		}
	})
	return d, sides
}

func hw(s string) net.HardwareAddr { h, _ := net.ParseMAC(s); return h }

func TestDaemonSwitchesGuestsOverVhostUser(t *testing.T) {
	dir := t.TempDir()
	d, sides := startRealDaemon(t, dir, false, "a", "b")
	ga, gb := sides["a"].boot(t), sides["b"].boot(t)
	macA, macB := hw(d.cfg.NICs[0].MAC), hw(d.cfg.NICs[1].MAC)

	arp := ethertest.EthFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, macA, 0x0806, "who has 10.0.0.2")
	ga.Send(0, arp)
	if got := gb.RecvN(0, 1)[0]; !bytes.Equal(got, arp) {
		t.Fatalf("guest B got % x, want the broadcast", got)
	}
	reply := ethertest.EthFrame(macA, macB, 0x0806, "10.0.0.2 is at B")
	gb.Send(0, reply)
	if got := ga.RecvN(0, 1)[0]; !bytes.Equal(got, reply) {
		t.Fatalf("guest A got % x, want the reply", got)
	}
	// A control-channel frame from guest A never reaches guest B: the
	// guest sends it, then a marker; B sees only the marker.
	ga.Send(0, ethertest.EthFrame(macB, macA, l2.EtherTypeControl, "doorbell"), ethertest.EthFrame(macB, macA, 0x0800, "marker"))
	if got := gb.RecvN(0, 1)[0]; !bytes.HasSuffix(got, []byte("marker")) {
		t.Fatalf("guest B got % x, want only the marker", got)
	}

	var st Status
	if err := control.Call(context.Background(), d.ControlSocket(), "status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.NICs) != 2 || !strings.Contains(string(st.NICs[0].Device), `"session":`) || !strings.Contains(string(st.NICs[0].Device), `"role":"rx0"`) {
		t.Errorf("NIC status lacks the device's session and queues: %s", st.NICs[0].Device)
	}
	if st.NICs[1].Port["tx_frames"] != 2 || st.NICs[0].Port["tx_frames"] != 1 {
		t.Errorf("port counters a=%v b=%v", st.NICs[0].Port, st.NICs[1].Port)
	}
}

func TestDaemonsConnectGuestsOverTheFabric(t *testing.T) {
	dir := t.TempDir()
	da, sa := startRealDaemon(t, dir, true, "a")
	db, sb := startRealDaemon(t, dir, true, "b")
	da.Fabric().AddPeer(db.Fabric().LocalAddr())
	db.Fabric().AddPeer(da.Fabric().LocalAddr())
	ga, gb := sa["a"].boot(t), sb["b"].boot(t)
	macA, macB := hw(da.cfg.NICs[0].MAC), hw(db.cfg.NICs[0].MAC)

	arp := ethertest.EthFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, macA, 0x0806, "who has 10.0.0.2")
	ga.Send(0, arp)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("A: %+v\nB: %+v", da.Status(), db.Status())
		}
	})
	if got := gb.RecvN(0, 1)[0]; !bytes.Equal(got, arp) {
		t.Fatalf("guest B got % x, want the broadcast", got)
	}
	big := ethertest.EthFrame(macA, macB, 0x0800, strings.Repeat("x", 1486))
	gb.Send(0, big)
	if got := ga.RecvN(0, 1)[0]; !bytes.Equal(got, big) {
		t.Fatalf("guest A got %d bytes, want the 1500-byte reply", len(got))
	}
	if got := db.Fabric().Status().Counters["tx_flooded"]; got != 0 {
		t.Errorf("daemon B flooded %d frames; the reply's destination was learned", got)
	}
}
