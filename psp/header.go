package psp

import (
	"encoding/binary"
	"strconv"
)

// PSP header and trailer [PSP Architecture Specification 1.0 §3; digest
// §2.1, F-WIRE-9]. Transport mode, no virtualization cookie:
//
//	offset size field
//	0      1    next header      252: Falcon
//	1      1    header ext len   1 (8-octet units after the first 8 octets)
//	2      1    R (2) | crypt offset (6, 4-octet units after the header)
//	3      1    S | D | version (4) | V | 1
//	4      4    SPI              top bit: master-key slot
//	8      8    IV               timestamp (32) | sequence (32)
//	16     ...  Falcon packet    first CryptOffset bytes clear, the rest encrypted
//	end-16 16   ICV              AES-GCM tag
//
// The AES-GCM nonce is SPI || IV; the additional data is the header and
// the clear bytes. All fields are big-endian.
const (
	// HeaderLen is the PSP header without a virtualization cookie.
	HeaderLen = 16
	// ICVLen is the trailer: the AES-GCM tag.
	ICVLen = 16
	// Overhead is what encapsulation adds to a packet.
	Overhead = HeaderLen + ICVLen
	// NextHeaderFalcon identifies Falcon [digest §2.1].
	NextHeaderFalcon = 252
	// CryptOffset is how many bytes of the Falcon packet stay clear: its
	// first word (version and destination CID), authenticated but readable
	// so the receiver finds the connection before decrypting [digest §2.1].
	CryptOffset = 4
	// hdrExtLen is the header ext len of a 16-byte header.
	hdrExtLen = 1
	// cryptOffsetUnits is the crypt offset field's unit.
	cryptOffsetUnits = 4
	// alwaysOne is byte 3's low bit, always set.
	alwaysOne = 0x01
	// MinDatagram is the shortest datagram Open considers: header, the
	// clear bytes and the tag.
	MinDatagram = HeaderLen + CryptOffset + ICVLen
)

// Version is the PSP version field: the cipher.
type Version uint8

// PSP versions this package implements [PSP §3].
const (
	AESGCM128 Version = 0 // AES-GCM, 128-bit derived key
	AESGCM256 Version = 1 // AES-GCM, 256-bit derived key
)

// KeyLen returns the derived-key length of v (0 if v is not supported).
func (v Version) KeyLen() int {
	switch v {
	case AESGCM128:
		return 16
	case AESGCM256:
		return 32
	}
	return 0
}

// String names the version.
func (v Version) String() string {
	switch v {
	case AESGCM128:
		return "aes-gcm-128"
	case AESGCM256:
		return "aes-gcm-256"
	}
	return "version(" + strconv.Itoa(int(v)) + ")"
}

// SPI is a Security Parameters Index. Its top bit selects which of the
// receiving NIC's two master keys derives its key [PSP §4]; zero is never
// valid.
type SPI uint32

// spiSlotBit is the master-key selector.
const spiSlotBit = 1 << 31

// Slot returns the master-key slot (0 or 1) the SPI's key derives from.
func (s SPI) Slot() int { return int(s >> 31) }

// IV is PSP's 64-bit initialization vector. Here its high word is the
// transmit timestamp in Falcon units (131.072 ns; T1/T3, digest §2.1,
// F-WIRE-10) and its low word a sequence number the sender never repeats
// under one SPI, so the GCM nonce (SPI || IV) is unique whatever the
// clock does, and the receiver's replay window (replay.go) works on it.
type IV uint64

// MakeIV returns the IV of timestamp ts and sequence number seq.
func MakeIV(ts, seq uint32) IV { return IV(uint64(ts)<<32 | uint64(seq)) }

// Timestamp returns the transmit timestamp (Falcon units).
func (iv IV) Timestamp() uint32 { return uint32(iv >> 32) }

// Seq returns the sequence number.
func (iv IV) Seq() uint32 { return uint32(iv) }

// Header is a view of a PSP header. Getters and setters do not check
// length; Open does.
type Header []byte

// NextHeader returns the next-header field.
func (h Header) NextHeader() uint8 { return h[0] }

// ExtLen returns the header ext len field.
func (h Header) ExtLen() uint8 { return h[1] }

// CryptOffset returns the crypt offset in bytes.
func (h Header) CryptOffset() int { return int(h[2]&0x3f) * cryptOffsetUnits }

// R returns byte 2's two reserved bits (zero in a valid header).
func (h Header) R() uint8 { return h[2] >> 6 }

// Flags returns byte 3's S, D and V bits and its always-one bit: exactly
// FlagsValid in a header this package accepts (no sampling, no drop
// hint, no virtualization cookie).
func (h Header) Flags() uint8 { return h[3] & 0xc3 }

// FlagsValid is Flags of a valid header.
const FlagsValid = alwaysOne

// Version returns the version field.
func (h Header) Version() Version { return Version(h[3] >> 2 & 0x0f) }

// SPI returns the SPI.
func (h Header) SPI() SPI { return SPI(binary.BigEndian.Uint32(h[4:])) }

// IV returns the initialization vector.
func (h Header) IV() IV { return IV(binary.BigEndian.Uint64(h[8:])) }

// Set writes a whole header: Falcon next header, no cookie, the Falcon
// crypt offset, version v, spi and iv.
func (h Header) Set(v Version, spi SPI, iv IV) {
	h[0] = NextHeaderFalcon
	h[1] = hdrExtLen
	h[2] = CryptOffset / cryptOffsetUnits
	h[3] = uint8(v&0x0f)<<2 | alwaysOne
	binary.BigEndian.PutUint32(h[4:], uint32(spi))
	binary.BigEndian.PutUint64(h[8:], uint64(iv))
}

// PeekSPI returns the SPI of datagram b without checking anything else
// (false if b is too short to hold one).
func PeekSPI(b []byte) (SPI, bool) {
	if len(b) < HeaderLen {
		return 0, false
	}
	return Header(b).SPI(), true
}

// PeekClear returns the clear bytes of datagram b's packet — Falcon's
// first word, whose destination CID finds the connection and so the RxSA
// to Open with — without checking anything (false if b is shorter than
// MinDatagram). They are not yet authenticated: Open authenticates them.
func PeekClear(b []byte) ([]byte, bool) {
	if len(b) < MinDatagram {
		return nil, false
	}
	return b[HeaderLen : HeaderLen+CryptOffset], true
}
