package cmauth

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// The deployment secret is one per fabric: every daemon of the fabric
// reads the same key file, named in its config. The file holds at least
// 32 random bytes as hex (whitespace ignored) and must be a regular file
// owned by the daemon's user with no group or other permission bits
// (mode 0600 or 0400): a secret others can read authenticates nothing.
//
// The CM key is derived from it with HKDF-SHA256 (crypto/hkdf, RFC 5869;
// info "falconnic cm v1"), so the file's bytes are never used directly
// as a cipher key.
const (
	// MinSecretLen is the shortest deployment secret, in bytes.
	MinSecretLen = 32
	// maxKeyFile bounds what LoadSecret reads.
	maxKeyFile = 4096
)

// Secret errors.
var (
	ErrKeyFileMode  = errors.New("cmauth: key file must be mode 0600 (or stricter): group or other may access it")
	ErrKeyFileOwner = errors.New("cmauth: key file is not owned by the daemon's user")
	ErrKeyFileType  = errors.New("cmauth: key file is not a regular file")
	ErrSecretShort  = errors.New("cmauth: deployment secret shorter than 32 bytes")
	ErrSecretFormat = errors.New("cmauth: key file must hold the secret as hex digits")
	ErrSecretWeak   = errors.New("cmauth: deployment secret is all one byte value")
)

// Secret is the CM key of one fabric, derived from its deployment secret.
type Secret struct {
	key [32]byte
	fp  [8]byte
}

// NewSecret derives the fabric's CM key from raw, the deployment secret.
func NewSecret(raw []byte) (*Secret, error) {
	if len(raw) < MinSecretLen {
		return nil, ErrSecretShort
	}
	if bytes.Count(raw, raw[:1]) == len(raw) {
		return nil, ErrSecretWeak
	}
	s := &Secret{}
	k, err := hkdf.Key(sha256.New, raw, nil, "falconnic cm v1", len(s.key))
	if err != nil {
		return nil, err
	}
	copy(s.key[:], k)
	fp, err := hkdf.Key(sha256.New, raw, nil, "falconnic cm fingerprint v1", len(s.fp))
	if err != nil {
		return nil, err
	}
	copy(s.fp[:], fp)
	return s, nil
}

// Fingerprint names the secret without revealing it (status output and
// logs: two daemons with different fingerprints cannot talk).
func (s *Secret) Fingerprint() string { return hex.EncodeToString(s.fp[:]) }

// LoadSecret reads the deployment secret from the key file at path,
// checking that it is a regular file of the daemon's user with mode 0600
// or stricter, and derives the fabric's CM key.
func LoadSecret(path string) (*Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cmauth: key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cmauth: key file: %w", err)
	}
	if err := checkKeyFile(fi); err != nil {
		return nil, fmt.Errorf("%w (%s, mode %#o)", err, path, fi.Mode().Perm())
	}
	text, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("cmauth: key file: %w", err)
	}
	if len(text) > maxKeyFile {
		return nil, ErrSecretFormat
	}
	raw, err := hex.DecodeString(string(bytes.Join(bytes.Fields(text), nil)))
	clear(text)
	if err != nil {
		return nil, ErrSecretFormat
	}
	defer clear(raw)
	return NewSecret(raw)
}

// checkKeyFile checks a key file's type, permissions and owner.
func checkKeyFile(fi os.FileInfo) error {
	switch {
	case !fi.Mode().IsRegular():
		return ErrKeyFileType
	case fi.Mode().Perm()&0o077 != 0:
		return ErrKeyFileMode
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return ErrKeyFileOwner
	}
	return nil
}

// KeyLogKey returns the fabric's CM key for a capture's key log
// (`falconnic capture --keylog`, device/capture/keylog.go), with which a
// dissector opens the captured CM envelopes. Nothing else uses it.
func (s *Secret) KeyLogKey() [32]byte { return s.key }
