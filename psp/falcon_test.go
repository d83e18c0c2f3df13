package psp

import (
	"bytes"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// The test peer of this package with the transport: two Falcon endpoints
// whose every frame crosses as a PSP datagram, sealed by the sender's
// TxSA and opened by the receiver's RxSA (the shape the device's fabric
// link takes: falcon.SealingLink, SplitEnvelope, Envelope,
// ReceiveAuthenticated).

type wirePkt struct {
	toB  bool
	data []byte
	flow uint32
}

type pspNet struct {
	t        testing.TB
	clk      *clock.Manual
	a, b     *falcon.Endpoint
	txA, txB *TxSA // A seals to B with B's SPI, and back
	rxA, rxB *RxSA
	q        []wirePkt
	tap      func(p *wirePkt) // sees each datagram before delivery (may change it)
}

type pspLink struct {
	n   *pspNet
	toB bool
}

func (l pspLink) Seals() {}

func (l pspLink) Send(frame []byte, flow uint32) {
	pkt, iv, ok := falcon.SplitEnvelope(frame)
	if !ok {
		l.n.t.Fatal("short frame")
	}
	tx := l.n.txB
	if l.toB {
		tx = l.n.txA
	}
	d, err := tx.Seal(make([]byte, 0, len(pkt)+Overhead), pkt, uint32(iv))
	if err != nil {
		l.n.t.Fatal(err)
	}
	l.n.q = append(l.n.q, wirePkt{l.toB, d, flow})
}

// deliver opens and hands every queued datagram to its endpoint.
func (n *pspNet) deliver() {
	for len(n.q) > 0 {
		p := n.q[0]
		n.q = n.q[1:]
		if n.tap != nil {
			n.tap(&p)
		}
		rx, ep := n.rxA, n.a
		if p.toB {
			rx, ep = n.rxB, n.b
		}
		pkt, iv, d := rx.Open(p.data)
		if d != dropNone {
			continue
		}
		ep.ReceiveAuthenticated(falcon.Envelope(pkt, wire.Timestamp(iv.Timestamp())), p.flow, falcon.Mark{})
	}
}

// run delivers and advances the clock until done or the limit.
func (n *pspNet) run(done func() bool) {
	n.t.Helper()
	for range 200000 {
		n.deliver()
		if done() {
			return
		}
		n.clk.Advance(5 * time.Microsecond)
		now := n.clk.Now()
		n.a.OnTimer(now)
		n.b.OnTimer(now)
	}
	n.t.Fatal("did not finish")
}

type ackULP struct{ ok, failed int }

func (u *ackULP) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if r.Kind == tl.Push {
		_ = c.AckPush(r.RSN)
	}
}

func (u *ackULP) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	if cpl.Status == tl.CmplAck {
		u.ok++
	} else {
		u.failed++
	}
}

func (u *ackULP) OnXon(*falcon.Conn) {}

func newPSPNet(t testing.TB) (*pspNet, *falcon.Conn, *ackULP, *MasterKeys) {
	n := &pspNet{t: t, clk: clock.NewManual(time.Second)}
	ua, ub := &ackULP{}, &ackULP{}
	n.a = falcon.New(falcon.Config{Clock: n.clk, Link: pspLink{n, true}, ULP: ua})
	n.b = falcon.New(falcon.Config{Clock: n.clk, Link: pspLink{n, false}, ULP: ub})
	// Each NIC gives the connection an SPI under its master keys and hands
	// the derived key to the other (the CM's job: psp/cmauth).
	mkA, _ := NewMasterKeys(seqBytes(0x10))
	mkB, _ := NewMasterKeys(seqBytes(0x30))
	var err error
	if n.rxA, err = NewRxSA(mkA, AESGCM128, mkA.NewSPI(11), nil); err != nil {
		t.Fatal(err)
	}
	if n.rxB, err = NewRxSA(mkB, AESGCM128, mkB.NewSPI(22), nil); err != nil {
		t.Fatal(err)
	}
	kA, _, _ := mkA.Derive(nil, n.rxA.SPI(), AESGCM128)
	kB, _, _ := mkB.Derive(nil, n.rxB.SPI(), AESGCM128)
	n.txA, _ = NewTxSA(AESGCM128, n.rxB.SPI(), kB, nil)
	n.txB, _ = NewTxSA(AESGCM128, n.rxA.SPI(), kA, nil)
	cc := falcon.ConnConfig{SCID: 1, DCID: 2, Protocol: wire.ProtoRDMA, Ordered: true}
	ca, err := n.a.Connect(cc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.b.Connect(falcon.Mirror(cc)); err != nil {
		t.Fatal(err)
	}
	return n, ca, ua, mkB
}

// TestFalconOverPSP: pushes between two endpoints complete over PSP;
// tampered and forged datagrams (a flipped ciphertext byte, a BACK with
// a far-future IV and no key) are dropped by Open before the transport
// sees them; the connection completes everything.
func TestFalconOverPSP(t *testing.T) {
	n, ca, ua, _ := newPSPNet(t)
	payload := bytes.Repeat([]byte{0xab}, 1000)
	count := 0
	n.tap = func(p *wirePkt) {
		count++
		if count%7 == 0 { // tamper with every seventh datagram
			p.data[len(p.data)/2] ^= 0x40
		}
		if count%11 == 0 && !p.toB { // and forge a BACK towards A
			var f [64]byte
			Header(f[:]).Set(AESGCM128, n.rxA.SPI(), MakeIV(uint32(wire.TimestampAt(n.clk.Now()))+1<<30, 1<<31))
			if _, _, d := n.rxA.Open(f[:]); d != DropAuth {
				t.Fatalf("forged BACK: %v", d)
			}
		}
	}
	for i := range 200 {
		for {
			if _, err := ca.Push(uint64(i), payload); err == nil {
				break
			}
			n.run(func() bool { return true })
		}
	}
	n.run(func() bool { return ua.ok+ua.failed == 200 })
	if ua.ok != 200 {
		t.Fatalf("%d of 200 pushes completed", ua.ok)
	}
	if n.rxA.stats.Rx[DropAuth].Load()+n.rxB.stats.Rx[DropAuth].Load() == 0 {
		t.Fatal("no tampered datagram was dropped")
	}
}

// TestFalconOverPSPRotation: the receiving NIC rotates its master key
// and rekeys the connection while pushes flow; the new key reaches the
// sender later; every push completes and no datagram is dropped.
func TestFalconOverPSPRotation(t *testing.T) {
	n, ca, ua, mkB := newPSPNet(t)
	payload := bytes.Repeat([]byte{0x5a}, 4000)
	push := func(from, k int) {
		for i := from; i < from+k; i++ {
			for {
				if _, err := ca.Push(uint64(i), payload); err == nil {
					break
				}
				n.run(func() bool { return true })
			}
		}
	}
	push(0, 100)
	if _, err := mkB.Rotate(seqBytes(0x77)); err != nil {
		t.Fatal(err)
	}
	spi := mkB.NewSPI(23)
	if err := n.rxB.Rekey(spi); err != nil {
		t.Fatal(err)
	}
	push(100, 100) // still sealed under the old SPI
	key, _, _ := mkB.Derive(nil, spi, AESGCM128)
	if err := n.txA.Rekey(spi, key); err != nil {
		t.Fatal(err)
	}
	push(200, 100)
	n.run(func() bool { return ua.ok+ua.failed == 300 })
	n.rxB.DropPrevious()
	mkB.DisallowPrevious()
	push(300, 100)
	n.run(func() bool { return ua.ok+ua.failed == 400 })
	var drops uint64
	for d := DropShort; d < numDrops; d++ {
		drops += n.rxA.stats.Rx[d].Load() + n.rxB.stats.Rx[d].Load()
	}
	if ua.ok != 400 || drops != 0 {
		t.Fatalf("%d of 400 pushes completed, %d datagrams dropped", ua.ok, drops)
	}
}
