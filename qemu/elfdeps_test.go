package qemu

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTreeResolveKeepsAbsoluteLinksInsideTheTree(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "lib/x86_64-linux-gnu"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "lib64"), 0o755))
	must(os.WriteFile(filepath.Join(root, "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"), []byte("ld"), 0o755))
	must(os.Symlink("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", filepath.Join(root, "lib64/ld-linux-x86-64.so.2")))
	must(os.Symlink("libz.so.1.2.13", filepath.Join(root, "lib/x86_64-linux-gnu/libz.so.1")))
	must(os.WriteFile(filepath.Join(root, "lib/x86_64-linux-gnu/libz.so.1.2.13"), []byte("z"), 0o644))
	must(os.Symlink("/../../../etc/passwd", filepath.Join(root, "lib/x86_64-linux-gnu/escape.so")))
	tr := Tree{root}
	for in, want := range map[string]string{
		"/lib64/ld-linux-x86-64.so.2":    "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"lib/x86_64-linux-gnu/libz.so.1": "lib/x86_64-linux-gnu/libz.so.1.2.13",
	} {
		if got, err := tr.Resolve(in); err != nil || got != want {
			t.Errorf("Resolve(%s) = %q %v, want %q", in, got, err, want)
		}
	}
	if got, err := tr.Resolve("lib/x86_64-linux-gnu/escape.so"); err == nil {
		t.Errorf("escaping link resolved to %q", got)
	}
}

// fakeELF is a dependency graph standing in for ELF files.
type fakeELF map[string]ELFInfo

func (f fakeELF) read(p string) (ELFInfo, error) {
	i, ok := f[p]
	if !ok {
		return ELFInfo{}, errNotELF
	}
	return i, nil
}

func TestLibClosureFollowsNeededAndInterp(t *testing.T) {
	files := map[string]string{ // where the loader looks → real file
		"lib64/ld-linux-x86-64.so.2":                 "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"lib/x86_64-linux-gnu/libc.so.6":             "lib/x86_64-linux-gnu/libc.so.6",
		"usr/lib/x86_64-linux-gnu/libibverbs.so.1":   "usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0",
		"usr/lib/x86_64-linux-gnu/libnl-3.so.200":    "usr/lib/x86_64-linux-gnu/libnl-3.so.200.26.0",
		"usr/lib/x86_64-linux-gnu/ceph/libceph.so.0": "usr/lib/x86_64-linux-gnu/ceph/libceph.so.0",
	}
	resolve := func(p string) (string, error) {
		if r, ok := files[p]; ok {
			return r, nil
		}
		return "", os.ErrNotExist
	}
	graph := fakeELF{
		"usr/bin/ibv_devinfo":                      {Needed: []string{"libibverbs.so.1", "libc.so.6"}, Interp: "lib64/ld-linux-x86-64.so.2"},
		"usr/lib/x86_64-linux-gnu/libibverbs.so.1": {Needed: []string{"libnl-3.so.200", "libc.so.6"}},
		"usr/bin/rados":                            {Needed: []string{"libceph.so.0"}, RunPath: []string{"usr/lib/x86_64-linux-gnu/ceph"}},
	}
	got, err := LibClosure([]string{"usr/bin/ibv_devinfo", "usr/bin/rados", "usr/share/doc/README"}, graph.read, resolve)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, files) {
		t.Fatalf("closure\n got %v\nwant %v", got, files)
	}
}

func TestLibClosureNamesEveryMissingLibrary(t *testing.T) {
	graph := fakeELF{"usr/bin/fio": {Needed: []string{"librbd.so.1", "libaio.so.1"}}}
	_, err := LibClosure([]string{"usr/bin/fio"}, graph.read, func(string) (string, error) { return "", os.ErrNotExist })
	if err == nil || !strings.Contains(err.Error(), "librbd.so.1 (needed by usr/bin/fio)") || !strings.Contains(err.Error(), "libaio.so.1") {
		t.Fatalf("err = %v", err)
	}
	_, err = LibClosure([]string{"x"}, func(string) (ELFInfo, error) { return ELFInfo{}, errors.New("io") }, nil)
	if err == nil {
		t.Fatal("read error ignored")
	}
}
