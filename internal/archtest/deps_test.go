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
	"device":      {"device", "vhostuser", "verbs", "nvme", "falcon", "firmware", "internal/"},
	// The function rooms under device/ reach each other only through the
	// port (and the daemon, at device/, assembles them).
	"device/port":     {"falcon", "firmware", "internal/"},
	"device/cm":       {"device/port", "falcon", "internal/"},
	"device/vsock":    {"vhostuser", "internal/"},
	"device/capture":  {"falcon", "internal/"},
	"device/rdmauapi": {"internal/"},
	"qemu":            {"qemu", "internal/"},
	"guest":           {"guest", "internal/"},
	"cmd/":            {""}, // mains may import anything
	"tests":           {""}, // end-to-end tests build binaries and boot VMs
	"guest-driver/":   {"guest-driver/", "internal/"},
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
		{"device/cm", "verbs", false},
		{"device/vsock", "device", false},
		{"device/vsock", "vhostuser", true},
		{"device", "device/port", true},
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
