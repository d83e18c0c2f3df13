package fabric

import "net/netip"

// Link is the fabric as one peer sees it through one payload kind: the
// shape of falcon/link.Link (Send(pkt, flow)), so the Falcon transport and
// the connection manager can use the daemon's UDP port.
type Link struct {
	f      *Fabric
	peer   netip.AddrPort
	kind   Kind
	origin [6]byte     // the sending NIC's MAC, for captures (zero: unknown)
	ob     *Outbox     // nil: each datagram is written at once
	p      *fabricPeer // the peer at peer, once an outbox link has looked it up
}

// Link returns a link that sends payloads of kind k to the peer at peer.
// Datagrams of kind k from any peer go to the receiver given to Handle.
func (f *Fabric) Link(peer netip.AddrPort, k Kind) *Link {
	return &Link{f: f, peer: netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port()), kind: k}
}

// Send sends pkt with flow label flow; the flow label picks the UDP source
// port (path). Failures are counted by the fabric (TxNoPeer, TxTooBig,
// TxError), not returned: a lost packet is the transport's to recover.
func (l *Link) Send(pkt []byte, flow uint32) {
	if l.ob != nil {
		l.ob.send(l, flow, pkt)
		return
	}
	_ = l.f.send(l.kind, l.peer, flow, pkt, l.origin)
}

// Reserve returns room for an n-byte payload in the outbox of a link from
// Outbox.Link, for a sender that builds its payload in place (a PSP
// sealer): a Send of a payload that starts where the room does, before any
// other send on the outbox, queues it without a copy. Nil for a link
// without an outbox, or when n is out of range; the room is valid only
// until the outbox's next send or Flush.
func (l *Link) Reserve(n int) []byte {
	if l.ob == nil {
		return nil
	}
	return l.ob.reserve(n)
}

// From returns a copy of the link that says its packets come from the NIC
// with MAC mac (a capture of that NIC then shows them).
func (l *Link) From(mac [6]byte) *Link {
	c := *l
	c.origin = mac
	return &c
}

// Peer returns the address the link sends to.
func (l *Link) Peer() netip.AddrPort { return l.peer }

// ReceiverFunc adapts a function to Receiver.
type ReceiverFunc func(from netip.AddrPort, flow uint32, payload []byte)

// ReceiveFabric calls fn(from, flow, payload).
func (fn ReceiverFunc) ReceiveFabric(from netip.AddrPort, flow uint32, payload []byte) {
	fn(from, flow, payload)
}
