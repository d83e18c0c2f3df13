package cmauth

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// GenerateKeyFile writes a new deployment secret of MinSecretLen random
// bytes (crypto/rand) as hex digits to a new file at path, mode 0600: the
// key file LoadSecret reads. It never overwrites a file.
func GenerateKeyFile(path string) error {
	var raw [MinSecretLen]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	defer clear(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("cmauth: key file: %w", err)
	}
	text := hex.AppendEncode(nil, raw[:])
	_, err = f.Write(append(text, '\n'))
	clear(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
