package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every configfs attribute the target script writes is written with
// echo -n, in one write: a bare echo's newline arrives as a second write,
// which configfs rejects.
func TestNVMfTargetScriptWritesAttributesWithoutNewline(t *testing.T) {
	s := nvmfTargetScript("10.0.0.2", 64)
	writes := regexp.MustCompile(`(?m)^echo (.*) > \$`).FindAllStringSubmatch(s, -1)
	if len(writes) != 8 {
		t.Fatalf("%d attribute writes, want 8:\n%s", len(writes), s)
	}
	for _, w := range writes {
		if !strings.HasPrefix(w[1], "-n ") {
			t.Errorf("attribute written with a newline: %q", w[0])
		}
	}
	for _, want := range []string{"set -e", "echo -n 10.0.0.2 > $P/addr_traddr", "echo -n 4420 > $P/addr_trsvcid",
		"echo -n rdma > $P/addr_trtype", "count=64 ", "ln -s $C/nvmet/subsystems/" + nvmfSubsysNQN + " $P/subsystems/" + nvmfSubsysNQN} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
}

func TestNVMfFioArgvAddsTheDeviceLast(t *testing.T) {
	got := nvmfFioArgv([]string{"--name=r", "--rw=randread"}, "/dev/nvme0n1")
	want := []string{"fio", "--name=r", "--rw=randread", "--filename=/dev/nvme0n1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %q, want %q", got, want)
	}
	def := strings.Join(nvmfFioArgv(nil, "/dev/nvme0n1"), " ")
	for _, want := range []string{"--rw=randwrite", "--bs=4k", "--iodepth=16", "--verify=crc32c", "--filename=/dev/nvme0n1"} {
		if !strings.Contains(def, want) {
			t.Errorf("default job %q lacks %s", def, want)
		}
	}
}

func TestFioJobErrors(t *testing.T) {
	for _, c := range []struct {
		name, out string
		fail      bool
	}{
		{"clean", "verify: (groupid=0, jobs=1): err= 0: pid=93: Fri Nov 27", false},
		{"two clean jobs", "a: (groupid=0, jobs=1): err= 0: pid=1\nb: (groupid=1, jobs=1): err= 0: pid=2", false},
		{"verify failure", "verify: (groupid=0, jobs=1): err=84 (file:io_u.c:2119, func=io_u_queued_complete, error=Invalid or incomplete multibyte or wide character): pid=93", true},
		{"second job fails", "a: (groupid=0, jobs=1): err= 0: pid=1\nb: (groupid=1, jobs=1): err= 5 (file:io_u.c): pid=2", true},
		{"no summary", "fio: failed to open /dev/nvme0n1", true},
	} {
		if err := fioJobErrors(c.out); (err != nil) != c.fail {
			t.Errorf("%s: fioJobErrors = %v, want failure %v", c.name, err, c.fail)
		}
	}
}

func TestNVMfUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--daemons", "3"},
		{"--loss", "1"},
		{"--daemons", "2", "--loss", "100"},
		{"--size", "0"},
	} {
		var out bytes.Buffer
		err := runNVMf(context.Background(), args, &out, &out)
		if !errors.Is(err, errUsage) {
			t.Errorf("nvmf %v: %v, want a usage error", args, err)
		}
	}
}

// fakeImage writes a cache whose latest image loads modules.
func fakeImage(t *testing.T, modules ...string) string {
	t.Helper()
	cache := t.TempDir()
	dir := filepath.Join(cache, "images", "k1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(map[string]any{"kernel": "vmlinuz", "initrd": "initramfs.cpio", "modules": modules})
	for name, data := range map[string][]byte{"manifest.json": m, "vmlinuz": []byte("k"), "initramfs.cpio": []byte("i")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cache, "images", "latest"), []byte("k1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cache
}

// An image built from sources without the NVMe-oF modules is refused
// before any guest boots, naming what it lacks.
func TestRequireImageModules(t *testing.T) {
	with := fakeImage(t, "kernel/drivers/nvme/host/nvme-rdma.ko", "kernel/drivers/nvme/target/nvmet-rdma.ko")
	if err := requireImageModules(with, "nvme_rdma", "nvmet_rdma"); err != nil {
		t.Fatalf("image with the modules refused: %v", err)
	}
	without := fakeImage(t, "kernel/drivers/nvme/host/nvme-rdma.ko")
	err := requireImageModules(without, "nvme_rdma", "nvmet_rdma")
	if err == nil || !strings.Contains(err.Error(), "nvmet_rdma") || strings.Contains(err.Error(), "nvme_rdma,") {
		t.Fatalf("image without nvmet-rdma: %v", err)
	}
}

// A pair command's temporary work directory goes when the run passes and
// stays, named on the log, when it fails; a --state directory always stays.
func TestPairWorkDirKeptOnlyForAFailure(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var log bytes.Buffer
	dir, done, err := pairWorkDir("", "fn-perftest-", false, &log)
	if err != nil {
		t.Fatal(err)
	}
	done(nil)
	if _, err := os.Stat(dir); !os.IsNotExist(err) || log.Len() != 0 {
		t.Fatalf("a passing run's directory: stat %v, log %q", err, log.String())
	}
	dir, done, err = pairWorkDir("", "fn-perftest-", false, &log)
	if err != nil {
		t.Fatal(err)
	}
	done(errors.New("ib_atomic_lat: client (A): no answer"))
	if _, err := os.Stat(dir); err != nil || !strings.Contains(log.String(), "perftest: the run failed: its work directory") ||
		!strings.Contains(log.String(), dir) {
		t.Fatalf("a failed run's directory: stat %v, log %q", err, log.String())
	}
	state := filepath.Join(t.TempDir(), "state")
	dir, done, err = pairWorkDir(state, "fn-perftest-", false, &log)
	if err != nil || dir != state {
		t.Fatalf("--state: %q %v", dir, err)
	}
	done(nil)
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("--state directory removed: %v", err)
	}
}
