package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"falconnic/qemu"
)

func init() {
	register("nvmf", "run fio on an NVMe-oF disk over RDMA (nvme-rdma → nvmet-rdma) between two VMs on falconnic NICs (falconnic nvmf -h)", runNVMf)
}

const nvmfUsage = `usage: falconnic nvmf [--daemons 1|2] [--loss PCT] [--keep] [--size MIB] [--state DIR] [--cache DIR]
                      [--restart-after DURATION] [-- FIO ARGS...]
Starts falconnic daemon(s) and two guests A and B with falconnic NICs, waits
until falcon0 is ACTIVE in both, makes B an NVMe-oF target (the kernel's
nvmet-rdma, set up through configfs) exporting a RAM-backed namespace on
B's falcon0 address, connects A to it with nvme discover and nvme connect
-t rdma, runs fio in A on the connected /dev/nvmeXnY (--filename is added)
and prints fio's output. Exits non-zero if any step fails or fio reports an
error. With --restart-after, every daemon is killed (SIGKILL) that long
into fio and started again on its config 2.5 s later: A's nvme-rdma must
recover (the controller reconnects after nvme-rdma's 10 s delay) and fio finish
without error. Without FIO ARGS, fio writes 4 KiB blocks at random at queue depth
16 and verifies them (crc32c). Examples:
  falconnic nvmf
  falconnic nvmf --daemons 2 --loss 1 -- --name=v --rw=randwrite --bs=4k --iodepth=16 --ioengine=libaio --direct=1 --size=32m --verify=crc32c
  falconnic nvmf -- --name=r --rw=randread --bs=4k --iodepth=32 --ioengine=libaio --direct=1 --runtime=10 --time_based`

// NVMe-oF names and address of the pair's target (B).
const (
	nvmfSubsysNQN = "nqn.2026-11.io.falconnic:nvmf-ram"
	// nvmfHostNQN is A's host NQN: the guest has no /etc/nvme/hostnqn.
	nvmfHostNQN = "nqn.2014-08.org.nvmexpress:uuid:66616c63-6f6e-6e69-6300-000000000001"
	nvmfPort    = "4420" // NVMe-oF's IANA port for RDMA and TCP
)

// nvmfDefaultFio is the job fio runs without FIO ARGS: the issue's
// verification job (4 KiB random writes at QD16, read back and checked).
var nvmfDefaultFio = []string{"--name=verify", "--rw=randwrite", "--bs=4k", "--iodepth=16",
	"--ioengine=libaio", "--direct=1", "--size=16m", "--verify=crc32c", "--do_verify=1"}

// Guest exec deadlines of the NVMe-oF steps (fio's own comes from its
// arguments or --timeout).
const (
	nvmfSetupLimit   = 2 * time.Minute // target configfs, one nvme-cli call
	nvmfDeviceLimit  = time.Minute     // the namespace's block device to appear
	nvmfConnectTries = 5               // nvme connect while the target port comes up
	// nvmfOutage is how long --restart-after keeps the daemons dead: over
	// QEMU's reconnect period (1 s), as after a real crash.
	nvmfOutage = 2500 * time.Millisecond
)

// nvmfTargetScript is the shell script that makes the guest an NVMe-oF
// target: a subsystem that any host may use, namespace 1 on a file of
// sizeMiB in the guest's RAM (the initramfs root; buffered I/O because it
// has no O_DIRECT), and an RDMA port on ip:nvmfPort linked to it. Every
// configfs attribute is written with echo -n: u-root's echo writes the
// newline with a write of its own, which configfs takes as a second,
// empty value and rejects.
func nvmfTargetScript(ip string, sizeMiB int) string {
	return fmt.Sprintf(`set -e
C=/sys/kernel/config
grep -q " $C configfs" /proc/mounts || mount -t configfs none $C
S=$C/nvmet/subsystems/%[1]s
mkdir $S
echo -n 1 > $S/attr_allow_any_host
dd if=/dev/zero of=/tmp/nvmf-ns1.img bs=1048576 count=%[2]d 2>/dev/null
mkdir $S/namespaces/1
echo -n /tmp/nvmf-ns1.img > $S/namespaces/1/device_path
echo -n 1 > $S/namespaces/1/buffered_io
echo -n 1 > $S/namespaces/1/enable
echo "target: subsystem %[1]s, namespace 1 (%[2]d MiB in RAM)"
`, nvmfSubsysNQN, sizeMiB) + nvmfPortScript(1, "rdma", ip, nvmfPort)
}

// nvmfPortScript adds target port id (trtype rdma or tcp on ip:port) and
// links the subsystem to it; it runs after nvmfTargetScript.
func nvmfPortScript(id int, trtype, ip, port string) string {
	return fmt.Sprintf(`set -e
C=/sys/kernel/config
P=$C/nvmet/ports/%[1]d
mkdir $P
echo -n %[2]s > $P/addr_trtype
echo -n ipv4 > $P/addr_adrfam
echo -n %[3]s > $P/addr_traddr
echo -n %[4]s > $P/addr_trsvcid
ln -s $C/nvmet/subsystems/%[5]s $P/subsystems/%[5]s
echo "target: port %[1]d %[2]s %[3]s:%[4]s"
`, id, trtype, ip, port, nvmfSubsysNQN)
}

// nvmfDeviceScript prints the block device of the connected subsystem's
// namespace once it appears (within about 30 s): the nvme disk whose
// controller or multipath head belongs to nvmfSubsysNQN.
const nvmfDeviceScript = `for i in $(seq 1 60); do
  for d in /sys/block/nvme*n*; do
    [ -e "$d/device/subsysnqn" ] || continue
    if [ "$(cat $d/device/subsysnqn)" = "` + nvmfSubsysNQN + `" ] && [ -b /dev/${d##*/} ]; then
      echo /dev/${d##*/}
      exit 0
    fi
  done
  sleep 0.5
done
echo "no block device for ` + nvmfSubsysNQN + ` after 30s" >&2
ls /sys/block >&2
exit 1
`

// fioErr matches fio's per-job error field when it is not zero.
var fioErr = regexp.MustCompile(`\berr=\s*([1-9][0-9]*)`)

// fioJobErrors is fio's output's failure, if any: a job's non-zero err=
// field, or no job summary at all.
func fioJobErrors(out string) error {
	if m := fioErr.FindStringSubmatch(out); m != nil {
		return fmt.Errorf("fio reports err=%s", m[1])
	}
	if !strings.Contains(out, "err=") {
		return errors.New("fio printed no job summary")
	}
	return nil
}

// nvmfFioArgv is the fio command line on dev: the user's arguments (or the
// default verification job) with --filename=dev last.
func nvmfFioArgv(args []string, dev string) []string {
	if len(args) == 0 {
		args = nvmfDefaultFio
	}
	argv := append([]string{"fio"}, args...)
	return append(argv, "--filename="+dev)
}

// requireImageModules fails unless the cache's current guest image loads
// every module in mods (names as qemu.ModuleName gives them): an image
// built from other sources would fail later, in the guest, less clearly.
func requireImageModules(cache string, mods ...string) error {
	im, err := qemu.LoadImage(cache)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, m := range im.Modules {
		have[qemu.ModuleName(m)] = true
	}
	var missing []string
	for _, m := range mods {
		if !have[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the guest image %s does not load %s: run `falconnic image build` from this version's sources",
			im.Dir, strings.Join(missing, ", "))
	}
	return nil
}

// guestStep runs argv in v within limit and returns its combined output;
// a failure carries the output.
func guestStep(ctx context.Context, v *qemu.VM, limit time.Duration, stderr io.Writer, argv ...string) (string, error) {
	var out strings.Builder
	err := execSpecIn(ctx, v, argv, execSpec{limit: limit, report: stderr}, &out, &out)
	if err != nil {
		return out.String(), fmt.Errorf("%w\n%s", err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// nvmfConnect discovers B's subsystem from A over transport trtype (rdma
// or tcp) on B's port, connects A to it and returns the namespace's block
// device in A. The connect is retried a few times: the first rdma_cm
// exchange may still find B's port coming up.
func nvmfConnect(ctx context.Context, p *rdmaPair, trtype, port string, stderr io.Writer) (string, error) {
	out, err := guestStep(ctx, p.a, nvmfSetupLimit, stderr,
		"nvme", "discover", "-t", trtype, "-a", p.bIP, "-s", port, "-q", nvmfHostNQN)
	if err != nil {
		return "", fmt.Errorf("nvme discover: %w", err)
	}
	if !strings.Contains(out, nvmfSubsysNQN) {
		return "", fmt.Errorf("nvme discover: %s not in the discovery log:\n%s", nvmfSubsysNQN, out)
	}
	fmt.Fprintf(stderr, "nvmf: discovery log of %s %s:%s lists %s\n", trtype, p.bIP, port, nvmfSubsysNQN)
	for try := 1; ; try++ {
		_, err = guestStep(ctx, p.a, nvmfSetupLimit, stderr,
			"nvme", "connect", "-t", trtype, "-a", p.bIP, "-s", port, "-n", nvmfSubsysNQN, "-q", nvmfHostNQN)
		if err == nil {
			break
		}
		if try == nvmfConnectTries || errors.Is(err, errStall) || ctx.Err() != nil {
			return "", fmt.Errorf("nvme connect -t %s: %w", trtype, err)
		}
		fmt.Fprintf(stderr, "nvmf: nvme connect failed (try %d), again: %v\n", try, err)
		time.Sleep(2 * time.Second)
	}
	dev, err := guestStep(ctx, p.a, nvmfDeviceLimit, stderr, "sh", "-c", nvmfDeviceScript)
	if err != nil {
		return "", fmt.Errorf("connected namespace: %w", err)
	}
	return strings.TrimSpace(dev), nil
}

// nvmfKernelLogs prints the end of both guests' kernel logs (all levels:
// the console shows warnings only) and falcon0's driver counters, to tell
// where a recovery stopped.
func nvmfKernelLogs(ctx context.Context, p *rdmaPair, stderr io.Writer) {
	for _, v := range []*qemu.VM{p.a, p.b} {
		out, err := guestStep(ctx, v, nvmfSetupLimit, io.Discard, "sh", "-c",
			"dmesg | tail -n 150; cat /sys/class/infiniband/falcon0/counters")
		fmt.Fprintf(stderr, "%s: --- %s kernel log (%v):\n%s\n", p.o.prefix(), v.Name, err, out)
	}
}

func runNVMf(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("nvmf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, nvmfUsage); fs.PrintDefaults() }
	daemons := fs.Int("daemons", 1, "1: both NICs on one daemon; 2: one daemon each, linked by the UDP fabric on loopback")
	loss := fs.Float64("loss", 0, "fabric loss in percent, each direction (needs --daemons 2)")
	keep := fs.Bool("keep", false, "keep the guests (A connected to B's namespace) and daemons running after fio, until interrupted")
	size := fs.Int("size", 64, "namespace size in MiB (a file in B's RAM)")
	state := fs.String("state", "", "work directory (default: a new temporary one, removed at the end unless --keep)")
	cache := fs.String("cache", qemu.DefaultCacheDir(), "guest image cache")
	timeout := fs.Duration("timeout", 0, "time limit for fio (default: its --runtime plus a minute, or 10m)")
	restartAfter := fs.Duration("restart-after", 0, "kill every daemon this long into fio and start it again (0: never)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	fioArgs := fs.Args()
	if len(fioArgs) > 0 && fioArgs[0] == "--" {
		fioArgs = fioArgs[1:]
	}
	if err := checkPairFabric(*daemons, *loss); err != nil {
		return err
	}
	if *restartAfter < 0 {
		return fmt.Errorf("%w: --restart-after must not be negative", errUsage)
	}
	if *size < 1 || *size > 512 {
		return fmt.Errorf("%w: --size must be 1 to 512 MiB (the namespace lives in B's 1 GiB of RAM)", errUsage)
	}
	if err := requireImageModules(*cache, "nvme_rdma", "nvmet_rdma"); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, done, err := pairWorkDir(*state, "fn-nvmf-", *keep, stderr)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	p, err := startPair(ctx, pairOptions{kind: pairFalcon, daemons: *daemons, loss: *loss, dir: dir, cache: *cache,
		bin: bin, log: stderr, tag: "nvmf"})
	if err != nil {
		return err
	}
	defer p.close()

	out, err := guestStep(ctx, p.b, nvmfSetupLimit, stderr, "sh", "-c", nvmfTargetScript(p.bIP, *size))
	if err != nil {
		return fmt.Errorf("target (B): %w", err)
	}
	fmt.Fprintf(stderr, "nvmf: %s", out)
	// nvme connect keeps its reconnect delay (10 s): Debian 12's nvme-cli
	// refuses any --reconnect-delay value ("Expected integer argument").
	dev, err := nvmfConnect(ctx, p, "rdma", nvmfPort, stderr)
	if err != nil {
		return fmt.Errorf("host (A): %w", err)
	}
	fmt.Fprintf(stderr, "nvmf: A connected over nvme-rdma: %s (%.1fs since start)\n", dev, time.Since(start).Seconds())

	argv := nvmfFioArgv(fioArgs, dev)
	fmt.Fprintf(stderr, "nvmf: A: %s\n", strings.Join(argv, " "))
	fioStart := time.Now()
	var fioOut strings.Builder
	fioDone := make(chan error, 1)
	go func() {
		fioDone <- execSpecIn(ctx, p.a, argv, execSpec{limit: *timeout, report: stderr}, io.MultiWriter(stdout, &fioOut), stderr)
	}()
	var ferr error
	if *restartAfter > 0 {
		select {
		case ferr = <-fioDone:
			return fmt.Errorf("fio ended %.1fs into the run, before the daemon restart at %v (a bigger --size?): %v",
				time.Since(fioStart).Seconds(), *restartAfter, ferr)
		case <-time.After(*restartAfter):
		}
		fmt.Fprintf(stderr, "nvmf: killing the daemon(s) %.1fs into fio\n", time.Since(fioStart).Seconds())
		if err := p.restartDaemons(nvmfOutage); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "nvmf: daemon(s) restarted %.1fs into fio\n", time.Since(fioStart).Seconds())
	}
	ferr = <-fioDone
	if ferr == nil {
		ferr = fioJobErrors(fioOut.String())
	}
	if ferr != nil {
		if *restartAfter > 0 {
			nvmfKernelLogs(ctx, p, stderr)
		}
		return fmt.Errorf("fio on %s: %w", dev, ferr)
	}
	fmt.Fprintf(stderr, "nvmf: fio done in %.1fs\n", time.Since(fioStart).Seconds())

	if *keep {
		fmt.Fprintf(stderr, "nvmf: keeping guests A (%s, %s connected) and B (%s, target) until interrupted: falconnic vm exec A --state %s -- CMD\n",
			pairIPA, dev, pairIPB, filepath.Join(dir, "vms"))
		<-ctx.Done()
		return nil
	}
	if _, err := guestStep(ctx, p.a, nvmfSetupLimit, stderr, "nvme", "disconnect", "-n", nvmfSubsysNQN); err != nil {
		return fmt.Errorf("host (A): nvme disconnect: %w", err)
	}
	fmt.Fprintf(stderr, "nvmf: disconnected; %.1fs in all\n", time.Since(start).Seconds())
	return nil
}
