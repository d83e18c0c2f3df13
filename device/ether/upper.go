package ether

import (
	"falconnic/vhostuser"
)

// An Upper is a function that rides on the NIC's netdev, as the RDMA
// function does: it receives the control-channel
// frames the guest sends to the NIC's own MAC, sees each guest memory
// table, and its counters appear in the NIC's status under its name.
type Upper interface {
	// HandleControl receives one control-channel frame on the TX ring's
	// goroutine; it must copy what it keeps.
	HandleControl(frame []byte)
	// SetMemTable receives each new guest memory table, and nil when the
	// session ends or the device is reset.
	SetMemTable(t *vhostuser.MemTable)
	// Status returns the function's counters.
	Status() map[string]uint64
}

type upperBox struct {
	name string
	u    Upper
}

// Attach gives the NIC its upper function (nil detaches it): control-channel
// frames from the guest go to it, it sees the guest's memory table, and its
// counters are reported prefixed with name and a dot.
func (n *NIC) Attach(name string, u Upper) {
	if u == nil {
		n.upper.Store(nil)
		n.SetControlHandler(nil)
		return
	}
	n.upper.Store(&upperBox{name: name, u: u})
	n.SetControlHandler(u.HandleControl)
}

// SetMemTable is called by the vhost-user session with each new guest
// memory table, and with nil when the session ends or the device is reset
// (the guest's GPAs may no longer belong to the driver). The upper
// function's DMA engine uses it; the session keeps its own reference, so
// the DMA engine takes one per access.
//
// vhostuser calls it on devices that implement it (Session.setMem and
// session teardown).
func (d *netDev) SetMemTable(t *vhostuser.MemTable) {
	if b := d.nic.upper.Load(); b != nil {
		b.u.SetMemTable(t)
	}
}

// ResetDevice is called by the vhost-user session on RESET_OWNER and
// RESET_DEVICE: an upper function that keeps the driver's objects
// (vhostuser.DeviceResetter) drops them [issue 18, finding 6].
func (d *netDev) ResetDevice() {
	if b := d.nic.upper.Load(); b != nil {
		if r, ok := b.u.(vhostuser.DeviceResetter); ok {
			r.ResetDevice()
		}
	}
}
