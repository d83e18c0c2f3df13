package cm

import (
	"net/netip"

	"falconnic/device/fabric"
	"falconnic/falcon"
)

// NewOnFabric returns the connection manager of a daemon whose fabric port
// is f (nil: NICs of this daemon only). With a fabric it receives the
// fabric's Falcon packets (KindFalcon) and CM messages (KindCM).
func NewOnFabric(f *fabric.Fabric) *Manager {
	if f == nil {
		return New(nil)
	}
	m := New(onFabric{f})
	_ = f.Handle(fabric.KindFalcon, fabric.ReceiverFunc(m.ReceiveFalcon))
	_ = f.Handle(fabric.KindCM, fabric.ReceiverFunc(m.ReceiveCM))
	return m
}

// onFabric is the connection manager's view of the fabric: CM messages
// travel as KindCM, Falcon packets as KindFalcon.
type onFabric struct{ f *fabric.Fabric }

func (c onFabric) SendToMAC(mac [6]byte, msg []byte) error {
	return c.f.SendToMAC(mac, fabric.KindCM, msg)
}

func (c onFabric) Send(dst netip.AddrPort, msg []byte) error {
	return c.f.Send(fabric.KindCM, dst, 0, msg)
}

func (c onFabric) FalconLink(peer netip.AddrPort) falcon.Link {
	return c.f.Link(peer, fabric.KindFalcon)
}

// FalconBatch implements BatchNet: a fabric outbox, sent with sendmmsg
// (and UDP GSO where the kernel offers it) at each Flush.
func (c onFabric) FalconBatch() FalconBatch { return fabricBatch{c.f.NewOutbox()} }

type fabricBatch struct{ ob *fabric.Outbox }

func (b fabricBatch) Link(peer netip.AddrPort) falcon.Link { return b.ob.Link(peer, fabric.KindFalcon) }
func (b fabricBatch) Flush()                               { b.ob.Flush() }
