package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"falconnic/qemu"
)

func init() {
	benchmarks["nvmf"] = benchmark{"fio between two TCG guests: NVMe-oF over RDMA on falcon0 (nvme-rdma) vs over TCP on the NICs' Ethernet function (nvme-tcp)", benchNVMf}
}

// nvmfBenchTests are the workloads `bench nvmf` runs on each transport,
// with the ratio rdma/tcp each should reach.
var nvmfBenchTests = []struct {
	nvmeBenchTest
	goal float64
}{
	{nvmeBenchTest{"randread_4k_qd32", "randread", "4k", 32, "iops"}, 1.5},
	{nvmeBenchTest{"read_128k_qd32", "read", "128k", 32, "MiB/s"}, 1.0},
}

// nvmfTCPPort is the target's TCP port (its RDMA port is nvmfPort).
const nvmfTCPPort = "4421"

// nvmfBenchResult is one workload: medians over the samples of each
// transport, and the guests' CPU time per I/O.
type nvmfBenchResult struct {
	Name       string    `json:"name"`
	Metric     string    `json:"metric"`
	RDMA       float64   `json:"rdma"`
	TCP        float64   `json:"tcp"`
	Ratio      float64   `json:"ratio"`
	Goal       float64   `json:"goal_ratio"`
	Met        bool      `json:"goal_met"`
	RDMASample []float64 `json:"rdma_samples"`
	TCPSample  []float64 `json:"tcp_samples"`
	// CPU per I/O in microseconds (median over the samples): all of the
	// host guest's (A) and the target guest's (B) busy time during the run
	// over the I/Os done, softirq and the kernel's RDMA and TCP stacks
	// included.
	HostCPUusRDMA   float64 `json:"host_cpu_us_per_io_rdma"`
	HostCPUusTCP    float64 `json:"host_cpu_us_per_io_tcp"`
	TargetCPUusRDMA float64 `json:"target_cpu_us_per_io_rdma"`
	TargetCPUusTCP  float64 `json:"target_cpu_us_per_io_tcp"`
	// RDMAFramesPerIO is the NICs' control-channel traffic per I/O over
	// nvme-rdma (medians; both guests' drivers): frames from the drivers,
	// the DB_SQ doorbells among them, and events to the drivers (CQ
	// notifications): what each I/O costs the guests' virtio-net.
	RDMAFramesPerIO *nvmfFrames `json:"rdma_nic_frames_per_io,omitempty"`

	samples map[string]*nvmfSamples
}

type nvmfFrames struct {
	FromDrivers float64 `json:"from_drivers"`
	Doorbells   float64 `json:"doorbells"`
	ToDrivers   float64 `json:"events_to_drivers"`
}

type nvmfSamples struct {
	value, hostCPU, targetCPU []float64
	ctl, doorbells, events    []float64 // per I/O (rdma)
}

type nvmfBenchReport struct {
	Command string            `json:"command"`
	Setup   map[string]string `json:"setup"`
	Tests   []nvmfBenchResult `json:"tests"`
	Met     bool              `json:"goals_met"`
}

// guestBusy reads the guest's busy CPU time in seconds from /proc/stat
// (every state but idle and iowait, at USER_HZ 100).
func guestBusy(ctx context.Context, v *qemu.VM, stderr io.Writer) (float64, error) {
	out, err := guestStep(ctx, v, time.Minute, stderr, "head", "-n", "1", "/proc/stat")
	if err != nil {
		return 0, err
	}
	return procStatBusy(out)
}

// procStatBusy is the busy time in seconds of /proc/stat's "cpu" line.
func procStatBusy(line string) (float64, error) {
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected %q", line)
	}
	var busy uint64
	for i, s := range f[1:] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest, guest_nice are already in user, nice
			break
		}
		busy += n
	}
	return float64(busy) / 100, nil
}

// fioIOs is the number of I/Os of fio's JSON output's one job.
func fioIOs(out string) uint64 {
	i := strings.IndexByte(out, '{')
	if i < 0 {
		return 0
	}
	var res struct {
		Jobs []struct {
			Read  fioStats `json:"read"`
			Write fioStats `json:"write"`
		} `json:"jobs"`
	}
	if json.Unmarshal([]byte(out[i:]), &res) != nil || len(res.Jobs) != 1 {
		return 0
	}
	return res.Jobs[0].Read.IOs + res.Jobs[0].Write.IOs
}

func benchNVMf(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench nvmf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cache := fs.String("cache", qemu.DefaultCacheDir(), "guest image cache")
	sizeMiB := fs.Int("size", 128, "namespace size in MiB (a file in B's RAM) and fio's region")
	runFor := fs.Duration("runtime", 10*time.Second, "fio run time per test and transport")
	samples := fs.Int("samples", 2, "samples per test and transport, the transports alternating (medians are reported)")
	polling := fs.String("doorbell-polling", "off", "the NICs' doorbell polling: off (the daemon's default) or on")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *sizeMiB < 16 || *sizeMiB > 512 || *runFor < time.Second || *samples < 1 || *polling != "on" && *polling != "off" {
		return fmt.Errorf("%w: size 16..512 MiB, runtime ≥ 1s, samples ≥ 1, --doorbell-polling on|off", errUsage)
	}
	if err := requireImageModules(*cache, "nvme_rdma", "nvmet_rdma", "nvme_tcp", "nvmet_tcp"); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fnb-nvmf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := startPair(ctx, pairOptions{kind: pairFalcon, daemons: 1, doorbellPolling: *polling == "on", dir: dir, cache: *cache, bin: bin,
		log: stderr, tag: "bench nvmf"})
	if err != nil {
		return err
	}
	defer p.close()
	script := nvmfTargetScript(p.bIP, *sizeMiB) + nvmfPortScript(2, "tcp", p.bIP, nvmfTCPPort)
	out, err := guestStep(ctx, p.b, nvmfSetupLimit, stderr, "sh", "-c", script)
	if err != nil {
		return fmt.Errorf("target (B): %w", err)
	}
	fmt.Fprint(stderr, out)

	results := make([]nvmfBenchResult, len(nvmfBenchTests))
	for i, tc := range nvmfBenchTests {
		results[i] = nvmfBenchResult{Name: tc.Name, Metric: tc.Metric, Goal: tc.goal,
			samples: map[string]*nvmfSamples{"rdma": {}, "tcp": {}}}
	}
	transports := []struct{ trtype, port string }{{"rdma", nvmfPort}, {"tcp", nvmfTCPPort}}
	for s := range *samples {
		for k := range transports {
			// Alternate which transport goes first, so that a drift of the
			// host's speed does not favour one.
			tr := transports[(k+s)%2]
			dev, err := nvmfConnect(ctx, p, tr.trtype, tr.port, stderr)
			if err != nil {
				return fmt.Errorf("host (A): %w", err)
			}
			for i, tc := range nvmfBenchTests {
				argv := []string{"fio", "--name=" + tc.Name, "--filename=" + dev, "--rw=" + tc.RW, "--bs=" + tc.BS,
					fmt.Sprintf("--iodepth=%d", tc.IODepth), "--ioengine=libaio", "--direct=1",
					fmt.Sprintf("--size=%dm", *sizeMiB), fmt.Sprintf("--runtime=%d", int(runFor.Seconds())),
					"--time_based", "--output-format=json"}
				n0 := p.nicCounters(ctx, "rdma.")
				a0, errA := guestBusy(ctx, p.a, stderr)
				b0, errB := guestBusy(ctx, p.b, stderr)
				if err := errors.Join(errA, errB); err != nil {
					return err
				}
				fout, err := guestStep(ctx, p.a, 0, stderr, argv...)
				if err != nil {
					return fmt.Errorf("%s over %s: %w", tc.Name, tr.trtype, err)
				}
				a1, errA := guestBusy(ctx, p.a, stderr)
				b1, errB := guestBusy(ctx, p.b, stderr)
				n1 := p.nicCounters(ctx, "rdma.")
				if err := errors.Join(errA, errB); err != nil {
					return err
				}
				v, err := fioResult(fout, tc.nvmeBenchTest)
				if err != nil {
					return fmt.Errorf("%s over %s: %w", tc.Name, tr.trtype, err)
				}
				ios := float64(fioIOs(fout))
				smp := results[i].samples[tr.trtype]
				smp.value = append(smp.value, v)
				if ios > 0 {
					smp.hostCPU = append(smp.hostCPU, (a1-a0)/ios*1e6)
					smp.targetCPU = append(smp.targetCPU, (b1-b0)/ios*1e6)
					if tr.trtype == "rdma" {
						per := func(k string) float64 { return float64(n1["rdma."+k]-n0["rdma."+k]) / ios }
						smp.ctl = append(smp.ctl, per("rdma_ctl_frames"))
						smp.doorbells = append(smp.doorbells, per("rdma_doorbells"))
						smp.events = append(smp.events, per("rdma_ctl_events"))
						fmt.Fprintf(stderr, "bench nvmf: per I/O: %.2f control frames from the drivers (%.2f doorbells), %.2f events to them; polling: %s\n",
							last(smp.ctl), last(smp.doorbells), last(smp.events), pollDeltas(doorbellCount{poll: n0}, doorbellCount{poll: n1}))
					}
				}
				fmt.Fprintf(stderr, "bench nvmf: sample %d: %s over %s: %.0f %s; CPU per I/O: host %.1f µs, target %.1f µs\n",
					s+1, tc.Name, tr.trtype, v, tc.Metric, last(smp.hostCPU), last(smp.targetCPU))
			}
			if _, err := guestStep(ctx, p.a, nvmfSetupLimit, stderr, "nvme", "disconnect", "-n", nvmfSubsysNQN); err != nil {
				return fmt.Errorf("host (A): nvme disconnect: %w", err)
			}
		}
	}
	rep := nvmfBenchReport{
		Command: "falconnic bench nvmf " + strings.Join(args, " "),
		Setup: map[string]string{
			"guests":     "two TCG guests (1 vCPU, 1 GiB) on one falconnic daemon; A the host, B the target",
			"target":     fmt.Sprintf("the guest kernel's nvmet over configfs: namespace 1 a %d MiB file in B's RAM (buffered), ports rdma %s:%s and tcp %s:%s", *sizeMiB, p.bIP, nvmfPort, p.bIP, nvmfTCPPort),
			"rdma":       "nvme-rdma on falcon0 (falconnic.ko; the Falcon transport runs in the daemon)",
			"tcp":        "nvme-tcp over eth0 (virtio-net on the same NICs' Ethernet function)",
			"fio":        fmt.Sprintf("libaio, O_DIRECT, %s per test, %d samples per transport alternating", runFor, *samples),
			"cpu_per_io": "each guest's busy time from /proc/stat over the run, divided by the I/Os",
		},
		Met: true,
	}
	for _, r := range results {
		rs, ts := r.samples["rdma"], r.samples["tcp"]
		r.RDMASample, r.TCPSample = rs.value, ts.value
		r.RDMA, r.TCP = fioMedian(rs.value), fioMedian(ts.value)
		if r.TCP > 0 {
			r.Ratio = fioRound(r.RDMA / r.TCP)
		}
		r.Met = r.Ratio >= r.Goal
		r.HostCPUusRDMA, r.HostCPUusTCP = fioRound(fioMedian(rs.hostCPU)), fioRound(fioMedian(ts.hostCPU))
		r.TargetCPUusRDMA, r.TargetCPUusTCP = fioRound(fioMedian(rs.targetCPU)), fioRound(fioMedian(ts.targetCPU))
		if len(rs.ctl) > 0 {
			r.RDMAFramesPerIO = &nvmfFrames{FromDrivers: fioRound(fioMedian(rs.ctl)), Doorbells: fioRound(fioMedian(rs.doorbells)),
				ToDrivers: fioRound(fioMedian(rs.events))}
		}
		rep.Met = rep.Met && r.Met
		rep.Tests = append(rep.Tests, r)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Fprintln(stdout, string(b))
	return nil
}

func last(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return v[len(v)-1]
}
