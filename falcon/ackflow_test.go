package falcon

import (
	"testing"
	"time"

	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

type capFrame struct {
	data []byte
	flow uint32
}

type capLink struct{ frames []capFrame }

func (l *capLink) Send(p []byte, flow uint32) {
	l.frames = append(l.frames, capFrame{append([]byte(nil), p...), flow})
}

// TestAckPerFlow: when the coalesced ACK falls due, each flow the peer
// sent on since the last one gets an ACK on its own label, carrying the
// timestamps (t1 = its IV, t2 = its arrival) of that flow's latest packet.
func TestAckPerFlow(t *testing.T) {
	clk := clock.NewManual(time.Millisecond)
	la, lb := &capLink{}, &capLink{}
	a := New(Config{Clock: clk, Link: la, ULP: &recULP{name: "A"}})
	ub := &recULP{name: "B"}
	ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	b := New(Config{Clock: clk, Link: lb, ULP: ub})
	cc := ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1, Flows: 2, FlowLabels: [4]uint32{0x40, 0x81}}
	ca, err := a.Connect(cc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Connect(Mirror(cc)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := ca.Push(uint64(i), pattern(0, 100)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Microsecond)
	}
	if len(la.frames) != 2 || la.frames[0].flow != 0x40 || la.frames[1].flow != 0x81 {
		t.Fatalf("pushes went out on %+v, want labels 0x40 then 0x81", la.frames)
	}
	var iv [2]wire.Timestamp
	var arrived [2]wire.Timestamp
	for i, f := range la.frames {
		_, iv[i], _ = open(f.data)
		clk.Advance(3 * time.Microsecond)
		arrived[i] = wire.TimestampAt(clk.Now())
		b.Receive(f.data, f.flow)
	}
	clk.Advance(20 * time.Microsecond)
	b.OnTimer(clk.Now())
	got := map[uint32]wire.Ack{}
	for _, f := range lb.frames {
		pkt, _, ok := open(f.data)
		if !ok {
			t.Fatal("ACK fails its ICV")
		}
		p, err := wire.Parse(pkt)
		if err != nil || p.Type() != wire.TypeBACK && p.Type() != wire.TypeEACK {
			t.Fatalf("B sent %v (%v), want ACKs only", p.Type(), err)
		}
		got[f.flow] = p.Ack()
	}
	if len(got) != 2 {
		t.Fatalf("ACKs on labels %v, want one on 0x40 and one on 0x81", got)
	}
	for i, label := range []uint32{0x40, 0x81} {
		ack, ok := got[label]
		if !ok {
			t.Fatalf("no ACK on label %#x", label)
		}
		if ack.T1() != iv[i] || ack.T2() != arrived[i] {
			t.Errorf("ACK on %#x: t1 %d t2 %d, want %d %d", label, ack.T1(), ack.T2(), iv[i], arrived[i])
		}
	}
	if n := b.Conn(2).Stats.AckPerFlow.Load(); n != 1 {
		t.Errorf("ack_per_flow %d, want 1", n)
	}
}

// TestAckPerConnSendsOneACK: with AckPerConn the coalesced ACK goes out
// once, on the latest packet's label.
func TestAckPerConnSendsOneACK(t *testing.T) {
	clk := clock.NewManual(time.Millisecond)
	la, lb := &capLink{}, &capLink{}
	a := New(Config{Clock: clk, Link: la, ULP: &recULP{name: "A"}})
	ub := &recULP{name: "B"}
	ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	b := New(Config{Clock: clk, Link: lb, ULP: ub})
	cc := ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1, Flows: 2, AckPerConn: true}
	ca, _ := a.Connect(cc)
	b.Connect(Mirror(cc))
	ca.Push(0, pattern(0, 100))
	ca.Push(1, pattern(0, 100))
	for _, f := range la.frames {
		b.Receive(f.data, f.flow)
	}
	clk.Advance(20 * time.Microsecond)
	b.OnTimer(clk.Now())
	if len(lb.frames) != 1 || lb.frames[0].flow != 1 {
		t.Fatalf("B sent %d frames (first on %#x), want one ACK on label 1", len(lb.frames), lb.frames[0].flow)
	}
}
