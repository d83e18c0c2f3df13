package cm

import (
	"crypto/rand"
	"testing"
	"time"

	"falconnic/falcon/wire"
	"falconnic/psp"
	"falconnic/psp/cmauth"
)

// secure gives daemons ds the fabric's secret and every NIC master keys.
func (w *cmWorld) secure(ds ...*cmDaemon) {
	secret, err := cmauth.NewSecret([]byte("the cm tests' deployment secret, 32+ bytes"))
	if err != nil {
		w.t.Fatal(err)
	}
	for _, d := range ds {
		id := cmauth.ID(d.addr.String())
		sealer, _ := cmauth.NewSealer(secret, id, rand.Reader)
		opener, _ := cmauth.NewOpener(secret, id, cmauth.OpenerConfig{})
		var local [][6]byte
		for _, n := range d.nics {
			local = append(local, n.mac)
		}
		d.cm.SetSecurity(&Security{Sealer: sealer, Opener: opener, Version: psp.AESGCM128,
			Owners: cmauth.NewOwners(id, cmauth.OwnersConfig{Local: local, Learn: true}),
			Wall:   func() int64 { return 1_700_000_000_000_000_000 + int64(w.clk.Now()) }})
		for _, n := range d.nics {
			var k [psp.MasterKeyLen]byte
			rand.Read(k[:])
			keys, err := psp.NewMasterKeys(k)
			if err != nil {
				w.t.Fatal(err)
			}
			n.psp = &psp.Counters{}
			n.on(func() { n.agent.SetKeys(keys, n.psp) })
		}
	}
}

// TestSealedSetUpThenHalfOpenAgeing: between secure daemons the REQ and
// REP carry SAs and both ends' CIDs open sealed datagrams; the acceptor
// closes its connection once halfOpenAge passes without one authentic
// datagram from the dialer, the dialer's stays.
func TestSealedSetUpThenHalfOpenAgeing(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	w.secure(d1, d2)
	d1.nics[0xa].dial(0xb)
	w.settle()
	paired(t, d1.nics[0xa], d2.nics[0xb])
	if len(d1.cm.SealedCIDs()) != 1 || len(d2.cm.SealedCIDs()) != 1 {
		t.Fatalf("sealed CIDs %v and %v", d1.cm.SealedCIDs(), d2.cm.SealedCIDs())
	}
	w.clk.Advance(halfOpenAge + time.Second)
	w.sync()
	if got := d2.cm.Stats.AgedHalfOpen.Load(); got != 1 {
		t.Fatalf("aged %d, cm %v", got, d2.cm.Stats.Set().NonZero())
	}
	if c, _ := d2.nics[0xb].conn(0xa); c != nil || len(d2.cm.SealedCIDs()) != 0 {
		t.Fatalf("the half-open connection is still there (%s)", d2.nics[0xb].history())
	}
	if c, _ := d1.nics[0xa].conn(0xb); c == nil || d1.cm.Stats.AgedHalfOpen.Load() != 0 {
		t.Fatal("the dialer's connection was aged")
	}
}

// TestSealedManagerRefusesPlaintext: a daemon without the secret sets
// nothing up with a secure one.
func TestSealedManagerRefusesPlaintext(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	w.secure(d2)
	d1.nics[0xa].dial(0xb)
	w.deliver(w.take()...)
	if d2.cm.Stats.REQRecv.Load() != 0 || d2.cm.sec.Opener.Stats.Rx[0].Load() != 0 {
		t.Fatalf("the secure daemon took a plaintext REQ: %v", d2.cm.Stats.Set().NonZero())
	}
	if c, _ := d2.nics[0xb].conn(0xa); c != nil {
		t.Fatal("connection up")
	}
}

// TestSealedRekeyMovesThePeersTxSA: after a rotation the NIC offers its
// peer a new SPI of the new generation, which the peer seals with.
func TestSealedRekeyMovesThePeersTxSA(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	w.secure(d1, d2)
	d1.nics[0xa].dial(0xb)
	w.settle()
	a := d1.nics[0xa]
	var n int
	a.on(func() {
		var k [psp.MasterKeyLen]byte
		rand.Read(k[:])
		if _, err := a.agent.Keys().Rotate(k); err != nil {
			t.Error(err)
		}
		n = a.agent.Rekey()
	})
	w.settle()
	if n != 1 || d2.cm.Stats.RekeyRecv.Load() != 1 || d2.cm.Stats.Stale.Load() != 0 || d2.cm.Stats.SealErr.Load() != 0 {
		t.Fatalf("rekeyed %d; peer cm %v", n, d2.cm.Stats.Set().NonZero())
	}
	var spi psp.SPI
	d2.nics[0xb].on(func() { spi = d2.nics[0xb].agent.conns[cmKey{wire.ProtoRDMA, a.mac}].tx.tx.SPI() })
	if spi.Slot() != 1 {
		t.Fatalf("the peer seals with SPI %#x, not one of the new generation", uint32(spi))
	}
}

// TestSealedRepeatedRekeyIsIgnored: a REKEY for the SPI the connection
// already seals with (a resend) does not restart its sequence numbers,
// which the receiver's replay window would refuse; a replayed envelope
// is refused by cmauth before that.
func TestSealedRepeatedRekeyIsIgnored(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	w.secure(d1, d2)
	d1.nics[0xa].dial(0xb)
	w.settle()
	a, b := d1.nics[0xa], d2.nics[0xb]
	a.on(func() {
		var k [psp.MasterKeyLen]byte
		rand.Read(k[:])
		a.agent.Keys().Rotate(k)
		a.agent.Rekey()
	})
	q := w.take()
	if len(q) != 1 {
		t.Fatalf("%d messages, want the REKEY", len(q))
	}
	replay := cmInFlight{from: q[0].from, to: q[0].to, b: append([]byte(nil), q[0].b...)}
	w.deliver(q...)
	w.deliver(replay)
	if d2.cm.sec.Opener.Stats.Rx[cmauth.DropReplay].Load() != 1 || d2.cm.Stats.RekeyRecv.Load() != 1 {
		t.Fatalf("the replayed REKEY was not refused: cm %v", d2.cm.Stats.Set().NonZero())
	}
	b.on(func() {
		c := b.agent.conns[cmKey{wire.ProtoRDMA, a.mac}]
		m := cmMsg{typ: cmREKEY, src: a.mac, dst: b.mac, srcCID: c.dcid, dstCID: c.conn.SCID(), hasSA: true, reqPSN: c.txGen}
		m.sa = cmauth.SA{Version: psp.AESGCM128, SPI: c.tx.tx.SPI()}
		b.agent.receive(m, cmRoute{addr: d1.addr})
	})
	if d2.cm.Stats.RepeatedRekey.Load() != 1 || d2.cm.Stats.RekeyAckSent.Load() != 2 {
		t.Fatalf("a REKEY for the current SPI was applied, or not answered: cm %v", d2.cm.Stats.Set().NonZero())
	}
	w.settle() // the REKEY_ACKs: the first confirms, the second is stale
	if d1.cm.Stats.RekeyConfirmed.Load() != 1 || d1.cm.Stats.RekeyAckStale.Load() != 1 {
		t.Fatalf("dialer cm %v", d1.cm.Stats.Set().NonZero())
	}
	a.on(func() { a.agent.Rekey() }) // same generation: nothing to move
	if q := w.take(); len(q) != 0 {
		t.Fatalf("a second Rekey in one generation sent %d messages", len(q))
	}
}
