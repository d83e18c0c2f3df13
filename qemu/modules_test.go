package qemu

import (
	"reflect"
	"strings"
	"testing"
)

const sampleModulesDep = `kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/virtio/virtio.ko:
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/nvme/host/nvme-core.ko: kernel/lib/crc64.ko
kernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko kernel/lib/crc64.ko
kernel/lib/crc64.ko:
`

func TestLoadOrderPutsDependenciesFirst(t *testing.T) {
	md, err := ParseModulesDep(strings.NewReader(sampleModulesDep))
	if err != nil {
		t.Fatal(err)
	}
	got, err := md.LoadOrder([]string{"virtio_net", "nvme", "virtio_net"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kernel/net/core/failover.ko",
		"kernel/drivers/net/net_failover.ko",
		"kernel/drivers/virtio/virtio.ko",
		"kernel/drivers/virtio/virtio_ring.ko",
		"kernel/drivers/net/virtio_net.ko",
		"kernel/lib/crc64.ko",
		"kernel/drivers/nvme/host/nvme-core.ko",
		"kernel/drivers/nvme/host/nvme.ko",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order\n got %q\nwant %q", got, want)
	}
}

func TestModuleNamesMatchAcrossDashAndUnderscore(t *testing.T) {
	md, _ := ParseModulesDep(strings.NewReader(sampleModulesDep))
	if f, ok := md.File("nvme_core"); !ok || f != "kernel/drivers/nvme/host/nvme-core.ko" {
		t.Fatalf("nvme_core → %q %v", f, ok)
	}
}

func TestLoadOrderSkipsBuiltinsAndRejectsUnknown(t *testing.T) {
	md, _ := ParseModulesDep(strings.NewReader(sampleModulesDep))
	got, err := md.LoadOrder([]string{"af_packet"}, map[string]bool{"af_packet": true})
	if err != nil || len(got) != 0 {
		t.Fatalf("builtin: %q %v", got, err)
	}
	if _, err := md.LoadOrder([]string{"no_such_mod"}, nil); err == nil {
		t.Fatal("unknown module accepted")
	}
}

func TestLoadOrderReportsCyclesAndDanglingDeps(t *testing.T) {
	md, err := ParseModulesDep(strings.NewReader("a.ko: b.ko\nb.ko: a.ko\nc.ko: missing.ko\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := md.LoadOrder([]string{"a"}, nil); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cycle: %v", err)
	}
	if _, err := md.LoadOrder([]string{"c"}, nil); err == nil || !strings.Contains(err.Error(), "not in modules.dep") {
		t.Fatalf("dangling: %v", err)
	}
}

func TestParseModulesDepRejectsMalformedLines(t *testing.T) {
	for _, s := range []string{"no colon here\n", ": x.ko\n", "a.ko: ../../etc/passwd.ko\n", "a.ko: notamodule\n"} {
		if _, err := ParseModulesDep(strings.NewReader(s)); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func FuzzParseModulesDep(f *testing.F) {
	f.Add(sampleModulesDep)
	f.Add("a.ko: b.ko\nb.ko: a.ko\n")
	f.Fuzz(func(t *testing.T, s string) {
		md, err := ParseModulesDep(strings.NewReader(s))
		if err != nil {
			return
		}
		var roots []string
		for name := range md.byName {
			roots = append(roots, name)
		}
		order, err := md.LoadOrder(roots, nil)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, f := range order {
			for _, d := range md.deps[f] {
				if !seen[d] {
					t.Fatalf("%s loads before its dependency %s", f, d)
				}
			}
			seen[f] = true
		}
	})
}
