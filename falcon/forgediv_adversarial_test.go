package falcon

import (
	"testing"
	"time"

	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// TestAdversarialForgedFutureIV [issue 18, finding 3]: one datagram with
// an IV far ahead of the peer's clock (here a BACK with IV = now + 2^30,
// sealed with the keyless CRC stand-in an attacker can compute) is
// dropped without moving the peer clock, and the connection lives: every
// later genuine datagram passes the replay check and every push completes.
// (With PSP the forgery fails its tag first: psp.RxSA.Open.)
func TestAdversarialForgedFutureIV(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1})
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.ua.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	push := func(from, n int) {
		for i := range n {
			if _, err := s.ca.Push(uint64(from+i), pattern(wire.RSN(from+i), 64)); err != nil {
				t.Fatal(err)
			}
		}
		s.settle()
	}
	push(1, 4)
	// The forgery, aimed at B's end of the connection (B's CID is 2).
	back := wire.AppendBACK(make([]byte, 0, 64), &wire.AckFields{CID: 2})
	forged := seal(back, wire.TimestampAt(s.clk.Now())+1<<30)
	s.b.Receive(forged, 0)
	if got := s.cb.Stats.RxIVAhead.Load(); got != 1 {
		t.Fatalf("forged IV: rx_drop_iv_ahead = %d", got)
	}
	s.wait(time.Millisecond)
	push(5, 20)
	s.wait(time.Millisecond)
	push(25, 20)
	ok := 0
	for _, c := range s.ua.cpls {
		if c.Status == tl.CmplAck {
			ok++
		}
	}
	if ok != 44 || s.cb.Stats.RxReplay.Load() != 0 || s.ca.Dead() || s.cb.Dead() {
		t.Fatalf("after the forgery: %d of 44 pushes completed, %d replay drops, dead %v/%v",
			ok, s.cb.Stats.RxReplay.Load(), s.ca.Dead(), s.cb.Dead())
	}
}
