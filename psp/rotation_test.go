package psp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestRotationUnderTraffic follows the CM's rotation [digest §10.1,
// F-SEC-3] with datagrams in flight, reordered: the receiving NIC rotates
// its master key and rekeys the connection (its previous SPI stays
// accepted); the new key reaches the sender some datagrams later; every
// datagram sealed before or after opens exactly once, nothing is lost.
// Only once the old SPI is retired does a straggler under it drop.
func TestRotationUnderTraffic(t *testing.T) {
	for _, v := range []Version{AESGCM128, AESGCM256} {
		m, rx, tx := pair(t, v, 0x1234)
		rng := rand.New(rand.NewPCG(1, 2))
		var inflight [][]byte
		sent, opened := 0, 0
		seen := map[uint32]bool{}
		send := func() {
			pkt := falconPkt(9, 64, byte(sent))
			binary.BigEndian.PutUint32(pkt[4:], uint32(sent)) // id
			inflight = append(inflight, seal(t, tx, pkt, uint32(sent)))
			sent++
		}
		deliver := func(keep int) {
			for len(inflight) > keep {
				i := rng.IntN(len(inflight)) // reordering among everything in flight
				d := inflight[i]
				inflight = append(inflight[:i], inflight[i+1:]...)
				pkt, _, drop := rx.Open(d)
				if drop != dropNone {
					t.Fatalf("%v: datagram under SPI %#x dropped: %v", v, Header(d).SPI(), drop)
				}
				id := binary.BigEndian.Uint32(pkt[4:])
				if seen[id] {
					t.Fatalf("datagram %d opened twice", id)
				}
				seen[id] = true
				opened++
			}
		}
		for round := range 3 {
			for range 500 {
				send()
				deliver(40)
			}
			// The receiver rotates and rekeys the connection ...
			var k [MasterKeyLen]byte
			k[0], k[1] = byte(round+1), 0x5a
			gen, err := m.Rotate(k)
			if err != nil {
				t.Fatal(err)
			}
			spi := m.NewSPI(0x1234 + uint32(round) + 1)
			if err := rx.Rekey(spi); err != nil {
				t.Fatal(err)
			}
			// ... while the sender keeps sealing under the old SPI ...
			for range 100 {
				send()
				deliver(40)
			}
			// ... until the new key arrives through the CM.
			key, g, err := m.Derive(nil, spi, v)
			if err != nil || g != gen {
				t.Fatalf("derive: gen %d/%d: %v", g, gen, err)
			}
			if err := tx.Rekey(spi, key); err != nil {
				t.Fatal(err)
			}
			var straggler []byte
			for range 300 {
				send()
				if straggler == nil && Header(inflight[0]).SPI() != spi {
					straggler = bytes.Clone(inflight[0]) // a copy a slow path delivers late
				}
				deliver(40)
			}
			deliver(0)
			// Some RTTs later the previous SPI and generation are retired.
			rx.DropPrevious()
			m.DisallowPrevious()
			if straggler != nil {
				if _, _, d := rx.Open(straggler); d != DropUnknownSPI {
					t.Fatalf("straggler under the retired SPI: %v", d)
				}
			}
		}
		if opened != sent || rx.stats.Rx[dropNone].Load() != uint64(sent) {
			t.Fatalf("%v: sent %d, opened %d", v, sent, opened)
		}
	}
}

// TestStaleGeneration: a connection still keyed from a master key that a
// later rotation replaced (it missed the rekey) is refused by generation,
// before its tag is checked; one from the previous generation is refused
// once previous generations are disallowed.
func TestStaleGeneration(t *testing.T) {
	m, rx, tx := pair(t, AESGCM128, 1)
	d := seal(t, tx, falconPkt(1, 30, 0), 0)
	if _, err := m.Rotate(seqBytes(0x40)); err != nil { // slot 1, gen 2
		t.Fatal(err)
	}
	if _, _, drop := rx.Open(bytes.Clone(d)); drop != dropNone {
		t.Fatalf("previous generation while allowed: %v", drop)
	}
	m.DisallowPrevious()
	if _, _, drop := rx.Open(seal(t, tx, falconPkt(1, 30, 1), 0)); drop != DropStaleGen {
		t.Fatalf("previous generation after disallow: %v", drop)
	}
	if _, err := m.Rotate(seqBytes(0x60)); err != nil { // slot 0 again, gen 3
		t.Fatal(err)
	}
	if _, _, drop := rx.Open(seal(t, tx, falconPkt(1, 30, 2), 0)); drop != DropStaleGen {
		t.Fatalf("slot reused by a newer generation: %v", drop)
	}
	if rx.stats.Rx[DropAuth].Load() != 0 {
		t.Fatal("a generation refusal reached the tag check")
	}
}
