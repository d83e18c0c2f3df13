package port

import (
	"falconnic/falcon"
	"falconnic/falcon/framebuf"
	"falconnic/falcon/wire"
)

// PacketOpener opens the PSP datagrams of one connection (its receive SA,
// package psp, adapted by the connection manager), owned by the port's
// goroutine: OpenPacket returns the Falcon packet, opened in place, and
// its IV timestamp (Falcon's T1/T3), or ok false for a datagram it
// refused — counted by the opener, which changes no state for it.
type PacketOpener interface {
	OpenPacket(dgram []byte) (pkt []byte, ts uint32, ok bool)
	// Trailer is how many bytes follow the packet in a datagram (PSP's
	// ICV): ReceiveSealed places the packet to end on a page, as
	// copyFrame does a frame's.
	Trailer() int
}

// ReceiveSealed queues a PSP datagram from the fabric for the connection
// whose receive SA is sa (copied; never blocks). The port's goroutine
// opens it with sa and hands the endpoint only what sa authenticated
// (falcon.SealingLink): a datagram that fails is dropped and counted
// before it reaches the endpoint.
func (p *Port) ReceiveSealed(dgram []byte, flow uint32, sa PacketOpener) {
	w := portWork{p: p, flow: flow, sa: sa, at: p.clk.Now()}
	w.pkt, w.buf = copyDatagram(dgram, sa.Trailer())
	select {
	case p.work <- w:
	default:
		p.Stats.RxQueueFull.Inc()
		putFrame(w.buf)
	}
}

// receiveSealed opens w's datagram in place and hands the packet, in the
// endpoint's envelope with PSP's IV timestamp, to the endpoint.
func (p *Port) receiveSealed(w portWork) {
	pkt, ts, ok := w.sa.OpenPacket(w.pkt)
	if !ok {
		putFrame(w.buf)
		return
	}
	p.Stats.RxPackets.Inc()
	p.cur = w.buf
	p.ep.ReceiveAuthenticated(falcon.Envelope(pkt, wire.Timestamp(ts)), w.flow, falcon.Mark{})
	putFrame(p.cur)
	p.cur = nil
}

// copyDatagram is copyFrame for a sealed datagram whose packet is
// followed by trailer bytes: the packet ends on a page once opened in
// place, so the NVMe target can keep a write's whole pages where they lie
// (KeepFrame) as it does for an unsealed frame.
func copyDatagram(dgram []byte, trailer int) (frame []byte, buf *framebuf.Buf) {
	buf = framebuf.Get(len(dgram))
	frame, ok := buf.Tail(len(dgram), trailer)
	if !ok {
		buf.Release()
		return append([]byte(nil), dgram...), nil
	}
	copy(frame, dgram)
	return frame, buf
}
