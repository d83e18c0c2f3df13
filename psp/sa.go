package psp

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"math"
	"unsafe"
)

// Seal and key errors.
var (
	ErrKeyLen       = errors.New("psp: key length does not match the version")
	ErrZeroSPI      = errors.New("psp: SPI zero is not valid")
	ErrShortPacket  = errors.New("psp: packet shorter than the clear bytes")
	ErrBuffer       = errors.New("psp: destination too small, or overlapping the packet other than in place")
	ErrSeqExhausted = errors.New("psp: IV sequence numbers of this SPI used up; rekey")
)

// gcmNonceLen is the AES-GCM nonce: SPI (4) || IV (8).
const gcmNonceLen = 12

func newAEAD(v Version, key []byte) (cipher.AEAD, error) {
	if v.KeyLen() == 0 {
		return nil, ErrVersion
	}
	if len(key) != v.KeyLen() {
		return nil, ErrKeyLen
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// TxSA is the transmit half of one connection's security association:
// the SPI the peer NIC gave the connection and the key it derived for it
// (carried by the authenticated CM). It is owned by one goroutine (the
// connection's); Seal does not allocate.
type TxSA struct {
	v     Version
	spi   SPI
	aead  cipher.AEAD
	seq   uint32 // last IV sequence number used under spi
	nonce [gcmNonceLen]byte
	stats *Counters
}

// NewTxSA returns a TxSA sealing with version v under spi and key;
// counters go to c (nil: the SA's own).
func NewTxSA(v Version, spi SPI, key []byte, c *Counters) (*TxSA, error) {
	if c == nil {
		c = &Counters{}
	}
	t := &TxSA{v: v, stats: c}
	if err := t.Rekey(spi, key); err != nil {
		return nil, err
	}
	return t, nil
}

// Rekey switches to spi and key (the peer rotated): the next datagram
// uses them, with sequence numbers from 1 again.
func (t *TxSA) Rekey(spi SPI, key []byte) error {
	if spi == 0 {
		return ErrZeroSPI
	}
	a, err := newAEAD(t.v, key)
	if err != nil {
		return err
	}
	t.spi, t.aead, t.seq = spi, a, 0
	binary.BigEndian.PutUint32(t.nonce[:4], uint32(spi))
	return nil
}

// SPI returns the SPI datagrams are sealed under.
func (t *TxSA) SPI() SPI { return t.spi }

// Seal encapsulates Falcon packet pkt (its first CryptOffset bytes stay
// clear) with transmit timestamp ts into dst, which needs capacity for
// len(pkt)+Overhead bytes, and returns the datagram dst[:len(pkt)+Overhead].
// pkt may already lie at dst[HeaderLen:] (sealed in place); otherwise it
// must not overlap dst.
func (t *TxSA) Seal(dst, pkt []byte, ts uint32) ([]byte, error) {
	n := len(pkt)
	if n < CryptOffset {
		t.stats.BadBuffer.Inc()
		return nil, ErrShortPacket
	}
	if cap(dst) < n+Overhead {
		t.stats.BadBuffer.Inc()
		return nil, ErrBuffer
	}
	out := dst[:n+Overhead]
	if overlap(out, pkt) && !sameStart(out[HeaderLen:], pkt) {
		t.stats.BadBuffer.Inc()
		return nil, ErrBuffer
	}
	if t.seq == math.MaxUint32 {
		t.stats.SeqExhausted.Inc()
		return nil, ErrSeqExhausted
	}
	t.seq++
	iv := MakeIV(ts, t.seq)
	copy(out[HeaderLen:], pkt[:CryptOffset]) // a no-op in place
	Header(out).Set(t.v, t.spi, iv)
	binary.BigEndian.PutUint64(t.nonce[4:], uint64(iv))
	const clearEnd = HeaderLen + CryptOffset
	t.aead.Seal(out[clearEnd:clearEnd], t.nonce[:], pkt[CryptOffset:], out[:clearEnd])
	t.stats.Sealed.Inc()
	return out, nil
}

// overlap reports whether a and b share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// sameStart reports whether a and b start at the same byte.
func sameStart(a, b []byte) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }

// rxKey is one SPI an RxSA accepts: its key, the generation it derives
// from, and its replay window.
type rxKey struct {
	spi  SPI // 0: none
	gen  uint32
	aead cipher.AEAD
	win  replay
}

// RxSA is the receive half of one connection's security association on
// the receiving NIC [digest §10.1]: the connection's current SPI and,
// during a rotation, its previous one, each with the key derived from the
// NIC's master key and a replay window. It is owned by one goroutine;
// Open does not allocate.
type RxSA struct {
	keys      *MasterKeys
	v         Version
	cur, prev rxKey
	nonce     [gcmNonceLen]byte
	stats     *Counters
}

// NewRxSA returns the RxSA of a connection given spi (from keys.NewSPI)
// on the NIC whose master keys are keys; counters go to c (nil: the SA's
// own).
func NewRxSA(keys *MasterKeys, v Version, spi SPI, c *Counters) (*RxSA, error) {
	if c == nil {
		c = &Counters{}
	}
	r := &RxSA{keys: keys, v: v, stats: c}
	if err := r.Rekey(spi); err != nil {
		return nil, err
	}
	r.prev = rxKey{}
	return r, nil
}

// Rekey makes spi the connection's current SPI and keeps the current one
// as previous (both accepted: datagrams sealed before the peer switched
// still open). It derives spi's key now, from its slot's master key.
func (r *RxSA) Rekey(spi SPI) error {
	if spi == 0 {
		return ErrZeroSPI
	}
	var kb [32]byte
	key, gen, err := r.keys.Derive(kb[:0], spi, r.v)
	if err != nil {
		return err
	}
	a, err := newAEAD(r.v, key)
	clear(kb[:])
	if err != nil {
		return err
	}
	r.prev = r.cur
	r.cur = rxKey{spi: spi, gen: gen, aead: a}
	return nil
}

// DropPrevious stops accepting the previous SPI (some RTTs after a
// rotation, F-SEC-3).
func (r *RxSA) DropPrevious() { r.prev = rxKey{} }

// SPI returns the current SPI.
func (r *RxSA) SPI() SPI { return r.cur.spi }

// PrevSPI returns the previous SPI (0: none).
func (r *RxSA) PrevSPI() SPI { return r.prev.spi }

// Open authenticates and decrypts datagram b in place and returns the
// Falcon packet (a subslice of b: the clear bytes then the plaintext) and
// the IV. The checks run in order — header, SPI, master-key generation,
// tag — and only a datagram whose tag verifies reaches the replay window
// and may change it. A refused datagram yields its Drop (counted); b's
// contents are then unspecified.
func (r *RxSA) Open(b []byte) ([]byte, IV, Drop) {
	pkt, iv, d := r.open(b)
	r.stats.Rx[d].Inc()
	return pkt, iv, d
}

func (r *RxSA) open(b []byte) ([]byte, IV, Drop) {
	if len(b) < MinDatagram {
		return nil, 0, DropShort
	}
	h := Header(b[:HeaderLen])
	switch {
	case h.NextHeader() != NextHeaderFalcon:
		return nil, 0, DropNextHeader
	case h.ExtLen() != hdrExtLen:
		return nil, 0, DropExtLen
	case h.CryptOffset() != CryptOffset:
		return nil, 0, DropCryptOffset
	case h.R() != 0 || h.Flags() != FlagsValid:
		return nil, 0, DropFlags
	case h.Version() != r.v:
		return nil, 0, DropVersion
	}
	spi := h.SPI()
	var k *rxKey
	switch {
	case spi == 0:
		return nil, 0, DropUnknownSPI
	case spi == r.cur.spi:
		k = &r.cur
	case spi == r.prev.spi:
		k = &r.prev
	default:
		return nil, 0, DropUnknownSPI
	}
	if gen, ok := r.keys.load().accept(spi); !ok || gen != k.gen {
		return nil, 0, DropStaleGen
	}
	copy(r.nonce[:], b[4:HeaderLen]) // SPI || IV
	const clearEnd = HeaderLen + CryptOffset
	if _, err := k.aead.Open(b[clearEnd:clearEnd], r.nonce[:], b[clearEnd:], b[:clearEnd]); err != nil {
		return nil, 0, DropAuth
	}
	iv := h.IV()
	if d := k.win.check(iv.Seq()); d != dropNone {
		return nil, 0, d
	}
	k.win.mark(iv.Seq())
	return b[HeaderLen : len(b)-ICVLen], iv, dropNone
}
