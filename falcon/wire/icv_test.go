package wire

import (
	"bytes"
	"testing"
)

func TestICVSealOpen(t *testing.T) {
	for _, v := range vectors() {
		sealed := SealICV(bytes.Clone(v))
		if len(sealed) != len(v)+ICVLen {
			t.Fatal("SealICV must append ICVLen bytes")
		}
		got, ok := OpenICV(sealed)
		if !ok || !bytes.Equal(got, v) {
			t.Fatalf("OpenICV failed on %v", Packet(v).Type())
		}
		// Every single-bit flip is caught (CRC32C detects all 1-bit errors).
		for bit := 0; bit < len(sealed)*8; bit++ {
			c := bytes.Clone(sealed)
			c[bit/8] ^= 1 << (bit % 8)
			if _, ok := OpenICV(c); ok {
				t.Fatalf("%v: flip of bit %d not detected", Packet(v).Type(), bit)
			}
		}
	}
	for n := 0; n < ICVLen; n++ {
		if _, ok := OpenICV(make([]byte, n)); ok {
			t.Errorf("OpenICV accepted %d bytes", n)
		}
	}
	// CRC32C of "123456789" is 0xE3069283.
	if s := SealICV([]byte("123456789")); !bytes.Equal(s[9:], []byte{0xe3, 0x06, 0x92, 0x83}) {
		t.Errorf("not CRC32C: %x", s[9:])
	}
}

func TestSealICVInPlace(t *testing.T) {
	buf := make([]byte, 0, 64)
	p := AppendBACK(buf, &AckFields{CID: 3})
	s := SealICV(p)
	if &s[0] != &buf[:1][0] {
		t.Error("SealICV reallocated despite capacity")
	}
}
