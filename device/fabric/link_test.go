package fabric

import (
	"net/netip"
	"testing"
	"time"

	"falconnic/falcon/link"
)

// The fabric is a Falcon link: the transport can send on it as is.
var _ link.Link = (*Link)(nil)

func TestFabricLinkFeedsAFalconReceiver(t *testing.T) {
	a, b := newNode(t, Options{}), newNode(t, Options{})
	mesh(t, a, b)
	got := make(chan uint32, 1)
	var recv link.Receiver = func(pkt []byte, flow uint32) {
		if string(pkt) == "falcon" {
			got <- flow
		}
	}
	b.fab.Handle(KindFalcon, ReceiverFunc(func(_ netip.AddrPort, flow uint32, p []byte) { recv(p, flow) }))
	var l link.Link = a.fab.Link(b.fab.LocalAddr(), KindFalcon)
	l.Send([]byte("falcon"), 3)
	select {
	case flow := <-got:
		if flow != 3 {
			t.Errorf("flow %d, want 3", flow)
		}
	case <-time.After(waitBound):
		t.Fatal("falcon packet did not arrive")
	}
}
