package device

import (
	"context"
	"sync"

	"falconnic/internal/clock"
	"falconnic/vhostuser"
)

// AttachRDMA gives the NIC its RDMA function: control-channel frames from
// the guest go to it, and it sees the guest's memory table.
func (n *NIC) AttachRDMA(r *RDMAFunc) {
	n.rdma.Store(r)
	if r == nil {
		n.SetControlHandler(nil)
		return
	}
	n.SetControlHandler(r.HandleControl)
}

// RDMA returns the NIC's RDMA function, or nil.
func (n *NIC) RDMA() *RDMAFunc { return n.rdma.Load() }

// SetMemTable is called by the vhost-user session with each new guest
// memory table, and with nil when the session ends or the device is reset
// (the guest's GPAs may no longer belong to the driver). The RDMA
// function's DMA engine uses it; the session keeps its own reference, so
// the DMA engine takes one per access.
//
// vhostuser calls it on devices that implement it (see the coordinator
// note in the verbs report: Session.setMem and session teardown).
func (d *netDev) SetMemTable(t *vhostuser.MemTable) {
	if r := d.nic.rdma.Load(); r != nil {
		r.SetMemTable(t)
	}
}

// rdmaDaemon is the daemon's RDMA part: the connection manager and every
// NIC's RDMA function.
type rdmaDaemon struct {
	hub   *RDMAHub
	funcs []*RDMAFunc
}

// attachRDMA gives a vhost-user NIC its RDMA function.
func (d *Daemon) attachRDMA(nic DaemonNIC) {
	n, ok := nic.(*NIC)
	if !ok {
		return
	}
	if d.rdma.hub == nil {
		d.rdma.hub = NewRDMAHub(d.fabric)
	}
	r := NewRDMAFunc(n.MAC(), n.Deliver, d.rdma.hub, clock.Real)
	n.AttachRDMA(r)
	d.rdma.funcs = append(d.rdma.funcs, r)
}

// runRDMA starts every RDMA function's goroutine.
func (d *Daemon) runRDMA(ctx context.Context, wg *sync.WaitGroup) {
	for _, r := range d.rdma.funcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Run(ctx)
		}()
	}
}
