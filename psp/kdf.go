package psp

import (
	"encoding/binary"
	"errors"
)

// Key derivation [PSP §4.2]: the key of an SPI is NIST SP 800-108 KDF in
// counter mode with AES-CMAC-256 as the PRF, keyed with the receiving
// NIC's master key in the SPI's slot. Each PRF input is one 16-byte block:
//
//	0  counter i (4)         1, then 2 for the second half of a 256-bit key
//	4  label "Pv0" or "Pv1"  (0x50 0x76 0x30|0x31): the PSP version's key size
//	7  0x00                  separator
//	8  context: SPI (4)
//	12 0x0000 (2)
//	14 L (2)                 derived-key bits: 128 or 256
//
// A 128-bit key is the PRF output of i = 1; a 256-bit key is i = 1 then i = 2.

// MasterKeyLen is the length of a master key (AES-256).
const MasterKeyLen = 32

// ErrVersion is returned for a PSP version this package does not implement.
var ErrVersion = errors.New("psp: unsupported version")

// kdfBlock returns the PRF input block i for spi and version v.
func kdfBlock(i uint32, spi SPI, v Version) [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint32(b[0:], i)
	b[4], b[5], b[6] = 'P', 'v', '0'+byte(v)
	binary.BigEndian.PutUint32(b[8:], uint32(spi))
	binary.BigEndian.PutUint16(b[14:], uint16(v.KeyLen()*8))
	return b
}

// DeriveKey appends the key of spi under master (the master key in
// spi's slot) for version v to dst.
func DeriveKey(dst []byte, master *[MasterKeyLen]byte, spi SPI, v Version) ([]byte, error) {
	if v.KeyLen() == 0 {
		return dst, ErrVersion
	}
	c, err := NewCMAC(master[:])
	if err != nil {
		return dst, err
	}
	for i := uint32(1); int(i-1)*16 < v.KeyLen(); i++ {
		blk := kdfBlock(i, spi, v)
		dst = c.Sum(dst, blk[:])
	}
	return dst, nil
}
