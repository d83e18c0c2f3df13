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
// attached: cores goroutines, each one port's, running the others'
// (Port.Adopt) as one NIC core runs several ports. The NICs spread over
// them in order, first (as nvme.cores has always placed them) those in
// nvmeFirst — the NICs with NVMe functions in the order they were built
// —, then the others in config order: a disk whose initiator and target
// NICs are in one daemon, or two guests' RDMA NICs, then pass each burst
// of frames between them without waking another thread.
func (d *Daemon) runPorts(nvmeFirst []*daemonNIC, cores int) {
	ctx, cancel := context.WithCancel(context.Background())
	d.ports.stop = cancel
	order := nvmeFirst
	for _, n := range d.nics {
		if n.nvme == nil {
			order = append(order, n)
		}
	}
	var runners []*port.Port
	for i, n := range order {
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
