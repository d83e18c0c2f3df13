package psp

import (
	"errors"
	"sync/atomic"
)

// MasterKeys are one receiving NIC's two master-key slots and their
// generations [digest §10.1, F-SEC-2, F-SEC-3]. An SPI's top bit picks the
// slot its key derives from. Rotation installs a new key in the slot not
// in use and makes it current; SPIs of the previous generation stay
// accepted until DisallowPrevious, so traffic keyed before the rotation
// drains without loss. The set is an immutable snapshot behind an atomic
// pointer: any goroutine may read it while the owner rotates.
type MasterKeys struct {
	p atomic.Pointer[keyset]
}

// keyset is one snapshot of the slots.
type keyset struct {
	key       [2][MasterKeyLen]byte
	gen       [2]uint32 // generation installed in each slot; 0: empty
	current   int       // slot new SPIs use
	allowPrev bool      // the other slot's SPIs are accepted
}

// Master-key errors.
var (
	ErrNoKey    = errors.New("psp: the SPI's master-key slot is empty")
	ErrZeroKey  = errors.New("psp: a master key must not be all zeroes")
	ErrStaleGen = errors.New("psp: the SPI's master-key generation is no longer accepted")
)

// NewMasterKeys returns a set whose slot 0 holds key as generation 1.
func NewMasterKeys(key [MasterKeyLen]byte) (*MasterKeys, error) {
	if key == ([MasterKeyLen]byte{}) {
		return nil, ErrZeroKey
	}
	m := &MasterKeys{}
	ks := &keyset{}
	ks.key[0], ks.gen[0] = key, 1
	m.p.Store(ks)
	return m, nil
}

func (m *MasterKeys) load() *keyset { return m.p.Load() }

// Rotate installs key as the next generation in the slot not in use and
// makes it current; the previous generation stays accepted (step 1 of the
// CM's rotation, F-SEC-3). It returns the new generation. The owner of the
// set calls Rotate and DisallowPrevious; they must not race each other.
func (m *MasterKeys) Rotate(key [MasterKeyLen]byte) (uint32, error) {
	if key == ([MasterKeyLen]byte{}) {
		return 0, ErrZeroKey
	}
	old := m.load()
	ks := *old
	next := 1 - old.current
	ks.key[next], ks.gen[next] = key, old.gen[old.current]+1
	ks.current, ks.allowPrev = next, true
	m.p.Store(&ks)
	return ks.gen[next], nil
}

// DisallowPrevious stops accepting SPIs of the previous generation (the
// CM does this once every connection is rekeyed, and before the next
// rotation).
func (m *MasterKeys) DisallowPrevious() {
	ks := *m.load()
	ks.allowPrev = false
	m.p.Store(&ks)
}

// Generation returns the current generation.
func (m *MasterKeys) Generation() uint32 {
	ks := m.load()
	return ks.gen[ks.current]
}

// NewSPI returns the SPI with low 31 bits index in the current slot (the
// caller keeps indices unique per NIC and non-zero).
func (m *MasterKeys) NewSPI(index uint32) SPI {
	return SPI(uint32(m.load().current)<<31 | index&^spiSlotBit)
}

// accept reports whether spi's slot is current, or previous while that is
// allowed, and returns its generation.
func (ks *keyset) accept(spi SPI) (uint32, bool) {
	s := spi.Slot()
	if ks.gen[s] == 0 || (s != ks.current && !ks.allowPrev) {
		return 0, false
	}
	return ks.gen[s], true
}

// Derive appends spi's key for version v to dst and returns the
// generation it derives from: what the NIC hands the peer (through the
// authenticated CM) as its TX key for the connection, and what an RxSA
// opens with.
func (m *MasterKeys) Derive(dst []byte, spi SPI, v Version) ([]byte, uint32, error) {
	ks := m.load()
	gen, ok := ks.accept(spi)
	switch {
	case ks.gen[spi.Slot()] == 0:
		return dst, 0, ErrNoKey
	case !ok:
		return dst, 0, ErrStaleGen
	}
	out, err := DeriveKey(dst, &ks.key[spi.Slot()], spi, v)
	return out, gen, err
}
