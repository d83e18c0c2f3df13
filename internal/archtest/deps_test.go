package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "falconnic"

// rules maps a package path prefix (inside the module) to the module-internal
// prefixes its packages may import. The longest matching prefix wins. Every
// package of the module must match a rule, so a new top-level folder needs a
// row here (and a line in ARCHITECTURE.md §7).
var rules = map[string][]string{
	"internal/":   {"internal/"},
	"falcon/wire": {"falcon/wire", "internal/"},
	"falcon":      {"falcon", "internal/"},
	"firmware":    {"firmware", "falcon", "internal/"},
	"verbs":       {"verbs", "falcon", "internal/"},
	"nvme":        {"nvme", "falcon", "internal/"},
	"vhostuser":   {"vhostuser", "internal/"},
	"psp":         {"psp", "internal/"}, // PSP encapsulation and CM authentication: sans-I/O leaves
	"device":      {"device", "vhostuser", "nvme", "falcon", "psp", "internal/"},
	// The function rooms under device/ reach each other only through the
	// port, the connection manager and the frame vocabulary (l2); the
	// daemon, at device/, assembles them. Test peers import only what a
	// guest or QEMU would see.
	"device/l2":              {"internal/"},
	"device/ether":           {"device/l2", "vhostuser", "internal/"},
	"device/rdma":            {"device/port", "device/cm", "device/rdmauapi", "verbs", "falcon", "vhostuser", "internal/"},
	"device/storage":         {"device/port", "device/cm", "nvme", "falcon", "vhostuser", "internal/"},
	"device/ether/ethertest": {"vhostuser", "internal/"},
	"device/storage/blktest": {"vhostuser", "internal/"},
	"device/fabric":          {"device/l2", "psp", "internal/"},
	"device/port":            {"falcon", "firmware", "internal/"},
	"device/cm":              {"device/port", "device/fabric", "falcon", "psp", "internal/"},
	"device/vsock":           {"vhostuser", "internal/"},
	"device/capture":         {"falcon", "internal/"},
	"device/rdmauapi":        {"internal/"},
	"qemu":                   {"qemu", "internal/"},
	"guest":                  {"guest", "internal/"},
	"cmd/":                   {""}, // mains may import anything
	"tests":                  {""}, // end-to-end tests build binaries and boot VMs
	"guest-driver/":          {"guest-driver/", "internal/"},
}

type pkg struct {
	ImportPath   string
	Imports      []string
	XTestImports []string
}

func TestDependencyRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		n++
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		allowed, ok := ruleFor(rel)
		if !ok {
			t.Errorf("%s: no dependency rule covers this package; add one to rules", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			if !allowedDep(dep, allowed) {
				t.Errorf("%s imports %s: not allowed by ARCHITECTURE.md §7 (allowed: %v)", p.ImportPath, imp, allowed)
			}
		}
	}
	if n == 0 {
		t.Fatal("go list found no packages")
	}
}

func ruleFor(rel string) ([]string, bool) {
	best, found := "", false
	for prefix := range rules {
		if matches(rel, prefix) && len(prefix) >= len(best) {
			best, found = prefix, true
		}
	}
	return rules[best], found
}

func allowedDep(dep string, allowed []string) bool {
	for _, a := range allowed {
		if a == "" || matches(dep, a) {
			return true
		}
	}
	return false
}

// matches reports whether path is prefix or lies under it. A prefix ending
// in "/" matches everything below that folder.
func matches(path, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path+"/", prefix)
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func TestRuleMatching(t *testing.T) {
	for _, c := range []struct {
		pkg, dep string
		ok       bool
	}{
		{"falcon/pdl", "falcon/wire", true},
		{"falcon/wire", "falcon/pdl", false},
		{"verbs", "nvme", false},
		{"nvme", "vhostuser", false},
		{"vhostuser", "falcon/wire", false},
		{"device", "vhostuser", true},
		{"device/port", "device", false},
		{"device/port", "vhostuser", false},
		{"device/cm", "device/port", true},
		{"device/cm", "device", false},
		{"device/cm", "device/fabric", true},
		{"device/fabric", "device/port", false},
		{"device/fabric", "device", false},
		{"device/l2", "device/fabric", false},
		{"device/ether", "device/rdma", false},
		{"device/ether", "device/fabric", false},
		{"device/rdma", "device/ether", false},
		{"device/rdma", "device/storage", false},
		{"device/rdma", "device/port", true},
		{"device/storage", "device/rdma", false},
		{"device/storage", "device", false},
		{"device/storage/blktest", "device/storage", false},
		{"device/ether/ethertest", "device/ether", false},
		{"device/cm", "verbs", false},
		{"device/vsock", "device", false},
		{"device/vsock", "vhostuser", true},
		{"device", "device/port", true},
		{"device", "psp", true},
		{"device/cm", "psp/cmauth", true},
		{"device/fabric", "psp", true},
		{"psp", "falcon", false},
		{"psp/cmauth", "device/cm", false},
		{"falconx", "falcon", false},
		{"cmd/falconnic", "device", true},
	} {
		allowed, ok := ruleFor(c.pkg)
		if c.pkg == "falconx" {
			if ok {
				t.Errorf("falconx matched a rule")
			}
			continue
		}
		if !ok {
			t.Fatalf("%s: no rule", c.pkg)
		}
		if got := allowedDep(c.dep, allowed); got != c.ok {
			t.Errorf("%s -> %s: allowed=%v, want %v", c.pkg, c.dep, got, c.ok)
		}
	}
}
