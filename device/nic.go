package device

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"falconnic/device/cm"
	"falconnic/device/ether"
	"falconnic/device/fabric"
	"falconnic/device/l2"
	"falconnic/device/port"
	"falconnic/device/rdma"
	"falconnic/device/storage"
)

// daemonNIC is one NIC of the daemon with everything it owns: its Ethernet
// function (the vhost-user NIC, or what DaemonOptions.NewNIC built) on a
// switch port, its one Falcon port with the connection-manager agent of
// its connections, its RDMA function (a vhost-user NIC's) and, when the
// config gives it namespaces or disks, its NVMe function and disks. The
// daemon builds NICs from the config and asks them for their status.
type daemonNIC struct {
	spec   NICSpec
	eth    DaemonNIC
	sw     *fabric.SwitchPort
	falcon *port.Port
	cm     *cm.Agent
	rdma   *rdma.Func        // nil unless eth is a vhost-user NIC
	nvme   *storage.NVMeFunc // nil without namespaces or disks
	disks  []*nvmeDisk       // the disks whose initiator this NIC is
	mu     sync.Mutex        // err
	err    error             // why Serve stopped early, if it did
	psp    nicPSP            // the NIC's master keys and SA counters (daemon_secure.go)
}

// newNIC builds the NIC spec describes: its Ethernet function through
// newEth, on a new switch port, its Falcon port (not running yet: the NVMe
// function may still attach) and, for a vhost-user NIC, its RDMA function.
func (d *Daemon) newNIC(spec NICSpec, newEth func(NICSpec, l2.Sink) (DaemonNIC, error)) (*daemonNIC, error) {
	if !spec.Dial {
		if err := os.MkdirAll(filepath.Dir(spec.Socket), 0o755); err != nil {
			return nil, fmt.Errorf("nic %s: %w", spec.Name, err)
		}
	}
	sw := d.sw.AddPort(spec.Name)
	if !spec.AnySourceMAC {
		if err := sw.LockSource(spec.hwAddr()); err != nil {
			d.sw.RemovePort(sw)
			return nil, err
		}
	}
	eth, err := newEth(spec, sw)
	if err != nil {
		d.sw.RemovePort(sw)
		return nil, fmt.Errorf("nic %s: %w", spec.Name, err)
	}
	sw.Connect(eth)
	n := &daemonNIC{spec: spec, eth: eth, sw: sw, falcon: port.New(d.clk, nil)}
	if err := useSpec(n.falcon, spec); err != nil {
		eth.Close()
		d.sw.RemovePort(sw)
		return nil, fmt.Errorf("nic %s: %w", spec.Name, err)
	}
	n.cm = d.cm.Attach(n.mac(), n.falcon)
	if err := d.secureNIC(n); err != nil {
		d.sw.RemovePort(sw)
		return nil, fmt.Errorf("nic %s: %w", spec.Name, err)
	}
	if v, ok := eth.(*ether.NIC); ok {
		n.rdma = rdma.New(v.MAC(), v.Deliver, n.cm, n.falcon)
		if ips, _ := spec.ips(); ips != nil {
			n.rdma.SetGuestAddrs(ips)
		}
		n.rdma.SetPolling(spec.pollConfig())
		v.Attach("rdma", n.rdma)
	}
	return n, nil
}

// useSpec sets the port's firmware and multipath from the NIC's config.
func useSpec(p *port.Port, spec NICSpec) error {
	if spec.Firmware != nil {
		if err := p.UseFirmware(*spec.Firmware); err != nil {
			return err
		}
	}
	if spec.Multipath != nil {
		return p.UseMultipath(*spec.Multipath)
	}
	return nil
}

// mac returns the NIC's MAC.
func (n *daemonNIC) mac() [6]byte {
	var m [6]byte
	copy(m[:], n.spec.hwAddr())
	return m
}

// nic returns the daemon's NIC name, or nil.
func (d *Daemon) nic(name string) *daemonNIC {
	for _, n := range d.nics {
		if n.spec.Name == name {
			return n
		}
	}
	return nil
}

// report is the NIC in the daemon status: its config, its switch port's
// counters, its Ethernet function's status and its Falcon port.
func (n *daemonNIC) report() NICReport {
	r := NICReport{
		Name: n.spec.Name, Socket: n.spec.Socket, MAC: n.spec.MAC, QueuePairs: n.spec.QueuePairs,
		Port: n.sw.Counters().Snapshot(), Falcon: n.portStatus(),
	}
	n.mu.Lock()
	if n.err != nil {
		r.Error = n.err.Error()
	}
	n.mu.Unlock()
	if raw, err := json.Marshal(n.eth.StatusJSON()); err == nil {
		r.Device = raw
	} else if r.Error == "" {
		r.Error = "status: " + err.Error()
	}
	return r
}

// newVhostNIC builds the vhost-user NIC (ether.NIC) for spec, with uplink
// (its switch port) as where guest-transmitted frames go, on the daemon's
// clock.
func (d *Daemon) newVhostNIC(spec NICSpec, uplink l2.Sink) (DaemonNIC, error) {
	return ether.New(ether.Config{
		Name:       spec.Name,
		Socket:     spec.Socket,
		MAC:        spec.hwAddr(),
		QueuePairs: spec.QueuePairs,
		Dial:       spec.Dial,
		Clock:      d.clk,
	}, uplink)
}

// The vhost-user NIC is what the daemon runs by default.
var _ DaemonNIC = (*ether.NIC)(nil)
