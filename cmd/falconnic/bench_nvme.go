package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"falconnic/device"
	"falconnic/device/port"
	"falconnic/device/storage"
	"falconnic/qemu"
)

func init() {
	benchmarks["nvme"] = benchmark{"fio in a VM: NVMe-over-Falcon disk vs QEMU's own virtio-blk on the same file", benchNVMe}
}

// nvmeBenchTest is one fio workload of `bench nvme`.
type nvmeBenchTest struct {
	Name    string // JSON name
	RW      string // fio --rw
	BS      string // fio --bs
	IODepth int
	Metric  string // "iops" or "MiB/s"
}

// nvmeBenchTests are the four workloads the bench compares.
var nvmeBenchTests = []nvmeBenchTest{
	{"randread_4k_qd32", "randread", "4k", 32, "iops"},
	{"randwrite_4k_qd32", "randwrite", "4k", 32, "iops"},
	{"read_128k", "read", "128k", 32, "MiB/s"},
	{"write_128k", "write", "128k", 32, "MiB/s"},
}

// nvmeBenchGoal is the ratio to local the disk should reach on every test.
const nvmeBenchGoal = 0.8

// nvmeBenchResult is one test's outcome: medians over the samples.
type nvmeBenchResult struct {
	Name   string  `json:"name"`
	Metric string  `json:"metric"`
	NVMe   float64 `json:"nvme"`
	Local  float64 `json:"local"`
	Ratio  float64 `json:"ratio"`
	// PairedRatio is the median of the samples' own ratios (each pair
	// measured back to back), less moved by the host's speed drifting
	// between samples; the goal is judged on Ratio.
	PairedRatio  float64   `json:"paired_ratio"`
	NVMeSamples  []float64 `json:"nvme_samples"`
	LocalSamples []float64 `json:"local_samples"`
	// CPU is what each side's processes spent on the work, medians over
	// the samples: steadier than the throughput on a shared host, it
	// shows which side a change moved and what holds the figure.
	CPU nvmeBenchCPU `json:"cpu"`
}

// nvmeBenchCPU is CPU time per unit of work (Unit: ms per MiB for the
// bandwidth tests, µs per IO for the IOPS tests) over a whole fio run
// (ramp included, divided by the run's measured rate times its length),
// and the cores each side kept busy. The daemon runs in this process (its
// figure includes the bench's own, idle, goroutines); QEMU is the VM's
// whole process (vCPU, main loop, the local disk's AIO).
type nvmeBenchCPU struct {
	Unit       string  `json:"unit"`
	NVMeDaemon float64 `json:"nvme_daemon"`
	NVMeQEMU   float64 `json:"nvme_qemu"`
	LocalQEMU  float64 `json:"local_qemu"`
	NVMeCores  float64 `json:"nvme_cores"`  // daemon + QEMU, during the NVMe runs
	LocalCores float64 `json:"local_cores"` // QEMU during the local runs
	// NVMeDaemonSwitches is the daemon's context switches (its threads
	// sleeping, or preempted) per unit of work: on a virtual host each
	// costs microseconds, often more than the work it wakes for.
	NVMeDaemonSwitches float64 `json:"nvme_daemon_switches"`
	// NVMeGuestIRQs and LocalGuestIRQs are the interrupts the guest took
	// from each disk's request queues per unit of work (its
	// /proc/interrupts): under TCG each one costs the guest's only vCPU,
	// so a disk that interrupts more per IO leaves fio less of it.
	NVMeGuestIRQs                       float64 `json:"nvme_guest_irqs"`
	LocalGuestIRQs                      float64 `json:"local_guest_irqs"`
	nvmeD, nvmeQ, localQ, nvmeC, localC []float64
	nvmeS, nvmeI, localI                []float64
}

// add records one fio run's CPU: the daemon's and QEMU's seconds over a
// run of wall seconds that moved data at rate v per second for busy
// seconds (fio's ramp and run time).
func (c *nvmeBenchCPU) add(nvme bool, daemon, qemuCPU, switches, irqs, wall, busy, v float64, perMiB bool) {
	if wall <= 0 || busy <= 0 || v <= 0 {
		return
	}
	scale := 1e3 // ms per MiB
	if !perMiB {
		scale = 1e6 // µs per IO
	}
	work := v * busy
	if nvme {
		c.nvmeD = append(c.nvmeD, daemon/work*scale)
		c.nvmeQ = append(c.nvmeQ, qemuCPU/work*scale)
		c.nvmeC = append(c.nvmeC, (daemon+qemuCPU)/wall)
		c.nvmeS = append(c.nvmeS, switches/work)
		c.nvmeI = append(c.nvmeI, irqs/work)
	} else {
		c.localQ = append(c.localQ, qemuCPU/work*scale)
		c.localC = append(c.localC, qemuCPU/wall)
		c.localI = append(c.localI, irqs/work)
	}
}

// summarize fills the medians.
func (c *nvmeBenchCPU) summarize(perMiB bool) {
	c.Unit = "cpu ms per MiB"
	if !perMiB {
		c.Unit = "cpu µs per IO"
	}
	c.NVMeDaemon, c.NVMeQEMU, c.LocalQEMU = fioMedian(c.nvmeD), fioMedian(c.nvmeQ), fioMedian(c.localQ)
	c.NVMeCores, c.LocalCores = fioMedian(c.nvmeC), fioMedian(c.localC)
	c.NVMeDaemonSwitches = fioMedian(c.nvmeS)
	c.NVMeGuestIRQs, c.LocalGuestIRQs = fioMedian(c.nvmeI), fioMedian(c.localI)
	for _, p := range []*float64{&c.NVMeDaemon, &c.NVMeQEMU, &c.LocalQEMU, &c.NVMeCores, &c.LocalCores, &c.NVMeDaemonSwitches, &c.NVMeGuestIRQs, &c.LocalGuestIRQs} {
		*p = fioRound(*p)
	}
}

type nvmeBenchReport struct {
	Command string            `json:"command"`
	Setup   map[string]string `json:"setup"`
	Tests   []nvmeBenchResult `json:"tests"`
	Goal    float64           `json:"goal_ratio"`
	Met     bool              `json:"goal_met"`
}

func benchNVMe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench nvme", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cache := fs.String("cache", qemu.DefaultCacheDir(), "guest image cache")
	sizeMiB := fs.Int("size", 256, "namespace (and fio region) size in MiB")
	runFor := fs.Duration("runtime", 10*time.Second, "fio run time per test and disk")
	samples := fs.Int("samples", 3, "samples per test and disk (medians are reported)")
	queues := fs.Int("queues", 1, "virtqueues of the NVMe-over-Falcon disk")
	cpus := fs.Int("cpus", qemu.DefaultCPUs, "guest CPUs")
	blockSize := fs.Int("block-size", 512, "namespace block size")
	cores := fs.Int("cores", 1, "goroutines running the two NICs' Falcon ports (the daemon's nvme.cores; 2: one per NIC)")
	nsDirect := fs.Bool("direct", true, "open the namespace's file with O_DIRECT, as QEMU's cache=none opens the local disk's (false: through the host's page cache)")
	procs := fs.Int("procs", 1, "GOMAXPROCS of this process, which runs the daemon: 1 leaves the other core of a 2-core host to the guest's vCPU; 0 keeps Go's default (every CPU)")
	aio := fs.String("aio", storage.AIOUring, "how the namespace's file IO reaches the host kernel: io_uring or threads (the namespace's aio)")
	memoryNS := fs.Bool("memory-namespace", false, "diagnosis: back the NVMe namespace with memory instead of the file (the local disk keeps the file), to take the target's file I/O out of the NVMe side")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (the daemon's data path) to `FILE`")
	only := fs.String("tests", "", "run only these tests (comma-separated names, e.g. write_128k); default all")
	intx := fs.String("intx", "none", "disks without MSI-X, on the PCI pin's level interrupt: none, local (QEMU's virtio-blk) or all")
	watchdog := fs.String("watchdog", "act", "diagnosis: the disk's ring watchdog cures lost notifications (act) or only counts and logs them (observe), so that a stall stays for its stall report")
	fw := fs.String("firmware", "swift", "congestion control of both NICs: swift (the daemon's default) or fixed")
	daemons := fs.Int("daemons", 1, "1: one daemon with the initiator and target NICs; 2: one daemon each (both in this process), joined by the UDP fabric on loopback")
	insecure := fs.Bool("insecure", false, "with --daemons 2: the fabric in plaintext (default: PSP-sealed), to measure what sealing costs")
	statusFile := fs.String("status", "", "diagnosis: write the daemon's status (NICs' Falcon ports, NVMe engines and namespaces) as JSON to `FILE` at the end")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	tests, err := pickNVMeTests(*only)
	if err != nil {
		return err
	}
	if *sizeMiB < 16 || *runFor < time.Second || *samples < 1 || *queues < 1 || *queues > qemu.MaxDiskQueues || *cores < 1 || *cores > 2 || *procs < 0 ||
		(*aio != storage.AIOUring && *aio != storage.AIOThreads) || (*watchdog != "act" && *watchdog != "observe") {
		return fmt.Errorf("%w: size ≥ 16 MiB, runtime ≥ 1s, samples ≥ 1, queues 1..%d, cores 1..2, procs ≥ 0, aio io_uring or threads, watchdog act or observe", errUsage, qemu.MaxDiskQueues)
	}
	if *daemons != 1 && *daemons != 2 || *insecure && *daemons != 2 {
		return fmt.Errorf("%w: --daemons must be 1 or 2; --insecure needs --daemons 2", errUsage)
	}
	if *procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*procs))
	}
	im, err := qemu.LoadImage(*cache)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fnb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	size := int64(*sizeMiB) << 20
	nsFile := filepath.Join(dir, "ns.img")
	if err := fillFile(nsFile, size); err != nil {
		return err
	}

	// The daemon runs in this process: an initiator NIC serving the disk
	// and a target NIC exporting the file, as in a one-daemon config.
	backing := nsFile
	if *memoryNS {
		backing = storage.NamespaceMemory
	}
	if *fw != port.FirmwareSwift && *fw != port.FirmwareFixed {
		return fmt.Errorf("%w: --firmware %q: want swift or fixed", errUsage, *fw)
	}
	if *daemons == 2 && *fw != port.FirmwareSwift {
		return fmt.Errorf("%w: --firmware %s needs --daemons 1", errUsage, *fw)
	}
	cfgJSONs := []string{fmt.Sprintf(`{"control": "c.sock",
	  "nics": [{"name": "ini", "socket": "ini.sock", "mac": "52:54:00:fb:00:01", "firmware": {"name": %q}},
	           {"name": "tgt", "socket": "tgt.sock", "mac": "52:54:00:fb:00:02", "firmware": {"name": %q}}],
	  "nvme": {"namespaces": [{"nic": "tgt", "nsid": 1, "backing": %q, "size": %d, "block_size": %d, "direct": %t, "aio": %q}],
	           "disks": [{"name": "d0", "socket": "d0.sock", "nic": "ini", "target": "tgt", "nsid": 1,
	                      "serial": "fn-bench", "queues": %d}],
	           "cores": %d}}`, *fw, *fw, backing, size, *blockSize, *nsDirect, *aio, *queues, *cores)}
	if *daemons == 2 {
		if cfgJSONs, err = nvmeBenchTwoDaemons(dir, backing, size, *blockSize, *nsDirect, *aio, *queues, *insecure); err != nil {
			return err
		}
	}
	// The target's daemon first (the last config): the disk identifies
	// its namespace when it starts.
	var ds []*device.Daemon
	for i := len(cfgJSONs) - 1; i >= 0; i-- {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		cfgPath := filepath.Join(sub, "daemon.json")
		if err := os.WriteFile(cfgPath, []byte(cfgJSONs[i]), 0o644); err != nil {
			return err
		}
		cfg, err := device.LoadConfig(cfgPath)
		if err != nil {
			return err
		}
		dd, err := device.NewDaemon(cfg, device.DaemonOptions{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
			RingWatchdogObserve: *watchdog == "observe"})
		if err != nil {
			return err
		}
		dctx, stopDaemon := context.WithCancel(ctx)
		daemonDone := make(chan error, 1)
		go func() { daemonDone <- dd.Run(dctx) }()
		defer func() { stopDaemon(); <-daemonDone }()
		ds = append([]*device.Daemon{dd}, ds...)
	}
	d := daemonSet(ds)
	sock := filepath.Join(dir, "d0", "d0.sock")
	for i := 0; !isUnixSocket(sock); i++ {
		if i == 100 {
			return errors.New("the daemon's disk socket did not appear")
		}
		time.Sleep(50 * time.Millisecond)
	}

	m := qemu.Machine{Name: "nvmebench", Kernel: im.KernelPath(), Initrd: im.InitrdPath(), CPUs: *cpus,
		Disks: []qemu.Disk{{VhostUserBlk: sock, Queues: *queues}, {File: nsFile, Serial: "fn-local"}}}
	if err := intxDisks(*intx, m.Disks); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	vm, err := qemu.Start(filepath.Join(dir, "vm"), m)
	if err != nil {
		return err
	}
	defer vm.Stop()
	fmt.Fprintf(stderr, "bench nvme: booting (console: %s)\n", vm.ConsoleLog())
	if err := vm.WaitReady(ctx, 5*time.Minute); err != nil {
		return err
	}
	// A stalled exec reports the daemon's side too: the disks' rings and
	// every NVMe counter.
	daemonDiag := func() string {
		b, err := json.MarshalIndent(d.Status(), "", "  ")
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	run := func(argv ...string) (string, error) {
		var out, errOut bytes.Buffer
		if err := execSpecIn(ctx, vm, argv, execSpec{diag: daemonDiag, report: stderr}, &out, &errOut); err != nil {
			return "", fmt.Errorf("%s: %w\n%s%s", strings.Join(argv, " "), err, out.String(), errOut.String())
		}
		return out.String(), nil
	}
	nvmeDev, localDev, err := guestDisks(ctx, vm, "fn-bench", "fn-local")
	if err != nil {
		return err
	}
	virtio := map[string]string{} // each disk's virtio device, whose interrupts are counted
	for _, dev := range []string{nvmeDev, localDev} {
		if virtio[dev], err = guestVirtioName(ctx, vm, dev); err != nil {
			return err
		}
	}

	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	results := make([]nvmeBenchResult, len(tests))
	for s := 0; s < *samples; s++ {
		for i, tc := range tests {
			// Alternate which disk goes first, so that drift in the
			// host's load falls on both alike.
			order := []string{nvmeDev, localDev}
			if (s+i)%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, dev := range order {
				irq0, err := guestQueueIRQs(ctx, vm, virtio[dev])
				if err != nil {
					return err
				}
				cpu0, sw0, qemu0, t0 := vmnetSelfCPU(), selfSwitches(), vmnetQEMUCPU(vm), time.Now()
				out, err := run("fio", "--name="+tc.Name, "--filename="+dev, "--direct=1", "--ioengine=libaio",
					"--rw="+tc.RW, "--bs="+tc.BS, "--iodepth="+strconv.Itoa(tc.IODepth),
					"--size="+strconv.Itoa(*sizeMiB)+"M", "--runtime="+strconv.Itoa(int(runFor.Seconds())),
					"--time_based", "--ramp_time=1", "--output-format=json")
				if err != nil {
					return err
				}
				v, err := fioResult(out, tc)
				if err != nil {
					return fmt.Errorf("%s on %s: %w", tc.Name, dev, err)
				}
				fmt.Fprintf(stderr, "bench nvme: sample %d %-18s %-9s %10.1f %s\n", s+1, tc.Name, dev, v, tc.Metric)
				r := &results[i]
				// The rate holds over the ramp too; fio's start and exit
				// are a small part of the wall time.
				busy := (*runFor + time.Second).Seconds()
				cpu, qemuCPU, switches, wall := vmnetSelfCPU()-cpu0, vmnetQEMUCPU(vm)-qemu0, selfSwitches()-sw0, time.Since(t0).Seconds()
				irq1, err := guestQueueIRQs(ctx, vm, virtio[dev])
				if err != nil {
					return err
				}
				r.CPU.add(dev == nvmeDev, cpu, qemuCPU, switches, float64(irq1-irq0), wall, busy, v, tc.Metric == "MiB/s")
				if dev == nvmeDev {
					r.NVMeSamples = append(r.NVMeSamples, v)
				} else {
					r.LocalSamples = append(r.LocalSamples, v)
				}
			}
		}
	}
	rep := nvmeBenchReport{
		Command: "falconnic bench nvme " + strings.Join(args, " "),
		Setup: map[string]string{
			"nvme":     "vhost-user-blk (falconnic daemon, in-process) → NVMe-over-Falcon → " + nsKind(*memoryNS, *nsDirect) + " namespace",
			"daemons":  nvmeBenchDaemons(*daemons, *insecure),
			"local":    "QEMU virtio-blk-pci, -drive format=raw,cache=none,aio=native, same file",
			"size":     strconv.Itoa(*sizeMiB) + " MiB",
			"runtime":  runFor.String() + " per sample (+1 s ramp)",
			"samples":  strconv.Itoa(*samples),
			"queues":   strconv.Itoa(*queues),
			"cores":    strconv.Itoa(*cores) + " goroutine(s) for the NICs' Falcon ports",
			"aio":      *aio,
			"watchdog": *watchdog,
			"intx":     intxSetup(*intx),
			"firmware": *fw,
			"procs":    strconv.Itoa(runtime.GOMAXPROCS(0)) + " (GOMAXPROCS of the daemon's process)",
			"guest":    fmt.Sprintf("TCG, %d CPU, %d MiB", max(*cpus, 1), qemu.DefaultMemMiB),
		},
		Goal: nvmeBenchGoal, Met: true,
	}
	for i, tc := range tests {
		r := &results[i]
		r.Name, r.Metric = tc.Name, tc.Metric
		r.NVMe, r.Local = fioMedian(r.NVMeSamples), fioMedian(r.LocalSamples)
		if r.Local > 0 {
			r.Ratio = fioRound(r.NVMe / r.Local)
		}
		r.PairedRatio = pairedRatio(r.NVMeSamples, r.LocalSamples)
		r.CPU.summarize(tc.Metric == "MiB/s")
		if r.Ratio < nvmeBenchGoal {
			rep.Met = false
		}
	}
	rep.Tests = results
	if *statusFile != "" {
		b, err := json.MarshalIndent(d.Status(), "", "  ")
		if err == nil {
			err = os.WriteFile(*statusFile, b, 0o644)
		}
		if err != nil {
			return err
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// guestDisks finds the guest's two disks (vda, vdb) by serial: the NVMe
// disk's and the local one's device paths.
func guestDisks(ctx context.Context, vm *qemu.VM, nvmeSerial, localSerial string) (nvmeDev, localDev string, err error) {
	devs := map[string]string{}
	for _, dev := range []string{"vda", "vdb"} {
		var out bytes.Buffer
		if err := execIn(ctx, vm, "", []string{"cat", "/sys/block/" + dev + "/serial"}, nil, &out, &out); err != nil {
			return "", "", err
		}
		devs[strings.TrimSpace(out.String())] = "/dev/" + dev
	}
	nvmeDev, localDev = devs[nvmeSerial], devs[localSerial]
	if nvmeDev == "" || localDev == "" {
		return "", "", fmt.Errorf("guest disks by serial: %v (want %s and %s)", devs, nvmeSerial, localSerial)
	}
	return nvmeDev, localDev, nil
}

// guestVirtioName returns the virtio device ("virtio1") behind the guest
// disk dev (/dev/vdX).
func guestVirtioName(ctx context.Context, vm *qemu.VM, dev string) (string, error) {
	var link bytes.Buffer
	sys := "/sys/block/" + strings.TrimPrefix(dev, "/dev/") + "/device"
	if err := execIn(ctx, vm, "", []string{"readlink", sys}, nil, &link, &link); err != nil {
		return "", fmt.Errorf("readlink %s: %w", sys, err)
	}
	return filepath.Base(strings.TrimSpace(link.String())), nil
}

// guestQueueIRQs reads the interrupts the guest has taken from the
// virtio device name's request queues so far, all CPUs.
func guestQueueIRQs(ctx context.Context, vm *qemu.VM, name string) (uint64, error) {
	var irqs bytes.Buffer
	if err := execIn(ctx, vm, "", []string{"cat", "/proc/interrupts"}, nil, &irqs, &irqs); err != nil {
		return 0, fmt.Errorf("guest /proc/interrupts: %w", err)
	}
	return queueIRQs(irqs.String(), name), nil
}

// queueIRQs sums, over every CPU, the interrupts of the virtio device
// name's queue vectors ("virtio1-req.0", "virtio1-virtqueues"; not its
// "-config" vector) in /proc/interrupts text.
func queueIRQs(procInterrupts, name string) uint64 {
	var sum uint64
	for _, line := range strings.Split(procInterrupts, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		last := f[len(f)-1]
		if !strings.HasPrefix(last, name+"-") || last == name+"-config" {
			continue
		}
		for _, v := range f[1:] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				break // the per-CPU counts end where the chip's name begins
			}
			sum += n
		}
	}
	return sum
}

// nsKind names the bench's namespace backing for its report.
func nsKind(memory, direct bool) string {
	switch {
	case memory:
		return "memory"
	case direct:
		return "file (O_DIRECT)"
	}
	return "file (page cache)"
}

// pickNVMeTests returns the tests named in a comma-separated list (all
// for "").
func pickNVMeTests(list string) ([]nvmeBenchTest, error) {
	if list == "" {
		return nvmeBenchTests, nil
	}
	var out []nvmeBenchTest
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(nvmeBenchTests, func(t nvmeBenchTest) bool { return t.Name == name || strings.HasPrefix(t.Name, name+"_") })
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown test %q", errUsage, name)
		}
		out = append(out, nvmeBenchTests[i])
	}
	return out, nil
}

// fioResult reads IOPS or MiB/s of tc's direction from fio's JSON output.
func fioResult(out string, tc nvmeBenchTest) (float64, error) {
	i := strings.IndexByte(out, '{')
	if i < 0 {
		return 0, fmt.Errorf("no JSON in fio output: %q", out)
	}
	var res struct {
		Jobs []struct {
			Error int      `json:"error"`
			Read  fioStats `json:"read"`
			Write fioStats `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out[i:]), &res); err != nil {
		return 0, fmt.Errorf("fio JSON: %w", err)
	}
	if len(res.Jobs) != 1 || res.Jobs[0].Error != 0 {
		return 0, fmt.Errorf("fio: %d jobs, error %v", len(res.Jobs), res.Jobs)
	}
	st := res.Jobs[0].Read
	if strings.Contains(tc.RW, "write") {
		st = res.Jobs[0].Write
	}
	if st.IOs == 0 {
		return 0, errors.New("fio did no I/O")
	}
	// Figures come from the guest: refuse what no disk can do.
	if !(st.IOPS >= 0 && st.IOPS < 1e9) || st.BW > 1<<40 {
		return 0, fmt.Errorf("fio figures out of range: %+v", st)
	}
	if tc.Metric == "iops" {
		return fioRound(st.IOPS), nil
	}
	return fioRound(float64(st.BW) / 1024), nil // fio's bw is KiB/s
}

type fioStats struct {
	IOs  uint64  `json:"total_ios"`
	IOPS float64 `json:"iops"`
	BW   uint64  `json:"bw"`
}

// fillFile writes size bytes of pseudo-random data to path, so that reads
// hit allocated, written blocks on both disks.
func fillFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		for j := 0; j+8 <= len(buf); j += 8 {
			v := r.Uint64()
			for k := 0; k < 8; k++ {
				buf[j+k] = byte(v >> (8 * k))
			}
		}
		n := min(int64(len(buf)), size-off)
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func isUnixSocket(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

func fioMedian(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return fioRound((s[len(s)/2-1] + s[len(s)/2]) / 2)
}

// pairedRatio is the median of nvme[i]/local[i] over the pairs with a
// local figure.
func pairedRatio(nvme, local []float64) float64 {
	var r []float64
	for i := range min(len(nvme), len(local)) {
		if local[i] > 0 {
			r = append(r, nvme[i]/local[i])
		}
	}
	return fioRound(fioMedian(r))
}

func fioRound(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
