package falcon

import (
	"testing"
	"time"

	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// The receiver echoes the fabric's marks in its ACKs: the hop count of the
// latest transaction packet and the cumulative count of ECN-marked ones.
func TestAckEchoesHopCountAndECN(t *testing.T) {
	e, c, out := newLone(t)
	e.cfg.ULP.(*recULP).onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	e.ReceiveMarked(pushFrame(5, 2000, []byte("a")), 0, Mark{Hops: 3, ECN: true})
	e.ReceiveMarked(pushFrame(5, 2001, []byte("b")), 0, Mark{Hops: 3})
	e.ReceiveMarked(pushFrame(5, 2002, []byte("c")), 0, Mark{Hops: 1, ECN: true})
	e.cfg.Clock.(*clock.Manual).Advance(time.Millisecond)
	e.OnTimer(e.Now())
	if len(out.frames) == 0 {
		t.Fatal("no ACK sent")
	}
	pkt, _, ok := open(out.frames[len(out.frames)-1])
	if !ok {
		t.Fatal("ACK failed its ICV")
	}
	p, err := wire.Parse(pkt)
	if err != nil || (p.Type() != wire.TypeBACK && p.Type() != wire.TypeEACK) {
		t.Fatalf("last frame is %v (%v), want an ACK", p.Type(), err)
	}
	if a := p.Ack(); a.HopCount() != 1 || a.ECNCount() != 2 {
		t.Fatalf("ACK hop count %d, ECN count %d; want 1, 2", a.HopCount(), a.ECNCount())
	}
	if c.ecnCount != 2 {
		t.Fatalf("connection counted %d marks", c.ecnCount)
	}
}

// Receive (a link without marks) leaves the fields at zero.
func TestAckWithoutMarksIsZero(t *testing.T) {
	e, _, out := newLone(t)
	e.cfg.ULP.(*recULP).onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	e.Receive(pushFrame(5, 2000, []byte("a")), 0)
	e.cfg.Clock.(*clock.Manual).Advance(time.Millisecond)
	e.OnTimer(e.Now())
	pkt, _, _ := open(out.frames[len(out.frames)-1])
	p, _ := wire.Parse(pkt)
	if a := p.Ack(); a.HopCount() != 0 || a.ECNCount() != 0 {
		t.Fatalf("hop %d ECN %d", a.HopCount(), a.ECNCount())
	}
}
