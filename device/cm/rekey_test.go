package cm

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/wire"
	"falconnic/psp"
)

// rotate has nic's master keys move to a new generation, as the daemon's
// rotation does (the generation before the previous one refused), and
// rekeys its connections.
func (n *cmNIC) rotate(t *testing.T) int {
	var rekeyed int
	n.on(func() {
		var k [psp.MasterKeyLen]byte
		rand.Read(k[:])
		n.agent.Keys().DisallowPrevious()
		if _, err := n.agent.Keys().Rotate(k); err != nil {
			t.Error(err)
		}
		rekeyed = n.agent.Rekey()
	})
	return rekeyed
}

// pending returns nic's PendingRekeys.
func (n *cmNIC) pending() (p, f int) {
	n.on(func() { p, f = n.agent.PendingRekeys() })
	return p, f
}

// traffic has nic push k packets to peer and waits until they all
// complete, moving the clock by at most 20 ms (well inside a REKEY's
// first backoff) for ACK coalescing; it fails the test if any did not
// complete acknowledged.
func (w *cmWorld) traffic(n *cmNIC, peer byte, k int) {
	w.t.Helper()
	var before, ok, failed int
	n.on(func() {
		before = n.pushOK
		c := n.conns[cmMAC(peer)]
		if c == nil {
			w.t.Error("no connection")
			return
		}
		for i := range k {
			if _, err := c.Push(uint64(i), bytes.Repeat([]byte{byte(i)}, 1000)); err != nil {
				w.t.Errorf("push %d: %v", i, err)
			}
		}
	})
	for range 200 {
		w.sync()
		n.on(func() { ok, failed = n.pushOK-before, n.pushFailed })
		if ok+failed >= k {
			break
		}
		w.clk.Advance(100 * time.Microsecond)
	}
	if ok != k || failed != 0 {
		w.t.Fatalf("%d of %d pushes completed acknowledged, %d failed", ok, k, failed)
	}
}

// drops returns nic's PSP drops of every cause.
func (n *cmNIC) drops() uint64 {
	var d uint64
	for i := psp.Drop(1); i < psp.Drop(len(n.psp.Rx)); i++ {
		d += n.psp.Rx[i].Load()
	}
	return d
}

// txSPI returns the SPI nic seals its connection to peer with.
func (n *cmNIC) txSPI(peer [6]byte) (spi psp.SPI) {
	n.on(func() { spi = n.agent.conns[cmKey{wire.ProtoRDMA, peer}].tx.tx.SPI() })
	return spi
}

// TestSealedLostRekeyIsResent: the first three REKEYs of a rotation are
// lost on the fabric. Each is resent after its backoff, the peer keeps
// sealing with the previous SPI meanwhile — still accepted, so its
// traffic goes through — and the fourth is confirmed by a REKEY_ACK.
// Then a rotation whose REKEY_ACK is lost: the resent REKEY finds the
// SA already taken and is answered again. No push is lost and no
// datagram refused.
func TestSealedLostRekeyIsResent(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	w.secure(d1, d2)
	a, b := d1.nics[0xa], d2.nics[0xb]
	a.dial(0xb)
	w.settle()
	w.traffic(a, 0xb, 20)
	w.traffic(b, 0xa, 20)
	old := b.txSPI(a.mac)

	if n := a.rotate(t); n != 1 {
		t.Fatalf("rekeyed %d connections", n)
	}
	const lost = 3
	for i := 1; i <= lost; i++ {
		if q := w.take(); len(q) != 1 {
			t.Fatalf("send %d: %d messages on the fabric, want the REKEY", i, len(q))
		} // lost
		if p, _ := a.pending(); p != 1 {
			t.Fatalf("send %d: %d REKEYs pending", i, p)
		}
		w.traffic(b, 0xa, 10) // sealed with the previous SPI
		if b.txSPI(a.mac) != old {
			t.Fatal("the peer moved without a REKEY")
		}
		w.clk.Advance(rekeyBackoff(i))
		w.sync()
	}
	w.settle() // the fourth REKEY, and its REKEY_ACK
	st := &d1.cm.Stats
	if st.RekeySent.Load() != 1 || st.RekeyResent.Load() != lost || st.RekeyConfirmed.Load() != 1 || st.RekeyFailed.Load() != 0 {
		t.Fatalf("rotating side cm %v", st.Set().NonZero())
	}
	if p, f := a.pending(); p != 0 || f != 0 {
		t.Fatalf("pending %d failed %d after the REKEY_ACK", p, f)
	}
	spi := b.txSPI(a.mac)
	if spi == old || spi.Slot() != 1 {
		t.Fatalf("the peer seals with SPI %#x (was %#x), not the new generation's", uint32(spi), uint32(old))
	}
	w.traffic(b, 0xa, 20)
	w.traffic(a, 0xb, 20)

	// A rotation whose REKEY_ACK is lost.
	a.rotate(t)
	w.deliver(w.take()...) // the REKEY; the peer takes the SA
	if q := w.take(); len(q) != 1 {
		t.Fatalf("%d messages, want the REKEY_ACK", len(q))
	} // lost
	w.traffic(b, 0xa, 10) // already on the newest SPI
	w.clk.Advance(rekeyBackoff(1))
	w.settle()
	if st.RekeyConfirmed.Load() != 2 || d2.cm.Stats.RepeatedRekey.Load() != 1 || d2.cm.Stats.RekeyAckSent.Load() != 3 {
		t.Fatalf("rotating side cm %v, peer cm %v", st.Set().Snapshot(), d2.cm.Stats.Set().Snapshot())
	}
	if p, _ := a.pending(); p != 0 {
		t.Fatal("the REKEY is still pending")
	}
	w.traffic(b, 0xa, 20)
	w.traffic(a, 0xb, 20)
	if a.drops()+b.drops() != 0 {
		t.Fatalf("datagrams refused: %v / %v", a.psp.Set().NonZero(), b.psp.Set().NonZero())
	}
}

// TestSealedRekeyFailsAfterEveryTry: every REKEY of a rotation is lost.
// After cmRekeyMaxTries sends, each after its backoff, the REKEY is
// reported failed (counter and PendingRekeys) and no longer sent; the
// connection's previous SPI still opens the peer's datagrams.
func TestSealedRekeyFailsAfterEveryTry(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	w.secure(d1, d2)
	a, b := d1.nics[0xa], d2.nics[0xb]
	a.dial(0xb)
	w.settle()
	w.traffic(a, 0xb, 20) // and the acceptor's connection is not half-open
	a.rotate(t)
	var waited time.Duration
	for i := 1; i <= cmRekeyMaxTries; i++ {
		if q := w.take(); len(q) != 1 {
			t.Fatalf("send %d: %d messages on the fabric, want the REKEY", i, len(q))
		} // lost
		w.clk.Advance(rekeyBackoff(i))
		waited += rekeyBackoff(i)
		w.sync()
	}
	st := &d1.cm.Stats
	if st.RekeyResent.Load() != cmRekeyMaxTries-1 || st.RekeyFailed.Load() != 1 || st.RekeyConfirmed.Load() != 0 {
		t.Fatalf("cm %v after %v", st.Set().NonZero(), waited)
	}
	if p, f := a.pending(); p != 0 || f != 1 {
		t.Fatalf("pending %d failed %d", p, f)
	}
	w.clk.Advance(time.Minute)
	if q := w.take(); len(q) != 0 {
		t.Fatalf("%d messages after the REKEY failed", len(q))
	}
	w.traffic(b, 0xa, 20) // the old key still works
	w.traffic(a, 0xb, 20)
	if a.drops()+b.drops() != 0 {
		t.Fatalf("datagrams refused: %v / %v", a.psp.Set().NonZero(), b.psp.Set().NonZero())
	}
	if waited > 25*time.Second || waited < 15*time.Second {
		t.Fatalf("the REKEY was given up after %v of backoff", waited)
	}
}

// TestRekeyBackoffDoublesToItsCap: 200 ms, doubling, at most 5 s.
func TestRekeyBackoffDoublesToItsCap(t *testing.T) {
	want := []time.Duration{200, 400, 800, 1600, 3200, 5000, 5000, 5000}
	for i, ms := range want {
		if got := rekeyBackoff(i + 1); got != ms*time.Millisecond {
			t.Errorf("after send %d: %v, want %v", i+1, got, ms*time.Millisecond)
		}
	}
}

var _ falcon.ULP = (*cmNIC)(nil)
