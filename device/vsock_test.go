package device

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDaemonServesConfiguredVsock(t *testing.T) {
	d := startDaemon(t, `{
  "control": "ctl.sock",
  "nics": [{"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01"}],
  "vsock": [{"name": "vs0", "socket": "vm/vs0.sock", "guest_cid": 3, "uds": "vm/vs0.uds"}]
}`)
	st := d.status(t)
	if len(st.Vsock) != 1 {
		t.Fatalf("status lists %d vsock devices, want 1", len(st.Vsock))
	}
	dir := filepath.Dir(st.Control)
	if _, err := os.Stat(filepath.Join(dir, "vm")); err != nil {
		t.Fatalf("the vsock socket directory was not created: %v", err)
	}
}

func TestConfigRejectsVsockClashes(t *testing.T) {
	for _, c := range []struct{ name, vsock, want string }{
		{"socket shared with a NIC", `{"name": "vs0", "socket": "a.sock", "guest_cid": 3}`, "used twice"},
		{"name shared with a NIC", `{"name": "a", "socket": "v.sock", "guest_cid": 3}`, "used twice"},
		{"host CID", `{"name": "vs0", "socket": "v.sock", "guest_cid": 2}`, "vsock vs0"},
	} {
		_, err := ParseConfig([]byte(`{"nics": [{"name": "a", "socket": "a.sock", "mac": "52:54:00:00:00:01"}],
  "vsock": [` + c.vsock + `]}`))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}
