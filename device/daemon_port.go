package device

import (
	"context"
	"sync"

	"falconnic/falcon"
)

// daemonPorts are the daemon's Falcon ports, one per NIC, carrying every
// Falcon ULP of that NIC (RDMA and NVMe attach by protocol). They run from
// NewDaemon (disks need Identify before they serve) until close.
type daemonPorts struct {
	byName map[string]*FalconPort
	agents map[string]*CMAgent // each NIC's connection-manager agent
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// addPorts builds one port per NIC of the config (not running yet: the
// functions attach first).
func (d *Daemon) addPorts() {
	d.ports.byName, d.ports.agents = map[string]*FalconPort{}, map[string]*CMAgent{}
	for _, spec := range d.cfg.NICs {
		p := NewFalconPort(d.clk, nil)
		d.ports.byName[spec.Name] = p
		d.ports.agents[spec.Name] = d.cm.Attach(d.nicMAC(spec.Name), p)
	}
}

// port returns NIC name's port.
func (d *Daemon) port(name string) *FalconPort { return d.ports.byName[name] }

// runPorts starts the ports' goroutines once every function is attached.
// The ports of the NICs in shared (those with NVMe functions, in the
// order they were built) spread over cores goroutines, a port hosting the
// others (FalconPort.Host): a disk whose initiator and target NICs are in
// one daemon then passes each burst of frames between them without waking
// another thread. Every other NIC's port has a goroutine of its own.
func (d *Daemon) runPorts(shared []string, cores int) {
	ctx, cancel := context.WithCancel(context.Background())
	d.ports.stop = cancel
	var hosts []*FalconPort
	for i, name := range shared {
		p := d.port(name)
		if i < max(cores, 1) {
			hosts = append(hosts, p)
			continue
		}
		hosts[i%len(hosts)].Host(p)
	}
	for _, spec := range d.cfg.NICs {
		p := d.port(spec.Name)
		d.ports.wg.Add(1)
		go func() { defer d.ports.wg.Done(); p.Run(ctx) }()
	}
}

// closePorts stops the ports (after the functions' users: disks' servers
// hand the ports their last requests).
func (d *Daemon) closePorts() {
	if d.ports.stop != nil {
		d.ports.stop()
		d.ports.wg.Wait()
	}
}

// FalconPortStatus is a NIC's Falcon port in the daemon status: its counters
// (the port's queue and demux, the endpoint's retransmissions, ACKs and
// drops) and its connections per protocol.
type FalconPortStatus struct {
	Conns    map[string]int    `json:"conns"`
	Counters map[string]uint64 `json:"counters"`
}

// portStatus reports NIC name's port (nil if it has none or it stopped).
func (d *Daemon) portStatus(name string) *FalconPortStatus {
	p := d.port(name)
	if p == nil {
		return nil
	}
	st := &FalconPortStatus{Counters: p.Stats.Set().Snapshot()}
	if !p.Call(func(ep *falcon.Endpoint) {
		for k, v := range ep.Snapshot() {
			st.Counters[k] = v
		}
		st.Conns = p.ConnCounts()
	}) {
		return nil
	}
	return st
}
