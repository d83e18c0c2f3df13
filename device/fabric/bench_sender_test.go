package fabric

import (
	"log/slog"
	"net/netip"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// benchSender sends the benchmark's Falcon packets the way a port's
// connection does: through a Link of the port's outbox, flushed at the
// end of each burst.
type benchSender struct {
	ob *Outbox
	l  *Link
}

func newBenchSender(f *Fabric, peer netip.AddrPort) *benchSender {
	ob := f.NewOutbox()
	return &benchSender{ob: ob, l: ob.Link(peer, KindFalcon)}
}

func (s *benchSender) send(pkt []byte, flow uint32) { s.l.Send(pkt, flow) }

// reserve lends room in the outbox for a payload sealed in place.
func (s *benchSender) reserve(n int) []byte { return s.l.Reserve(n) }

// flush ends a burst (the port's end of a burst of work).
func (s *benchSender) flush() { s.ob.Flush() }
