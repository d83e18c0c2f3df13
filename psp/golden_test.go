package psp

import (
	"bytes"
	"testing"
)

// The golden vectors were computed outside this package (Python's
// cryptography: AES-CMAC for the SP 800-108 KDF block, AESGCM for the
// datagram) from the layout in header.go and kdf.go.
var (
	goldenMaster0 = seqBytes(0x00)
	goldenMaster1 = seqBytes(0x20)
	goldenPkt     = "1000abcd000102030405060708090a0b0c0d0e0f1011121366616c636f6e6e69632070737020676f6c64656e20766563746f72"
	goldenTS      = uint32(0x12345678)
)

type goldenVector struct {
	name  string
	slot  int
	v     Version
	spi   SPI
	key   string
	dgram string
}

var goldenVectors = []goldenVector{
	{"aes-gcm-128/slot0", 0, AESGCM128, 0x00000001, "b38041f41635e14fc5a679e0ddc9aa9d",
		"fc0101010000000112345678000000011000abcdd20b98d3f3bf12073eecb7902370a4ef17fe4a2ab118cf4d90c4db9aff29ce848c8674803f7b8663a3124b2712521bb277e1003007ca7ce428f00c48075b64"},
	{"aes-gcm-256/slot1", 1, AESGCM256, 0x80000002, "b9177c34665178cc0981c593319e236aa72378689e0445ad5e4e46df2a256d33",
		"fc0101058000000212345678000000011000abcd7abaa32fe421f12460d1a7da46a726261fdea2525a5335f95b2f1eadcc3ca6bb036e6ff29b669cd3b3a28d8156b153b9868db9afc2956780aadd49964ee478"},
}

func seqBytes(from byte) [MasterKeyLen]byte {
	var k [MasterKeyLen]byte
	for i := range k {
		k[i] = from + byte(i)
	}
	return k
}

// goldenKeys returns master keys with goldenMaster0 in slot 0 and, for a
// slot-1 vector, goldenMaster1 rotated into slot 1.
func goldenKeys(t testing.TB, slot int) *MasterKeys {
	t.Helper()
	m, err := NewMasterKeys(goldenMaster0)
	if err != nil {
		t.Fatal(err)
	}
	if slot == 1 {
		if _, err := m.Rotate(goldenMaster1); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func TestGoldenKDF(t *testing.T) {
	for _, g := range goldenVectors {
		m := goldenKeys(t, g.slot)
		key, _, err := m.Derive(nil, g.spi, g.v)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if !bytes.Equal(key, unhex(t, g.key)) {
			t.Errorf("%s: derived key %x, want %s", g.name, key, g.key)
		}
	}
}

func TestGoldenSeal(t *testing.T) {
	for _, g := range goldenVectors {
		tx, err := NewTxSA(g.v, g.spi, unhex(t, g.key), nil)
		if err != nil {
			t.Fatal(err)
		}
		pkt := unhex(t, goldenPkt)
		got, err := tx.Seal(make([]byte, 0, len(pkt)+Overhead), pkt, goldenTS)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, unhex(t, g.dgram)) {
			t.Errorf("%s: sealed\n%x\nwant\n%s", g.name, got, g.dgram)
		}
	}
}

func TestGoldenOpen(t *testing.T) {
	for _, g := range goldenVectors {
		rx, err := NewRxSA(goldenKeys(t, g.slot), g.v, g.spi, nil)
		if err != nil {
			t.Fatal(err)
		}
		pkt, iv, d := rx.Open(unhex(t, g.dgram))
		if d != dropNone {
			t.Fatalf("%s: dropped: %v", g.name, d)
		}
		if !bytes.Equal(pkt, unhex(t, goldenPkt)) || iv != MakeIV(goldenTS, 1) {
			t.Errorf("%s: opened %x iv %x", g.name, pkt, iv)
		}
	}
}

// TestGoldenFlippedByte flips every bit of each datagram in turn: every
// one is dropped, by a header check or by the tag, and the SA still opens
// the intact datagram afterwards (no refused datagram changed its state).
func TestGoldenFlippedByte(t *testing.T) {
	for _, g := range goldenVectors {
		rx, err := NewRxSA(goldenKeys(t, g.slot), g.v, g.spi, nil)
		if err != nil {
			t.Fatal(err)
		}
		orig := unhex(t, g.dgram)
		for i := range orig {
			for bit := range 8 {
				b := bytes.Clone(orig)
				b[i] ^= 1 << bit
				if _, _, d := rx.Open(b); d == dropNone {
					t.Fatalf("%s: byte %d bit %d flipped: accepted", g.name, i, bit)
				}
			}
		}
		if rx.stats.Rx[DropAuth].Load() == 0 {
			t.Errorf("%s: no flip reached the tag check", g.name)
		}
		if _, _, d := rx.Open(bytes.Clone(orig)); d != dropNone {
			t.Fatalf("%s: intact datagram after the flips: %v", g.name, d)
		}
	}
}
