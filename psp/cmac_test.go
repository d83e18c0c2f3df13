package psp

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cmacMsg is the 64-byte message of the RFC 4493 / SP 800-38B examples.
const cmacMsg = "6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51" +
	"30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710"

// TestCMACRFC4493 checks the subkeys and the four examples of RFC 4493 §4.
func TestCMACRFC4493(t *testing.T) {
	c, err := NewCMAC(unhex(t, "2b7e1516 28aed2a6 abf71588 09cf4f3c"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.k1[:], unhex(t, "fbeed618 35713366 7c85e08f 7236a8de"); !bytes.Equal(got, want) {
		t.Errorf("K1 = %x, want %x", got, want)
	}
	if got, want := c.k2[:], unhex(t, "f7ddac30 6ae266cc f90bc11e e46d513b"); !bytes.Equal(got, want) {
		t.Errorf("K2 = %x, want %x", got, want)
	}
	msg := unhex(t, cmacMsg)
	for _, v := range []struct {
		n   int
		tag string
	}{
		{0, "bb1d6929 e9593728 7fa37d12 9b756746"},
		{16, "070a16b4 6b4d4144 f79bdd9d d04a287c"},
		{40, "dfa66747 de9ae630 30ca3261 1497c827"},
		{64, "51f0bebf 7e3b9d92 fc497417 79363cfe"},
	} {
		if got := c.Sum(nil, msg[:v.n]); !bytes.Equal(got, unhex(t, v.tag)) {
			t.Errorf("CMAC(%d bytes) = %x, want %s", v.n, got, v.tag)
		}
	}
}

// TestCMACAES256 checks the AES-256 examples of NIST SP 800-38B (D.3):
// PSP's KDF uses CMAC with a 256-bit master key.
func TestCMACAES256(t *testing.T) {
	c, err := NewCMAC(unhex(t, "603deb10 15ca71be 2b73aef0 857d7781 1f352c07 3b6108d7 2d9810a3 0914dff4"))
	if err != nil {
		t.Fatal(err)
	}
	msg := unhex(t, cmacMsg)
	for _, v := range []struct {
		n   int
		tag string
	}{
		{0, "028962f6 1b7bf89e fc6b551f 4667d983"},
		{16, "28a7023f 452e8f82 bd4bf28d 8c37c35c"},
		{40, "aaf3d8f1 de5640c2 32f5b169 b9c911e6"},
		{64, "e1992190 549f6ed5 696a2c05 6c315410"},
	} {
		if got := c.Sum(nil, msg[:v.n]); !bytes.Equal(got, unhex(t, v.tag)) {
			t.Errorf("CMAC-256(%d bytes) = %x, want %s", v.n, got, v.tag)
		}
	}
}

func TestCMACBadKey(t *testing.T) {
	if _, err := NewCMAC(make([]byte, 5)); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}
