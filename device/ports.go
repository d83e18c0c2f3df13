package device

import (
	"context"
	"sync"

	"falconnic/device/port"
	"falconnic/falcon"
)

// daemonPorts runs the NICs' Falcon ports: from NewDaemon (disks need
// Identify before they serve) until close.
type daemonPorts struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// runPorts starts the NICs' port goroutines once every function is
// attached. The ports of the NICs in shared (those with NVMe functions, in
// the order they were built) spread over cores goroutines, one port's
// goroutine running the others (Port.Adopt): a disk whose initiator and target NICs are
// in one daemon then passes each burst of frames between them without
// waking another thread. Every other NIC's port has a goroutine of its own.
func (d *Daemon) runPorts(shared []*daemonNIC, cores int) {
	ctx, cancel := context.WithCancel(context.Background())
	d.ports.stop = cancel
	var runners []*port.Port
	for i, n := range shared {
		if i < max(cores, 1) {
			runners = append(runners, n.falcon)
			continue
		}
		runners[i%len(runners)].Adopt(n.falcon)
	}
	for _, n := range d.nics {
		p := n.falcon
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

// FalconPortStatus is a NIC's Falcon port in the daemon status: its
// connections per protocol, its counters (the port's queue and demux,
// the endpoint's retransmissions, ACKs and drops) and its firmware with
// the congestion state of its busiest connections.
type FalconPortStatus struct {
	Conns    map[string]int       `json:"conns"`
	Counters map[string]uint64    `json:"counters"`
	Firmware *port.FirmwareStatus `json:"firmware,omitempty"`
}

// portStatus reports the NIC's port (nil once it stopped).
func (n *daemonNIC) portStatus() *FalconPortStatus {
	p := n.falcon
	st := &FalconPortStatus{Counters: p.Stats.Set().Snapshot()}
	if !p.Call(func(ep *falcon.Endpoint) {
		for k, v := range ep.Snapshot() {
			st.Counters[k] = v
		}
		st.Conns = p.ConnCounts()
		fw := p.FirmwareStatus(port.DefaultStatusConns)
		st.Firmware = &fw
	}) {
		return nil
	}
	return st
}
