package device

import (
	"errors"
	"strings"
	"testing"
)

func TestNamespaceAllowListsResolve(t *testing.T) {
	cfg := func(allow string) string {
		return `{"nics":[{"name":"a","socket":"a.sock","mac":"52:54:00:00:00:0a"},{"name":"b","socket":"b.sock","mac":"52:54:00:00:00:0b"}],
		  "nvme":{"namespaces":[{"nic":"a","nsid":1,"backing":"memory","size":1048576` + allow + `}]}}`
	}
	for _, c := range []struct {
		name, allow string
		macs        int
		open        bool
		err         string
	}{
		{"absent: this daemon's NICs", ``, 2, false, ""},
		{"everyone", `,"allow":["*"]`, 0, true, ""},
		{"a NIC name, a MAC and an NQN", `,"allow":["b","52:54:00:00:00:77","nqn.2014-08.org.example:host"]`, 2, false, ""},
		{"star among others", `,"allow":["*","b"]`, 0, false, "only entry"},
		{"unknown name", `,"allow":["nobody"]`, 0, false, "neither a nic"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(cfg(c.allow)))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			acl := got.NVMe.Namespaces[0].ACL
			if (acl == nil) != c.open || acl != nil && len(acl.MACs) != c.macs {
				t.Fatalf("acl %+v", acl)
			}
		})
	}
}

func TestNICAddressesAreChecked(t *testing.T) {
	_, err := ParseConfig([]byte(`{"nics":[{"name":"a","socket":"a.sock","mac":"52:54:00:00:00:0a","ips":["10.0.0.1","fe80::1","ten"]}]}`))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ten") {
		t.Fatalf("err %v", err)
	}
}

func TestInsecureFabricIsWarnedAbout(t *testing.T) {
	d := startDaemon(t, `{"control":"ctl.sock","nics":[{"name":"a","socket":"a.sock","mac":"52:54:00:00:00:0a"}],
	  "fabric":{"listen":"127.0.0.1:0","insecure":true}}`)
	st := d.status(t)
	if st.Security == nil || st.Security.Mode != "insecure" || !strings.Contains(st.Security.Warning, "INSECURE") {
		t.Fatalf("security status %+v", st.Security)
	}
	if d.cm.Secure() {
		t.Fatal("the CM seals on an insecure fabric")
	}
}

func TestKeyFileModeIsChecked(t *testing.T) {
	dir := t.TempDir()
	key := dir + "/fabric.key"
	if err := writeFile(key, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`{"control":"` + dir + `/ctl.sock","nics":[],"fabric":{"listen":"127.0.0.1:0","key_file":"` + key + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDaemon(cfg, DaemonOptions{Logger: quietLog}); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("a world-readable key file was accepted: %v", err)
	}
}

// TestInsecureDaemonsStillCarryTheDisk: two daemons configured
// "insecure" set up the remote disk's path in plaintext, as before the
// fabric was secured.
func TestInsecureDaemonsStillCarryTheDisk(t *testing.T) {
	la, lb := freeUDPPort(t), freeUDPPort(t)
	plain := func(cfg string) string {
		return strings.Replace(cfg, keyJSON(), `, "insecure": true`, 1)
	}
	store := startDaemon(t, plain(storeConfig(lb, la, "memory", "")))
	host := startDaemon(t, plain(hostConfig(la, lb, "")))
	r := remoteDisk(t, host)
	r.writeRead(0, 16, 4)
	if store.cm.Secure() || len(store.cm.SealedCIDs()) != 0 || store.Status().Security.Mode != "insecure" {
		t.Fatal("an insecure daemon sealed")
	}
}
