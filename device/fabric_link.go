package device

import "net/netip"

// FabricLink is the fabric as one peer sees it through one payload kind: the
// shape of falcon/link.Link (Send(pkt, flow)), so the Falcon transport and
// the connection manager can use the daemon's UDP port.
type FabricLink struct {
	f    *Fabric
	peer netip.AddrPort
	kind FabricKind
}

// Link returns a link that sends payloads of kind k to the peer at peer.
// Datagrams of kind k from any peer go to the receiver given to Handle.
func (f *Fabric) Link(peer netip.AddrPort, k FabricKind) *FabricLink {
	return &FabricLink{f: f, peer: netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port()), kind: k}
}

// Send sends pkt with flow label flow; the flow label picks the UDP source
// port (path). Failures are counted by the fabric (TxNoPeer, TxTooBig,
// TxError), not returned: a lost packet is the transport's to recover.
func (l *FabricLink) Send(pkt []byte, flow uint32) { _ = l.f.Send(l.kind, l.peer, flow, pkt) }

// Peer returns the address the link sends to.
func (l *FabricLink) Peer() netip.AddrPort { return l.peer }

// FabricReceiverFunc adapts a function to FabricReceiver.
type FabricReceiverFunc func(from netip.AddrPort, flow uint32, payload []byte)

// ReceiveFabric calls fn(from, flow, payload).
func (fn FabricReceiverFunc) ReceiveFabric(from netip.AddrPort, flow uint32, payload []byte) {
	fn(from, flow, payload)
}
