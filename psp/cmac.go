package psp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
)

// CMAC is AES-CMAC [RFC 4493; NIST SP 800-38B] with a 128-, 192- or
// 256-bit AES key: the PRF of PSP's key derivation (kdf.go). It is not
// on a per-packet path (keys are derived when an SPI is installed).
type CMAC struct {
	b      cipher.Block
	k1, k2 [aes.BlockSize]byte
}

// rb is the constant of the subkey doubling for a 128-bit block [RFC 4493 §2.3].
const rb = 0x87

// NewCMAC returns AES-CMAC under key (16, 24 or 32 bytes).
func NewCMAC(key []byte) (*CMAC, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	c := &CMAC{b: b}
	var l [aes.BlockSize]byte
	b.Encrypt(l[:], l[:]) // L = AES(K, 0^128)
	double(&c.k1, &l)
	double(&c.k2, &c.k1)
	return c, nil
}

// double sets dst to the GF(2^128) doubling of src [RFC 4493 §2.3].
func double(dst, src *[aes.BlockSize]byte) {
	msb := src[0] >> 7
	for i := 0; i < aes.BlockSize-1; i++ {
		dst[i] = src[i]<<1 | src[i+1]>>7
	}
	dst[aes.BlockSize-1] = src[aes.BlockSize-1]<<1 ^ byte(subtle.ConstantTimeByteEq(msb, 1))*rb
}

// Sum appends the 16-byte CMAC of msg to dst [RFC 4493 §2.4].
func (c *CMAC) Sum(dst, msg []byte) []byte {
	const bs = aes.BlockSize
	var x, last [bs]byte
	n := (len(msg) + bs - 1) / bs
	complete := n > 0 && len(msg)%bs == 0
	if n == 0 {
		n = 1
	}
	for i := 0; i < n-1; i++ {
		subtle.XORBytes(x[:], x[:], msg[i*bs:(i+1)*bs])
		c.b.Encrypt(x[:], x[:])
	}
	tail := msg[(n-1)*bs:]
	if complete {
		subtle.XORBytes(last[:], tail, c.k1[:])
	} else {
		copy(last[:], tail)
		last[len(tail)] = 0x80
		subtle.XORBytes(last[:], last[:], c.k2[:])
	}
	subtle.XORBytes(x[:], x[:], last[:])
	c.b.Encrypt(x[:], x[:])
	return append(dst, x[:]...)
}
