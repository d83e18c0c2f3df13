package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// ioFree lists the packages that must not link any I/O: the transport
// engine is sans-I/O (ARCHITECTURE.md §4); its harnesses and links live
// beside it (falcon/sim, falcon/link).
var ioFree = []string{"falcon", "falcon/pdl", "falcon/tl", "falcon/wire", "falcon/rue"}

// forbiddenDeps are what an I/O-free package must not depend on, even
// indirectly.
var forbiddenDeps = []string{"net", "os", "os/exec", "github.com/gopacket/gopacket", module + "/falcon/link", module + "/falcon/sim"}

func TestTransportIsIOFree(t *testing.T) {
	for _, p := range ioFree {
		out, err := exec.Command("go", "list", "-deps", module+"/"+p).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", p, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, f := range forbiddenDeps {
			if deps[f] {
				t.Errorf("%s depends on %s: the transport must stay free of I/O", p, f)
			}
		}
	}
}
