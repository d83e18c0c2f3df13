package device

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"falconnic/device/port"
	"falconnic/device/storage"
	"falconnic/internal/control"
)

// TestDaemonFirmwareOverTheFabric: each NIC runs the firmware its config
// names (Swift by default); over the UDP fabric Swift gets delay samples
// from the Falcon packets' timestamps and status shows the connection's
// windows, RTT, delay and target; the control socket swaps a NIC's
// firmware while its disk is in use, and refuses a bad spec or NIC.
func TestDaemonFirmwareOverTheFabric(t *testing.T) {
	la, lb := freeUDPPort(t), freeUDPPort(t)
	storeCfg := strings.Replace(storeConfig(lb, la, storage.NamespaceMemory, ""), `"mac": "52:54:00:00:00:02"}`,
		`"mac": "52:54:00:00:00:02", "firmware": {"name": "fixed", "fcwnd": 16}}`, 1)
	store := startDaemon(t, storeCfg)
	host := startDaemon(t, hostConfig(la, lb, ""))
	r := remoteDisk(t, host)
	for round := 0; round < 4; round++ {
		r.writeRead(uint64(round)*64*8, 16, byte(round+1))
	}
	fw := func(d *testDaemon) *port.FirmwareStatus {
		t.Helper()
		st := d.status(t)
		if len(st.NICs) != 1 || st.NICs[0].Falcon == nil || st.NICs[0].Falcon.Firmware == nil {
			t.Fatalf("status has no firmware: %+v", st.NICs)
		}
		return st.NICs[0].Falcon.Firmware
	}
	h := fw(host)
	if h.Firmware.Name != port.FirmwareSwift || h.Counters["samples"] == 0 || h.ConnsTotal != 1 || len(h.Conns) != 1 {
		t.Fatalf("host firmware %+v", h)
	}
	c := h.Conns[0]
	t.Logf("NVMe connection over UDP loopback: rtt %v, flow delay %v, target %v, fcwnd %.1f", c.RTT, c.Flows[0].Delay, c.Flows[0].Target, c.Fcwnd)
	if c.Protocol != "nvme" || c.RTT <= 0 || len(c.Flows) != 1 || c.Flows[0].RTT <= 0 || c.Flows[0].Delay <= 0 || c.Flows[0].Target <= 0 {
		t.Errorf("host connection %+v", c)
	}
	if s := fw(store); s.Firmware.Name != port.FirmwareFixed || s.Firmware.Fcwnd != 16 || s.Counters["samples"] == 0 {
		t.Errorf("store firmware %+v %v", s.Firmware, s.Counters)
	}

	var got port.FirmwareStatus
	sock := host.ControlSocket()
	swap := map[string]any{"nic": "host", "firmware": port.FirmwareSpec{Name: port.FirmwareFixed}}
	if err := control.Call(context.Background(), sock, "nic.firmware", swap, &got); err != nil || got.Firmware.Name != port.FirmwareFixed {
		t.Fatalf("swap to fixed: %+v, %v", got.Firmware, err)
	}
	r.writeRead(8*64*8, 16, 9)
	swap["firmware"] = port.FirmwareSpec{BaseTarget: port.Duration(2 * 1000 * 1000)}
	if err := control.Call(context.Background(), sock, "nic.firmware", swap, &got); err != nil || got.Firmware.Name != port.FirmwareSwift ||
		got.Firmware.BaseTarget != port.Duration(2*1000*1000) {
		t.Fatalf("swap back to swift: %+v, %v", got.Firmware, err)
	}
	r.writeRead(9*64*8, 16, 10)
	if err := control.Call(context.Background(), sock, "nic.firmware", map[string]any{"nic": "host"}, &got); err != nil || got.Firmware.Name != port.FirmwareSwift {
		t.Errorf("asking without a spec: %+v, %v", got.Firmware, err)
	}
	for _, bad := range []map[string]any{
		{"nic": "host", "firmware": map[string]any{"name": "cubic"}},
		{"nic": "nope", "firmware": map[string]any{"name": "fixed"}},
	} {
		err := control.Call(context.Background(), sock, "nic.firmware", bad, nil)
		var ce *control.Error
		if !errors.As(err, &ce) || ce.Code != control.CodeBadParams {
			t.Errorf("%v: %v, want bad_params", bad, err)
		}
	}
}

// TestConfigChecksFirmware: a NIC's firmware must be known and sane.
func TestConfigChecksFirmware(t *testing.T) {
	for _, fw := range []string{`{"name": "cubic"}`, `{"max_mdf": 1.5}`, `{"base_target": 5}`, `{"name": "fixed", "fcwnd": 0.5}`} {
		cfg := `{"nics": [{"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01", "firmware": ` + fw + `}]}`
		if _, err := ParseConfig([]byte(cfg)); !errors.Is(err, ErrConfig) {
			t.Errorf("firmware %s: %v, want a config error", fw, err)
		}
	}
	cfg := `{"nics": [{"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01", "firmware": {"name": "fixed"}}]}`
	if c, err := ParseConfig([]byte(cfg)); err != nil || c.NICs[0].Firmware.Name != port.FirmwareFixed {
		t.Errorf("fixed firmware: %v", err)
	}
}

// TestDaemonMultipathOverTheFabric: with four fabric paths and four flows
// per connection, a disk's connection spreads over four labels, and Swift
// measures each flow's RTT from the ACKs that come back on it.
func TestDaemonMultipathOverTheFabric(t *testing.T) {
	la, lb := freeUDPPorts(t, 4), freeUDPPorts(t, 4)
	mp := `, "multipath": {"flows": 4}}`
	storeCfg := strings.Replace(storeConfig(lb, la, storage.NamespaceMemory, `, "paths": 4`), `"mac": "52:54:00:00:00:02"}`,
		`"mac": "52:54:00:00:00:02"`+mp, 1)
	hostCfg := strings.Replace(hostConfig(la, lb, `, "paths": 4`), `"mac": "52:54:00:00:00:01"}`, `"mac": "52:54:00:00:00:01"`+mp, 1)
	startDaemon(t, storeCfg)
	host := startDaemon(t, hostCfg)
	r := remoteDisk(t, host)
	// Which flow carries a packet depends on the windows the ACKs open, so
	// a loaded host may leave a flow unused for a while: write on (at most
	// 64 rounds) until every flow has carried one and measured its RTT.
	var fw *port.FirmwareStatus
	for round := 0; round < 64; round++ {
		r.writeRead(uint64(round%8)*64*8, 16, byte(round+1))
		if round < 7 {
			continue
		}
		fw = host.status(t).NICs[0].Falcon.Firmware
		if fw == nil || len(fw.Conns) != 1 || len(fw.Conns[0].Flows) != 4 {
			t.Fatalf("connections %+v", fw.Conns)
		}
		measured := 0
		for _, f := range fw.Conns[0].Flows {
			if f.RTT > 0 {
				measured++
			}
		}
		if measured == 4 {
			break
		}
	}
	for i, f := range fw.Conns[0].Flows {
		if f.Label&3 != uint32(i) || f.RTT <= 0 {
			t.Errorf("flow %d: %+v", i, f)
		}
	}
	cfg := `{"nics": [{"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01", "multipath": {"flows": 5}}]}`
	if _, err := ParseConfig([]byte(cfg)); !errors.Is(err, ErrConfig) {
		t.Errorf("5 flows: %v, want a config error", err)
	}
}

// freeUDPPorts returns a loopback address whose port and the n-1 after it
// are free now (a fabric with n paths binds them all).
func freeUDPPorts(t *testing.T, n int) string {
	t.Helper()
	for try := 0; try < 50; try++ {
		a := freeUDPPort(t)
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		for i := 1; i < n && ok; i++ {
			c, err := net.ListenPacket("udp", netip.AddrPortFrom(ap.Addr(), ap.Port()+uint16(i)).String())
			if err != nil {
				ok = false
				continue
			}
			c.Close()
		}
		if ok {
			return a
		}
	}
	t.Fatal("no run of free UDP ports")
	return ""
}
