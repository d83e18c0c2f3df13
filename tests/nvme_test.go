package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The NVMe-over-Falcon disk tests: a daemon exports file namespaces from
// one NIC and serves vhost-user-blk disks on them from another, carried
// over the Falcon transport; a guest booted with `vm run --disk` uses
// them as /dev/vda (read-write) and /dev/vdb (read-only).

const (
	nvmeRWSize = 192 << 20 // the read-write namespace: room for the fio runs and a file system
	nvmeROSize = 16 << 20  // the read-only namespace
)

// nvmeNamespace and nvmeDisk are device.NVMeSpec's JSON.
type nvmeNamespace struct {
	NIC      string `json:"nic"`
	NSID     uint16 `json:"nsid"`
	Backing  string `json:"backing"`
	Size     int64  `json:"size"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// Allow lists the initiators of another daemon that may use it.
	Allow []string `json:"allow,omitempty"`
}

type nvmeDisk struct {
	Name   string `json:"name"`
	Socket string `json:"socket"`
	NIC    string `json:"nic"`
	Target string `json:"target"`
	NSID   uint16 `json:"nsid"`
	Serial string `json:"serial"`
	Queues int    `json:"queues,omitempty"`
}

type nvmeDaemonConfig struct {
	daemonConfig
	NVMe struct {
		Namespaces []nvmeNamespace `json:"namespaces"`
		Disks      []nvmeDisk      `json:"disks"`
	} `json:"nvme"`
}

// nvmeRig is a daemon serving disk "rw" (socket rw.sock, namespace file
// rw.img, two virtqueues) and disk "ro" (ro.sock, read-only namespace ro.img, filled with
// random bytes whose SHA-256 is roSum), and a guest using both.
type nvmeRig struct {
	dir    string
	daemon *daemonProc
	guest  *vm
	roSum  string
}

func newNVMeRig(t *testing.T) *nvmeRig {
	t.Helper()
	guestImage(t)
	dir := stateDir(t)
	r := &nvmeRig{dir: dir}
	// The read-only namespace holds data the guest must read back.
	ro := make([]byte, nvmeROSize)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range ro {
		ro[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(dir, "ro.img"), ro, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(ro)
	r.roSum = hex.EncodeToString(sum[:])

	var cfg nvmeDaemonConfig
	cfg.Control = "control.sock"
	cfg.NICs = []nicSpec{
		{Name: "host", Socket: "host.sock", MAC: "52:54:00:0d:00:01"},
		{Name: "store", Socket: "store.sock", MAC: "52:54:00:0d:00:02"},
	}
	cfg.NVMe.Namespaces = []nvmeNamespace{
		{NIC: "store", NSID: 1, Backing: "rw.img", Size: nvmeRWSize},
		{NIC: "store", NSID: 2, Backing: "ro.img", Size: nvmeROSize, ReadOnly: true},
	}
	cfg.NVMe.Disks = []nvmeDisk{
		{Name: "rw", Socket: "rw.sock", NIC: "host", Target: "store", NSID: 1, Serial: "fn-rw", Queues: 2},
		{Name: "ro", Socket: "ro.sock", NIC: "host", Target: "store", NSID: 2, Serial: "fn-ro"},
	}
	r.daemon = startDaemonProc(t, dir, cfg, "host.sock", "store.sock", "rw.sock", "ro.sock")
	// rw has two virtqueues (the guest, with one CPU, may use one).
	r.guest = boot(t, dir, "nvme", "--disk", filepath.Join(dir, "rw.sock")+",queues=2", "--disk", filepath.Join(dir, "ro.sock"))
	// The disks are vda and vdb in --disk order, each with the daemon's
	// serial and the namespace's exact capacity.
	for dev, want := range map[string]string{"vda": "fn-rw " + strconv.Itoa(nvmeRWSize/512), "vdb": "fn-ro " + strconv.Itoa(nvmeROSize/512)} {
		got := strings.TrimSpace(r.guest.exec(t, "cat", "/sys/block/"+dev+"/serial")) + " " +
			strings.TrimSpace(r.guest.exec(t, "cat", "/sys/block/"+dev+"/size"))
		if got != want {
			t.Fatalf("guest %s: serial and 512-byte sectors %q, want %q", dev, got, want)
		}
	}
	return r
}

// startDaemonProc writes cfg (any JSON-able daemon config) and runs the
// daemon through daemonProc, waiting for sockets (relative to dir).
func startDaemonProc(t *testing.T, dir string, cfg any, sockets ...string) *daemonProc {
	t.Helper()
	falconnic(t)
	b, _ := json.MarshalIndent(cfg, "", "  ")
	d := &daemonProc{t: t, dir: dir, config: filepath.Join(dir, "daemon.json"),
		control: filepath.Join(dir, "control.sock"), out: &syncBuffer{}}
	if err := os.WriteFile(d.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range sockets {
		d.sockets = append(d.sockets, filepath.Join(dir, s))
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("daemon %s log (%d runs):\n%s", d.config, d.runs, d.out.String())
		}
	})
	d.start()
	return d
}

// fioVerify is the brief's fio run with verification; extra adds options.
func fioVerify(bs string, extra ...string) []string {
	return append([]string{"fio", "--name=v", "--filename=/dev/vda", "--rw=randwrite", "--bs=" + bs,
		"--iodepth=16", "--ioengine=libaio", "--direct=1", "--size=64M", "--verify=crc32c",
		"--do_verify=1", "--verify_fatal=1"}, extra...)
}

// The guest's errors for a write past the end of a disk and for a write
// to a read-only one (the kernel refuses both before the device sees
// them, or the device fails the request).
var (
	pastEndErr  = regexp.MustCompile(`(?i)no space left on device|input/output error`)
	readOnlyErr = regexp.MustCompile(`(?i)read-only file system|operation not permitted|permission denied|input/output error`)
)

var fioErrLine = regexp.MustCompile(`err=\s*(\d+)`)

// checkFio checks fio's report: one job, err=0, and verification on.
func checkFio(t *testing.T, what, out string) {
	t.Helper()
	m := fioErrLine.FindStringSubmatch(out)
	if m == nil || m[1] != "0" || !strings.Contains(out, "READ:") || !strings.Contains(out, "WRITE:") {
		t.Fatalf("%s: fio did not write, read back and verify cleanly:\n%s", what, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "IOPS=") {
			t.Logf("%s: %s", what, strings.TrimSpace(l))
		}
	}
}

func (r *nvmeRig) diskCounters(t *testing.T, disk string) map[string]uint64 {
	t.Helper()
	st, err := r.daemon.status()
	if err != nil {
		t.Fatalf("daemon status: %v", err)
	}
	if st.NVMe == nil {
		t.Fatal("daemon status has no nvme section")
	}
	for _, d := range st.NVMe.Disks {
		if d.Name == disk {
			return d.Counters
		}
	}
	t.Fatalf("daemon status has no disk %s", disk)
	return nil
}

// TestNVMeDiskCLIErrors: vm run refuses a --disk nobody serves, before
// booting anything, and says what to do.
func TestNVMeDiskCLIErrors(t *testing.T) {
	requireE2E(t)
	bin := falconnic(t)
	dir := stateDir(t)
	for _, c := range []struct{ arg, want string }{
		{filepath.Join(dir, "none.sock"), "is `falconnic serve` running"},
		{filepath.Join(dir, "x.sock") + ",queues=0", "bad queues"},
		{filepath.Join(dir, "x.sock") + ",color=red", "unknown option"},
	} {
		out, err := exec.Command(bin, "vm", "run", "--name", "nodisk", "--state", dir, "--disk", c.arg).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("vm run --disk %s: err %v, output %q; want an error saying %q", c.arg, err, out, c.want)
		}
	}
}

// TestNVMeDiskGuest: fio with verification at 4 KiB and 128 KiB, a file
// system, honest capacity, and a read-only export, all on one guest.
func TestNVMeDiskGuest(t *testing.T) {
	requireE2E(t)
	r := newNVMeRig(t)
	g := r.guest

	t.Run("fio 4k randwrite verify", func(t *testing.T) {
		checkFio(t, "fio 4k", g.exec(t, fioVerify("4k")...))
	})
	t.Run("fio 128k randwrite verify", func(t *testing.T) {
		checkFio(t, "fio 128k", g.exec(t, fioVerify("128k", "--offset=64M")...))
	})

	t.Run("ext4", func(t *testing.T) {
		out := g.exec(t, "sh", "-c", "mkfs.ext4 -F -q /dev/vda && mkdir -p /mnt/d && mount -t ext4 /dev/vda /mnt/d && "+
			"head -c 8388608 /dev/urandom > /mnt/d/f && shasum -a 256 /mnt/d/f && sync && umount /mnt/d && "+
			"echo 3 > /proc/sys/vm/drop_caches && mount -t ext4 /dev/vda /mnt/d && shasum -a 256 /mnt/d/f && ls -l /mnt/d/f && umount /mnt/d")
		sums := regexp.MustCompile(`(?m)^([0-9a-f]{64}) `).FindAllStringSubmatch(out, -1)
		if len(sums) != 2 || sums[0][1] != sums[1][1] || !strings.Contains(out, "8388608") {
			t.Fatalf("file written on ext4 did not read back the same after a remount:\n%s", out)
		}
		t.Logf("ext4 on /dev/vda: 8 MiB file, sha256 %s… before and after remount", sums[0][1][:16])
	})

	t.Run("capacity", func(t *testing.T) {
		last := nvmeRWSize/4096 - 1
		g.exec(t, "dd", "if=/dev/urandom", "of=/dev/vda", "bs=4096", "seek="+strconv.Itoa(last), "count=1", "conv=notrunc", "oflag=sync")
		out, err := g.tryExec(context.Background(), "dd", "if=/dev/urandom", "of=/dev/vda", "bs=4096", "seek="+strconv.Itoa(last+1), "count=1", "conv=notrunc", "oflag=sync")
		if err == nil || !pastEndErr.MatchString(out) {
			t.Fatalf("a write past the end of the %d-byte namespace: err %v, want ENOSPC or EIO:\n%s", nvmeRWSize, err, out)
		}
		t.Logf("write of the last block: ok; one block past the end: %s", pastEndErr.FindString(out))
	})

	t.Run("read-only export", func(t *testing.T) {
		if got := strings.TrimSpace(g.exec(t, "cat", "/sys/block/vdb/ro")); got != "1" {
			t.Errorf("guest sees the read-only export as ro=%s", got)
		}
		out, err := g.tryExec(context.Background(), "dd", "if=/dev/zero", "of=/dev/vdb", "bs=4096", "count=1", "conv=notrunc", "oflag=sync")
		if err == nil || !readOnlyErr.MatchString(out) {
			t.Fatalf("a write to the read-only export: err %v, want EROFS, EPERM, EACCES or EIO:\n%s", err, out)
		}
		t.Logf("write to the read-only export: %s", readOnlyErr.FindString(out))
		// The daemon keeps serving: the guest reads the whole namespace
		// and it is the file, untouched.
		sum := strings.Fields(g.exec(t, "shasum", "-a", "256", "/dev/vdb"))
		if len(sum) == 0 || sum[0] != r.roSum {
			t.Fatalf("guest read of the read-only export: %v, want sha256 %s", sum, r.roSum)
		}
		b, err := os.ReadFile(filepath.Join(r.dir, "ro.img"))
		if err != nil {
			t.Fatal(err)
		}
		if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != r.roSum {
			t.Fatal("the read-only namespace file changed")
		}
		g.exec(t, "fio", "--name=after", "--filename=/dev/vda", "--rw=randread", "--bs=4k", "--direct=1",
			"--ioengine=libaio", "--iodepth=8", "--size=8M", "--io_size=2M")
		c := r.diskCounters(t, "ro")
		if c["blk_writes"] != 0 {
			t.Errorf("read-only disk counted %d writes", c["blk_writes"])
		}
		t.Logf("ro disk counters: reads %d, io errors %d", c["blk_reads"], c["blk_io_errors"])
	})
}

// restartKilled SIGKILLs d, leaves QEMU an outage of two seconds (its
// reconnect=1 retries every second) and starts d again. The dead
// daemon's socket files are removed first, as the new daemon would do
// anyway: daemonProc.start tells new sockets from old ones by inode, and
// ext4 may hand a new socket the inode of the old one just removed.
func restartKilled(d *daemonProc) {
	d.t.Helper()
	d.kill()
	for _, s := range d.sockets {
		os.Remove(s)
	}
	time.Sleep(2 * time.Second)
	d.start()
}

// TestNVMeDiskDaemonRestart (full): the daemon (initiator and target)
// is SIGKILLed a thousand writes into a verifying fio run and started
// again on the same config and namespace files; QEMU reconnects, the new
// back-end resubmits what was in flight, and fio finishes and verifies.
func TestNVMeDiskDaemonRestart(t *testing.T) {
	requireE2E(t)
	if mode != "full" {
		t.Skip("daemon restart under fio: FALCONNIC_E2E=full")
	}
	r := newNVMeRig(t)
	w0 := r.diskCounters(t, "rw")["blk_writes"]
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := r.guest.tryExec(ctx, fioVerify("4k", "--size=32M")...)
		done <- result{out, err}
	}()
	for r.diskCounters(t, "rw")["blk_writes"] < w0+1000 {
		select {
		case res := <-done:
			t.Fatalf("fio ended before the restart: %v\n%s", res.err, res.out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	restartKilled(r.daemon)
	res := <-done
	if res.err != nil {
		t.Fatalf("fio across the daemon restart: %v\n%s", res.err, res.out)
	}
	checkFio(t, "fio 4k across a daemon restart", res.out)
	c := r.diskCounters(t, "rw")
	if r.daemon.runs != 2 || c["blk_writes"] == 0 {
		t.Fatalf("the restarted daemon (run %d) served %d writes: fio did not go on through it", r.daemon.runs, c["blk_writes"])
	}
	t.Logf("after the restart the new daemon served %d writes, %d reads", c["blk_writes"], c["blk_reads"])
}

// fabricImpaired is a fabric section with egress impairment.
type fabricImpaired struct {
	Listen         string   `json:"listen"`
	Peers          []string `json:"peers"`
	LossPercent    float64  `json:"loss_percent"`
	ReorderPercent float64  `json:"reorder_percent"`
	Seed           uint64   `json:"seed"`
	KeyFile        string   `json:"key_file,omitempty"`
}

type nvmeFabricConfig struct {
	Control string         `json:"control"`
	NICs    []nicSpec      `json:"nics"`
	Fabric  fabricImpaired `json:"fabric"`
	NVMe    struct {
		Namespaces []nvmeNamespace `json:"namespaces,omitempty"`
		Disks      []nvmeDisk      `json:"disks,omitempty"`
	} `json:"nvme"`
}

// TestNVMeDiskFabricImpaired (full): the namespace is exported by a NIC
// of a second daemon; both daemons drop 1 % of what they send on the
// fabric and reorder 1 %. fio verifies at 4 KiB and 128 KiB, then the
// initiator daemon is SIGKILLed mid-fio and restarted while the target
// daemon keeps running: the disk finds a new path and fio verifies.
func TestNVMeDiskFabricImpaired(t *testing.T) {
	requireE2E(t)
	if mode != "full" {
		t.Skip("impaired fabric between two daemons: FALCONNIC_E2E=full")
	}
	guestImage(t)
	dir := stateDir(t)
	for _, sub := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pa, pb := freeUDPPort(t), freeUDPPort(t)
	var store, host nvmeFabricConfig
	store.Control, host.Control = "control.sock", "control.sock"
	store.NICs = []nicSpec{{Name: "store", Socket: "store.sock", MAC: "52:54:00:0d:02:02"}}
	key := fabricKey(t, dir)
	store.Fabric = fabricImpaired{Listen: pb, Peers: []string{pa}, LossPercent: 1, ReorderPercent: 1, Seed: 2, KeyFile: key}
	store.NVMe.Namespaces = []nvmeNamespace{{NIC: "store", NSID: 1, Backing: "rw.img", Size: nvmeRWSize, Allow: []string{"52:54:00:0d:02:01"}}}
	host.NICs = []nicSpec{{Name: "host", Socket: "host.sock", MAC: "52:54:00:0d:02:01"}}
	host.Fabric = fabricImpaired{Listen: pa, Peers: []string{pb}, LossPercent: 1, ReorderPercent: 1, Seed: 1, KeyFile: key}
	host.NVMe.Disks = []nvmeDisk{{Name: "rw", Socket: "rw.sock", NIC: "host", Target: "52:54:00:0d:02:02", NSID: 1, Serial: "fn-remote"}}
	tgt := startDaemonProc(t, filepath.Join(dir, "b"), store, "store.sock")
	ini := startDaemonProc(t, filepath.Join(dir, "a"), host, "host.sock", "rw.sock")
	g := boot(t, dir, "nvme", "--disk", filepath.Join(dir, "a", "rw.sock"))
	if got := strings.TrimSpace(g.exec(t, "cat", "/sys/block/vda/size")); got != strconv.Itoa(nvmeRWSize/512) {
		t.Fatalf("remote disk has %s sectors, want %d", got, nvmeRWSize/512)
	}
	checkFio(t, "fio 4k, 1 % loss + reordering", g.exec(t, fioVerify("4k")...))
	checkFio(t, "fio 128k, 1 % loss + reordering", g.exec(t, fioVerify("128k", "--offset=64M")...))

	r := &nvmeRig{dir: dir, daemon: ini, guest: g}
	w0 := r.diskCounters(t, "rw")["blk_writes"]
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := g.tryExec(ctx, fioVerify("4k", "--size=32M", "--offset=128M")...)
		done <- result{out, err}
	}()
	for r.diskCounters(t, "rw")["blk_writes"] < w0+1000 {
		select {
		case res := <-done:
			t.Fatalf("fio ended before the restart: %v\n%s", res.err, res.out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	restartKilled(ini)
	res := <-done
	if res.err != nil {
		t.Fatalf("fio across the initiator daemon's restart: %v\n%s", res.err, res.out)
	}
	checkFio(t, "fio 4k across the initiator daemon's restart, impaired fabric", res.out)
	if c := r.diskCounters(t, "rw"); c["blk_writes"] == 0 {
		t.Fatal("the restarted initiator daemon served no writes")
	}
	// The fabric really was impaired: the target daemon (never
	// restarted) dropped and held back datagrams on purpose.
	st, err := tgt.status()
	if err != nil || st.Fabric == nil {
		t.Fatalf("target daemon status: %v", err)
	}
	drop, reorder := st.Fabric.Counters["tx_impair_drop"], st.Fabric.Counters["tx_impair_reorder"]
	if drop == 0 || reorder == 0 {
		t.Fatalf("target daemon's fabric impaired nothing: counters %v", st.Fabric.Counters)
	}
	t.Logf("target daemon's fabric: %d datagrams dropped, %d reordered on purpose", drop, reorder)
}
