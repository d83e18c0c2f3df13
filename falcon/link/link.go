package link

// Link transmits Falcon packets. It is the transport's only output: the
// engines hand every packet they emit to a Link.
type Link interface {
	// Send transmits one Falcon packet (header, payload and ICV) on flow,
	// the packet's flow label: multipath fabrics pick a path by it. The link
	// copies pkt; the caller may reuse its buffer as soon as Send returns.
	Send(pkt []byte, flow uint32)
}

// Receiver consumes a delivered packet. pkt is valid only during the call:
// the link reuses its buffer afterwards.
type Receiver func(pkt []byte, flow uint32)

// Func adapts a function to the Link interface.
type Func func(pkt []byte, flow uint32)

// Send calls f(pkt, flow).
func (f Func) Send(pkt []byte, flow uint32) { f(pkt, flow) }

// Discard is a Link that drops everything.
var Discard Link = Func(func([]byte, uint32) {})
