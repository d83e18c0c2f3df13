package device

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"falconnic/psp/cmauth"
)

// testKeyFile is the deployment secret every test daemon of this package
// shares (the fabrics of the tests are secure, as a user's are by default).
var testKeyFile string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "falconnic-device-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testKeyFile = filepath.Join(dir, "fabric.key")
	if err := cmauth.GenerateKeyFile(testKeyFile); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// keyJSON is the fabric section's key_file member for testKeyFile, to
// follow another member.
func keyJSON() string { return fmt.Sprintf(`, "key_file": %q`, testKeyFile) }

func writeFile(path, s string, mode os.FileMode) error {
	if err := os.WriteFile(path, []byte(s), mode); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}
