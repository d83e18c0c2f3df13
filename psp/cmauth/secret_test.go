package cmauth

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testSecretHex = "00112233445566778899aabbccddeeff0f1e2d3c4b5a69788796a5b4c3d2e1f0"

func writeKeyFile(t *testing.T, text string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fabric.key")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadSecret(t *testing.T) {
	p := writeKeyFile(t, testSecretHex[:32]+"\n"+testSecretHex[32:]+"\n", 0o600)
	s, err := LoadSecret(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := NewSecret(mustHex(t, testSecretHex))
	if s.key != raw.key || s.Fingerprint() != raw.Fingerprint() || len(s.Fingerprint()) != 16 {
		t.Fatal("the key file and the same bytes give different keys")
	}
	if _, err := LoadSecret(writeKeyFile(t, testSecretHex, 0o400)); err != nil {
		t.Fatalf("mode 0400: %v", err)
	}
}

func TestLoadSecretRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
		mode os.FileMode
		want error
	}{
		{"group readable", testSecretHex, 0o640, ErrKeyFileMode},
		{"world readable", testSecretHex, 0o604, ErrKeyFileMode},
		{"group writable", testSecretHex, 0o620, ErrKeyFileMode},
		{"short", testSecretHex[:62], 0o600, ErrSecretShort},
		{"not hex", strings.Repeat("zz", 32), 0o600, ErrSecretFormat},
		{"odd digits", testSecretHex + "1", 0o600, ErrSecretFormat},
		{"all zero", strings.Repeat("00", 32), 0o600, ErrSecretWeak},
		{"too big", strings.Repeat("ab", maxKeyFile), 0o600, ErrSecretFormat},
	} {
		if _, err := LoadSecret(writeKeyFile(t, c.text, c.mode)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := LoadSecret(t.TempDir()); !errors.Is(err, ErrKeyFileType) {
		t.Errorf("directory: %v", err)
	}
	if _, err := LoadSecret(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGenerateKeyFileLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fabric.key")
	if err := GenerateKeyFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(path); err != nil {
		t.Fatalf("LoadSecret of a generated key file: %v", err)
	}
	if err := GenerateKeyFile(path); err == nil {
		t.Fatal("GenerateKeyFile overwrote an existing file")
	}
}
