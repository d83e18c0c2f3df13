package device

import (
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
// vhostuser calls it on devices that implement it (Session.setMem and
// session teardown).
func (d *netDev) SetMemTable(t *vhostuser.MemTable) {
	if r := d.nic.rdma.Load(); r != nil {
		r.SetMemTable(t)
	}
}
