package device

import (
	"net/netip"

	"falconnic/device/cm"
	"falconnic/falcon"
)

// NewConnManager returns the connection manager of a daemon whose fabric is
// f (nil: NICs of this daemon only). With a fabric it receives the
// fabric's Falcon packets (KindFalcon) and CM messages (KindCM).
func NewConnManager(f *Fabric) *cm.Manager {
	if f == nil {
		return cm.New(nil)
	}
	m := cm.New(cmFabric{f})
	_ = f.Handle(KindFalcon, FabricReceiverFunc(m.ReceiveFalcon))
	_ = f.Handle(KindCM, FabricReceiverFunc(m.ReceiveCM))
	return m
}

// cmFabric is the connection manager's view of the fabric: CM messages
// travel as KindCM, Falcon packets as KindFalcon.
type cmFabric struct{ f *Fabric }

func (c cmFabric) SendToMAC(mac [6]byte, msg []byte) error { return c.f.SendToMAC(mac, KindCM, msg) }

func (c cmFabric) Send(dst netip.AddrPort, msg []byte) error { return c.f.Send(KindCM, dst, 0, msg) }

func (c cmFabric) FalconLink(peer netip.AddrPort) falcon.Link { return c.f.Link(peer, KindFalcon) }
