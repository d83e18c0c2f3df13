package fabric

import (
	"log/slog"
	"net/netip"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// benchSender sends the benchmark's Falcon packets the way a port's
// connection does: through the fabric's Link for the peer.
type benchSender struct{ l *Link }

func newBenchSender(f *Fabric, peer netip.AddrPort) *benchSender {
	return &benchSender{l: f.Link(peer, KindFalcon)}
}

func (s *benchSender) send(pkt []byte, flow uint32) { s.l.Send(pkt, flow) }

// flush ends a burst (the port's end of a burst of work).
func (s *benchSender) flush() {}
