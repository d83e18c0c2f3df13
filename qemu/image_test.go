package qemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestImageKeyChangesWithEveryInput(t *testing.T) {
	dir := t.TempDir()
	ko := filepath.Join(dir, "falconnic.ko")
	os.WriteFile(ko, []byte("v1"), 0o644)
	pkgs := []Package{{"perftest", "4.5+0.17-1"}, {"fio", "3.33-3"}}
	guest := []guestFile{{"guest/agent/main.go", []byte("package main")}}
	key := func(b *builder, p []Package, g []guestFile, gover string) string {
		k, err := b.key(p, g, gover)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	b := &builder{o: ImageOptions{Modules: GuestModules, Extra: []ExtraFile{{Src: ko, Dst: "/lib/modules/x/falconnic.ko", Load: true}}}}
	k0 := key(b, pkgs, guest, "go1.26.8")
	if k0 != key(b, pkgs, guest, "go1.26.8") {
		t.Fatal("key is not deterministic")
	}
	changed := map[string]string{
		"package version": key(b, []Package{{"perftest", "4.5+0.18-1"}, {"fio", "3.33-3"}}, guest, "go1.26.8"),
		"guest source":    key(b, pkgs, []guestFile{{"guest/agent/main.go", []byte("package main\n")}}, "go1.26.8"),
		"go version":      key(b, pkgs, guest, "go1.27.0"),
		"module list":     key(&builder{o: ImageOptions{Modules: []string{"virtio_net"}, Extra: b.o.Extra}}, pkgs, guest, "go1.26.8"),
		"no extra file":   key(&builder{o: ImageOptions{Modules: GuestModules}}, pkgs, guest, "go1.26.8"),
	}
	os.WriteFile(ko, []byte("v2"), 0o644)
	changed["extra file bytes"] = key(b, pkgs, guest, "go1.26.8")
	for what, k := range changed {
		if k == k0 {
			t.Errorf("changing the %s keeps the key", what)
		}
	}
}

func TestLoadImageExplainsWhatIsMissing(t *testing.T) {
	cache := t.TempDir()
	if _, err := LoadImage(cache); err == nil || !strings.Contains(err.Error(), "image build") {
		t.Fatalf("empty cache: %v", err)
	}
	dir := filepath.Join(cache, "images", "k")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(cache, "images", "latest"), []byte("k\n"), 0o644)
	if _, err := LoadImage(cache); err == nil || !strings.Contains(err.Error(), "broken image") {
		t.Fatalf("no manifest: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"key":"k","kernel":"vmlinuz","initrd":"initramfs.cpio"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "vmlinuz"), []byte("k"), 0o644)
	if _, err := LoadImage(cache); err == nil || !strings.Contains(err.Error(), "initramfs.cpio missing") {
		t.Fatalf("no initrd: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "initramfs.cpio"), []byte("i"), 0o644)
	im, err := LoadImage(cache)
	if err != nil || im.KernelPath() != filepath.Join(dir, "vmlinuz") {
		t.Fatalf("good image: %+v %v", im, err)
	}
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"key":"k","kernel":"../../etc/passwd","initrd":"initramfs.cpio"}`), 0o644)
	if _, err := LoadImage(cache); err == nil {
		t.Fatal("manifest escaping its directory accepted")
	}
}

func TestPruneImagesKeepsTheNewest(t *testing.T) {
	images := t.TempDir()
	for i, name := range []string{"old", "mid", "new", "newest"} {
		os.MkdirAll(filepath.Join(images, name), 0o755)
		when := time.Date(2026, 1, 1+i, 0, 0, 0, 0, time.UTC)
		os.Chtimes(filepath.Join(images, name), when, when)
	}
	os.WriteFile(filepath.Join(images, "latest"), []byte("newest\n"), 0o644)
	pruneImages(images, 3)
	for name, want := range map[string]bool{"old": false, "mid": true, "new": true, "newest": true, "latest": true} {
		if _, err := os.Stat(filepath.Join(images, name)); (err == nil) != want {
			t.Errorf("%s present = %v, want %v", name, err == nil, want)
		}
	}
}
