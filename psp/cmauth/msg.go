package cmauth

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"io"

	"falconnic/psp"
)

// An authenticated CM message [ARCHITECTURE §5 CM; issue 18]: the
// device's CM message (device/cm/wire.go) travels inside an envelope
// sealed with AES-256-GCM under the fabric's CM key. GCM authenticates
// the header and encrypts the body, because the body carries the
// connection's PSP key. All integers are big-endian:
//
//	0   magic "FNCA"            4  version (1) | ID length | reserved (2)
//	8   sender's time (8)       Unix nanoseconds, for the freshness window
//	16  nonce (12)              random; the GCM nonce and the replay-cache key
//	28  sender daemon ID        ID length bytes
//	..  sealed: SA offer (40) | CM message
//	end tag (16)
//
// SA offer: PSP version (1) | flags (1, bit 0: an SA is offered) |
// reserved (2) | SPI (4) | key (32; a 128-bit key in its first 16 bytes,
// zeroes after). The SPI is the one the sender's NIC gave this connection,
// and the key the one it derived for it: the receiver seals with them.
const (
	envMagic   = 0x464e4341 // "FNCA"
	envVersion = 1
	headerLen  = 28
	nonceLen   = 12
	tagLen     = 16
	saLen      = 40
	// MaxIDLen is the longest daemon ID.
	MaxIDLen = 64
	// Overhead is what sealing adds to a CM message, besides the ID.
	Overhead = headerLen + saLen + tagLen
)

// ID names a daemon of the fabric (its config's name): what a peer
// binds to the MACs it may speak for.
type ID string

// ErrID is returned for an empty ID or one longer than MaxIDLen.
var ErrID = errors.New("cmauth: daemon ID must be 1 to 64 bytes")

func (id ID) valid() bool { return len(id) > 0 && len(id) <= MaxIDLen }

// SA is a security association a CM message offers: the sender's SPI for
// the connection and the key it derived for it (psp.MasterKeys.Derive).
type SA struct {
	Version psp.Version
	SPI     psp.SPI
	Key     [32]byte
}

// KeyBytes returns the key's bytes for the version (psp.NewTxSA).
func (a *SA) KeyBytes() []byte { return a.Key[:a.Version.KeyLen()] }

// Msg is an opened message.
type Msg struct {
	From  ID
	Time  int64 // sender's clock, Unix ns
	HasSA bool
	SA    SA
	Body  []byte // the CM message (a subslice of Open's buffer)
}

// newGCM returns AES-256-GCM under the fabric's CM key.
func newGCM(s *Secret) cipher.AEAD {
	b, err := aes.NewCipher(s.key[:])
	if err != nil {
		panic("cmauth: aes: " + err.Error()) // a 32-byte key is always valid
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		panic("cmauth: gcm: " + err.Error())
	}
	return a
}

// Sealer seals this daemon's CM messages. Safe for concurrent use (every
// NIC's port goroutine sends CM messages).
type Sealer struct {
	aead cipher.AEAD
	self ID
	rand io.Reader
}

// NewSealer returns the sealer of daemon self in the fabric of s; nonces
// come from rand (crypto/rand.Reader in a daemon; safe for concurrent use).
func NewSealer(s *Secret, self ID, rand io.Reader) (*Sealer, error) {
	if !self.valid() {
		return nil, ErrID
	}
	return &Sealer{aead: newGCM(s), self: self, rand: rand}, nil
}

// Seal appends the sealed envelope of CM message body, offering sa (nil:
// none, as in a REJ), sent at now (Unix ns), to dst. Every call draws a
// fresh nonce: a resent message is sealed again, never replayed.
func (s *Sealer) Seal(dst []byte, now int64, sa *SA, body []byte) ([]byte, error) {
	start := len(dst)
	var h [headerLen]byte
	binary.BigEndian.PutUint32(h[0:], envMagic)
	h[4], h[5] = envVersion, byte(len(s.self))
	binary.BigEndian.PutUint64(h[8:], uint64(now))
	if _, err := io.ReadFull(s.rand, h[16:16+nonceLen]); err != nil {
		return dst, err
	}
	dst = append(dst, h[:]...)
	dst = append(dst, s.self...)
	aad := len(dst)
	var off [saLen]byte
	if sa != nil {
		if sa.Version.KeyLen() == 0 {
			return dst[:start], psp.ErrVersion
		}
		off[0], off[1] = byte(sa.Version), 1
		binary.BigEndian.PutUint32(off[4:], uint32(sa.SPI))
		copy(off[8:], sa.KeyBytes())
	}
	plain := append(off[:], body...)
	nonce := dst[start+16 : start+16+nonceLen]
	out := s.aead.Seal(dst, nonce, plain, dst[start:aad])
	clear(plain[:saLen])
	clear(off[:])
	return out, nil
}
