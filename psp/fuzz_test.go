package psp

import (
	"bytes"
	"testing"
)

// FuzzOpen feeds hostile datagrams to an RxSA holding the golden
// vector's SPI: Open never panics, never reads or returns bytes outside
// the datagram, and accepts only what the sender sealed (the fuzzer cannot
// forge a tag, so only seeds and their exact replays reach the window).
func FuzzOpen(f *testing.F) {
	g := goldenVectors[0]
	good := unhex(f, g.dgram)
	f.Add(good)
	f.Add(good[:MinDatagram])
	f.Add(good[:MinDatagram-1])
	f.Add([]byte{})
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	f.Add(flipped)
	rx, err := NewRxSA(goldenKeys(f, g.slot), g.v, g.spi, nil)
	if err != nil {
		f.Fatal(err)
	}
	want := unhex(f, goldenPkt)
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		pkt, _, d := rx.Open(in)
		if d >= numDrops {
			t.Fatalf("drop %d out of the table", d)
		}
		if d != dropNone {
			if pkt != nil {
				t.Fatal("a refused datagram returned a packet")
			}
			return
		}
		if !bytes.Equal(b, good) || !bytes.Equal(pkt, want) {
			t.Fatalf("accepted a datagram the sender never sealed: %x", b)
		}
		rx.cur.win = replay{} // let the seed open again on the next run
	})
}

// FuzzSealOpen seals a fuzzed packet, optionally flips one bit of the
// datagram, and opens it: it opens to the same packet iff nothing was
// flipped.
func FuzzSealOpen(f *testing.F) {
	f.Add(unhex(f, goldenPkt), uint32(0x12345678), uint16(0), false)
	f.Add([]byte{1, 2, 3, 4}, uint32(0), uint16(3), true)
	f.Add(make([]byte, 4096), uint32(1), uint16(5000), true)
	_, rx, tx := pair(f, AESGCM256, 77)
	dst := make([]byte, 0, 70000)
	f.Fuzz(func(t *testing.T, pkt []byte, ts uint32, at uint16, flip bool) {
		d, err := tx.Seal(dst, pkt, ts)
		if len(pkt) < CryptOffset {
			if err == nil {
				t.Fatal("sealed a packet shorter than the clear bytes")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if flip {
			d[int(at)%len(d)] ^= 1 << (at % 8)
		}
		got, iv, drop := rx.Open(d)
		switch {
		case flip && drop == dropNone:
			t.Fatalf("flipped bit %d accepted", at)
		case !flip && (drop != dropNone || !bytes.Equal(got, pkt) || iv.Timestamp() != ts):
			t.Fatalf("intact datagram: %v", drop)
		}
	})
}
