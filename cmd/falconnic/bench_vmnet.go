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
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"falconnic/device"
	"falconnic/qemu"
)

// `falconnic bench vm-net` boots two guests, each with two NICs: eth0 is a
// falconnic vhost-user NIC on a daemon this process runs (one daemon, both
// NICs on its switch), eth1 is QEMU's own `-netdev stream` link over a unix
// socket. The same guests then measure both links alternately, sample by
// sample, so drifting load on the shared host hits both alike:
//
//   - TCP throughput: iperf3 -c from A to the server in B (-t SECONDS, -O 1
//     to omit the first second of slow start), the receiver's bit rate;
//   - round-trip time: ICMP echo, u-root's ping (56-byte payload, -i 200 ms),
//     the first reply dropped (ARP, cold caches), the median of the rest.
//
// The JSON on stdout carries every sample, the medians and the ratios
// falconnic/QEMU for both. Progress goes to stderr.
func init() {
	benchmarks["vm-net"] = benchmark{"TCP throughput (iperf3) and ping RTT between two TCG guests: falconnic NICs vs QEMU -netdev stream", benchVMNet}
}

// The benchmark's two links: names in the JSON, guest subnets and MACs.
// The falconnic MACs are also the daemon's NIC MACs (its switch pins them).
const (
	vmnetFalconnic = "falconnic"
	vmnetStream    = "qemu_stream"
)

type vmnetLink struct {
	name       string
	serverIP   string // B's address on this link
	cidrA      string
	cidrB      string
	macA, macB string
}

var vmnetLinks = []vmnetLink{
	{vmnetFalconnic, "10.0.0.2", "10.0.0.1/24", "10.0.0.2/24", "52:54:00:fa:be:0a", "52:54:00:fa:be:0b"},
	{vmnetStream, "10.0.1.2", "10.0.1.1/24", "10.0.1.2/24", "52:54:00:fa:bf:0a", "52:54:00:fa:bf:0b"},
}

// vmnetOpts are the benchmark's flags.
type vmnetOpts struct {
	samples    int
	seconds    int
	pings      int
	cache      string
	workdir    string
	cpuprofile string
	bootWait   time.Duration
	only       string
	streamINTx bool
}

func benchVMNet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench vm-net", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o vmnetOpts
	fs.IntVar(&o.samples, "samples", 4, "samples per link (iperf3 run + ping series each)")
	fs.IntVar(&o.seconds, "seconds", 10, "iperf3 measuring time per sample")
	fs.IntVar(&o.pings, "pings", 20, "echo requests per RTT sample (plus one dropped warm-up)")
	fs.StringVar(&o.cache, "cache", qemu.DefaultCacheDir(), "guest image cache (falconnic image build)")
	fs.StringVar(&o.workdir, "workdir", "", "directory for daemon sockets and VM state (default: a new temporary one, removed at exit)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (the daemon) over the measuring phase to `FILE`")
	fs.DurationVar(&o.bootWait, "boot-timeout", 4*time.Minute, "how long to wait for the guests to boot")
	fs.StringVar(&o.only, "only", "", "measure only this link ("+vmnetFalconnic+" or "+vmnetStream+"); default both")
	fs.BoolVar(&o.streamINTx, "stream-intx", false, "give the stream NICs the legacy INTx interrupt (vectors=0) too, like the vhost-user NICs must have under TCG")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 0 || o.samples < 1 || o.seconds < 1 || o.pings < 1 {
		return fmt.Errorf("%w: bench vm-net [--samples N≥1] [--seconds S≥1] [--pings N≥1] [--cpuprofile FILE]", errUsage)
	}
	if o.only != "" && o.only != vmnetFalconnic && o.only != vmnetStream {
		return fmt.Errorf("%w: --only %q: want %s or %s", errUsage, o.only, vmnetFalconnic, vmnetStream)
	}
	res, err := runVMNet(ctx, o, args, stderr)
	if res != nil {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if eerr := enc.Encode(res); eerr != nil && err == nil {
			err = eerr
		}
	}
	return err
}

// vmnetResult is the benchmark's JSON.
type vmnetResult struct {
	Command     string                  `json:"command"`
	Started     string                  `json:"started"`
	Setup       vmnetSetup              `json:"setup"`
	Links       map[string]*vmnetSeries `json:"links"`
	Ratios      *vmnetRatios            `json:"ratios,omitempty"`
	HostLoad    [2]string               `json:"host_loadavg_start_end"`
	Daemon      *device.Status          `json:"falconnic_daemon_status,omitempty"`
	Error       string                  `json:"error,omitempty"`
	ProfileFile string                  `json:"cpuprofile,omitempty"`
}

type vmnetSetup struct {
	Samples      int     `json:"samples_per_link"`
	Seconds      int     `json:"iperf3_seconds"`
	Throughput   string  `json:"throughput_method"`
	RTT          string  `json:"rtt_method"`
	Order        string  `json:"order"`
	Guests       string  `json:"guests"`
	FalconnicNIC string  `json:"falconnic_nic"`
	StreamNIC    string  `json:"stream_nic"`
	BootSeconds  float64 `json:"boot_s"`
	GOMAXPROCS   int     `json:"bench_process_gomaxprocs"`
}

// vmnetSeries is one link's samples and medians.
type vmnetSeries struct {
	ThroughputMbps   []float64    `json:"throughput_mbps"`
	SenderMbps       []float64    `json:"sender_mbps"`
	Retransmits      []int64      `json:"retransmits"`
	RTTMicros        []float64    `json:"rtt_median_us"`
	RTTMinMicros     []float64    `json:"rtt_min_us"`
	RTTMaxMicros     []float64    `json:"rtt_max_us"`
	Replies          []int        `json:"ping_replies"`
	PingLost         []int        `json:"ping_lost"`
	BenchCPUSeconds  []float64    `json:"bench_process_cpu_s"`
	QEMUCPUSeconds   [][2]float64 `json:"qemu_cpu_s_a_b"`
	WallSeconds      []float64    `json:"wall_s"`
	MedianThroughput float64      `json:"throughput_median_mbps"`
	MedianRTT        float64      `json:"rtt_median_of_medians_us"`
	PooledRTT        float64      `json:"rtt_median_all_replies_us"`
	PooledRTTP90     float64      `json:"rtt_p90_all_replies_us"`
	all              []float64    // every reply's RTT, for the pooled figures
}

type vmnetRatios struct {
	Throughput float64 `json:"throughput_falconnic_over_qemu"`
	RTT        float64 `json:"rtt_falconnic_over_qemu"`
	// Paired: sample i of one link ran right next to sample i of the
	// other, under about the same host load; the median of the per-pair
	// ratios cancels most of the drift the medians above still carry.
	PairedThroughput []float64 `json:"throughput_paired_ratios"`
	PairedRTT        []float64 `json:"rtt_paired_ratios"`
	PairedTputMedian float64   `json:"throughput_paired_ratio_median"`
	PairedRTTMedian  float64   `json:"rtt_paired_ratio_median"`
	PooledRTT        float64   `json:"rtt_all_replies_median_ratio"`
	GoalTput         bool      `json:"throughput_goal_met"` // ratio ≥ 1.0
	GoalRTT          bool      `json:"rtt_goal_met"`        // ratio ≤ 1.0
}

func runVMNet(ctx context.Context, o vmnetOpts, args []string, stderr io.Writer) (*vmnetResult, error) {
	progress := func(format string, a ...any) {
		fmt.Fprintf(stderr, "bench vm-net: "+format+"\n", a...)
	}
	res := &vmnetResult{
		Command: "falconnic bench vm-net " + strings.Join(args, " "),
		Started: time.Now().UTC().Format(time.RFC3339),
		Setup: vmnetSetup{
			Samples:      o.samples,
			Seconds:      o.seconds,
			Throughput:   fmt.Sprintf("iperf3 -c B -t %d -O 1 from guest A to `iperf3 -s` in guest B; receiver bit rate", o.seconds),
			RTT:          fmt.Sprintf("u-root ping -c %d -i 200 (ICMP echo, 56-byte payload) from A to B; first reply dropped; median per sample", o.pings+1),
			Order:        "links alternate within each sample, the first link swapping every sample",
			Guests:       fmt.Sprintf("2 TCG guests, qemu64, -smp %d, -m %d MiB; each has both NICs", qemu.DefaultCPUs, qemu.DefaultMemMiB),
			FalconnicNIC: "eth0: virtio-net-pci (vectors=0, INTx) on vhost-user to one in-process falconnic daemon with two NICs",
			StreamNIC:    "eth1: virtio-net-pci (MSI-X) on -netdev stream,addr.type=unix between the two QEMUs",
		},
		Links:    map[string]*vmnetSeries{},
		HostLoad: [2]string{vmnetLoadavg(), ""},
	}
	defer func() { res.HostLoad[1] = vmnetLoadavg() }()
	res.Setup.GOMAXPROCS = runtime.GOMAXPROCS(0)

	im, err := qemu.LoadImage(o.cache)
	if err != nil {
		return nil, err
	}
	dir := o.workdir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "fn-vmnet-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}

	// The daemon runs in this process, so --cpuprofile profiles it.
	cfg := &device.Config{
		Control: filepath.Join(dir, "control.sock"),
		NICs: []device.NICSpec{
			{Name: "a0", Socket: filepath.Join(dir, "a0.sock"), MAC: vmnetLinks[0].macA},
			{Name: "b0", Socket: filepath.Join(dir, "b0.sock"), MAC: vmnetLinks[0].macB},
		},
	}
	cb, _ := json.Marshal(cfg)
	if cfg, err = device.ParseConfig(cb); err != nil {
		return nil, fmt.Errorf("daemon config: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := device.NewDaemon(cfg, device.DaemonOptions{Logger: log})
	if err != nil {
		return nil, err
	}
	dctx, stopDaemon := context.WithCancel(context.Background())
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- d.Run(dctx) }()
	defer func() {
		stopDaemon()
		select {
		case <-daemonDone:
		case <-time.After(10 * time.Second):
			progress("daemon did not stop in 10 s")
		}
	}()
	for _, n := range cfg.NICs {
		if err := vmnetWaitSocket(ctx, n.Socket, 30*time.Second); err != nil {
			return nil, fmt.Errorf("daemon NIC %s: %w", n.Name, err)
		}
	}
	progress("daemon up: %s %s", cfg.NICs[0].Socket, cfg.NICs[1].Socket)

	if o.streamINTx {
		// qemu.Machine has no knob for it: a wrapper adds a global default
		// that the vhost-user NICs' explicit vectors=0 already matches.
		real, err := exec.LookPath(qemu.QEMUBinary)
		if err != nil {
			return nil, err
		}
		wrapper := filepath.Join(dir, "qemu-intx")
		script := "#!/bin/sh\nexec " + real + " -global virtio-net-pci.vectors=0 \"$@\"\n"
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			return nil, err
		}
		saved := qemu.QEMUBinary
		qemu.QEMUBinary = wrapper
		defer func() { qemu.QEMUBinary = saved }()
		res.Setup.StreamNIC = strings.Replace(res.Setup.StreamNIC, "(MSI-X)", "(vectors=0, INTx, by -global virtio-net-pci.vectors=0)", 1)
	}

	// Guests: A listens on the stream link, B connects, so A starts first.
	state := filepath.Join(dir, "vms")
	link := filepath.Join(dir, "link.sock")
	machine := func(name string, vhost string, streamServer bool, l0, l1 [2]string) qemu.Machine {
		return qemu.Machine{
			Name: name, Kernel: im.KernelPath(), Initrd: im.InitrdPath(),
			NICs: []qemu.NIC{
				{VhostUser: vhost, MAC: l0[0], CIDR: l0[1]},
				{Stream: link, StreamServer: streamServer, MAC: l1[0], CIDR: l1[1]},
			},
		}
	}
	fl, sl := vmnetLinks[0], vmnetLinks[1]
	bootStart := time.Now()
	vmA, err := qemu.Start(state, machine("A", cfg.NICs[0].Socket, true, [2]string{fl.macA, fl.cidrA}, [2]string{sl.macA, sl.cidrA}))
	if err != nil {
		return nil, err
	}
	defer vmnetStopVM(vmA, progress)
	if err := vmnetWaitSocket(ctx, link, 60*time.Second); err != nil {
		return nil, fmt.Errorf("guest A's stream socket: %w\n%s", err, vmnetFileTail(vmA.QEMULog()))
	}
	vmB, err := qemu.Start(state, machine("B", cfg.NICs[1].Socket, false, [2]string{fl.macB, fl.cidrB}, [2]string{sl.macB, sl.cidrB}))
	if err != nil {
		return nil, err
	}
	defer vmnetStopVM(vmB, progress)
	progress("booting guests A and B (state %s)", state)
	for _, v := range []*qemu.VM{vmA, vmB} {
		if err := v.WaitReady(ctx, o.bootWait); err != nil {
			return nil, err
		}
	}
	res.Setup.BootSeconds = math.Round(time.Since(bootStart).Seconds()*10) / 10
	progress("guests ready in %.1fs", res.Setup.BootSeconds)

	if out, err := vmnetGuestRun(ctx, vmB, "iperf3", "-s", "-D"); err != nil {
		return nil, fmt.Errorf("starting iperf3 server in B: %w\n%s", err, out)
	}

	links := vmnetLinks
	if o.only != "" {
		links = slices.DeleteFunc(slices.Clone(links), func(l vmnetLink) bool { return l.name != o.only })
	}
	for _, l := range links {
		res.Links[l.name] = &vmnetSeries{}
	}
	if o.cpuprofile != "" {
		stop, err := startCPUProfile(o.cpuprofile)
		if err != nil {
			return nil, err
		}
		defer stop()
		res.ProfileFile = o.cpuprofile
	}
	var runErr error
samples:
	for i := 0; i < o.samples; i++ {
		order := slices.Clone(links)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, l := range order {
			progress("sample %d/%d over %s", i+1, o.samples, l.name)
			s, err := vmnetSample(ctx, o, vmA, vmB, l)
			if err != nil {
				if ctx.Err() != nil {
					err = fmt.Errorf("interrupted: %w", ctx.Err())
				}
				runErr = fmt.Errorf("sample %d over %s: %w", i+1, l.name, err)
				break samples
			}
			res.Links[l.name].add(s)
			progress("  %s: %.0f Mbit/s (%d retransmits), RTT median %.0f µs over %d replies; bench process %.2f s CPU, QEMU A %.2f s, B %.2f s in %.1f s",
				l.name, s.mbps, s.retrans, s.rttMed, s.replies, s.benchCPU, s.vmnetQEMUCPU[0], s.vmnetQEMUCPU[1], s.wall)
		}
	}
	for _, s := range res.Links {
		s.summarize()
	}
	res.Ratios = vmnetCompareLinks(res.Links[vmnetFalconnic], res.Links[vmnetStream])
	st := d.Status()
	res.Daemon = &st
	if runErr != nil {
		res.Error = runErr.Error()
	}
	return res, runErr
}

// summarize fills in the medians and pooled RTT figures.
func (s *vmnetSeries) summarize() {
	s.MedianThroughput = vmnetRound1(vmnetMedian(s.ThroughputMbps))
	s.MedianRTT = vmnetRound1(vmnetMedian(s.RTTMicros))
	s.PooledRTT = vmnetRound1(vmnetMedian(s.all))
	s.PooledRTTP90 = vmnetRound1(vmnetQuantile(s.all, 0.9))
}

// vmnetCompareLinks returns the ratios falconnic/QEMU (f over s), or nil when
// either link has no sample.
func vmnetCompareLinks(f, s *vmnetSeries) *vmnetRatios {
	if f == nil || s == nil || len(f.ThroughputMbps) == 0 || len(s.ThroughputMbps) == 0 {
		return nil
	}
	r := &vmnetRatios{}
	if s.MedianThroughput > 0 {
		r.Throughput = vmnetRound3(f.MedianThroughput / s.MedianThroughput)
	}
	if s.MedianRTT > 0 {
		r.RTT = vmnetRound3(f.MedianRTT / s.MedianRTT)
	}
	if s.PooledRTT > 0 {
		r.PooledRTT = vmnetRound3(f.PooledRTT / s.PooledRTT)
	}
	for i := range min(len(f.ThroughputMbps), len(s.ThroughputMbps)) {
		if s.ThroughputMbps[i] > 0 && s.RTTMicros[i] > 0 {
			r.PairedThroughput = append(r.PairedThroughput, vmnetRound3(f.ThroughputMbps[i]/s.ThroughputMbps[i]))
			r.PairedRTT = append(r.PairedRTT, vmnetRound3(f.RTTMicros[i]/s.RTTMicros[i]))
		}
	}
	r.PairedTputMedian, r.PairedRTTMedian = vmnetRound3(vmnetMedian(r.PairedThroughput)), vmnetRound3(vmnetMedian(r.PairedRTT))
	r.GoalTput, r.GoalRTT = r.Throughput >= 1.0, r.RTT > 0 && r.RTT <= 1.0
	return r
}

// vmnetOne is one sample over one link.
type vmnetOne struct {
	mbps, senderMbps       float64
	retrans                int64
	rttMed, rttMin, rttMax float64
	replies, lost          int
	rtts                   []float64
	benchCPU               float64
	vmnetQEMUCPU           [2]float64
	wall                   float64
}

func (s *vmnetSeries) add(x vmnetOne) {
	s.all = append(s.all, x.rtts...)
	s.ThroughputMbps = append(s.ThroughputMbps, vmnetRound1(x.mbps))
	s.SenderMbps = append(s.SenderMbps, vmnetRound1(x.senderMbps))
	s.Retransmits = append(s.Retransmits, x.retrans)
	s.RTTMicros = append(s.RTTMicros, vmnetRound1(x.rttMed))
	s.RTTMinMicros = append(s.RTTMinMicros, vmnetRound1(x.rttMin))
	s.RTTMaxMicros = append(s.RTTMaxMicros, vmnetRound1(x.rttMax))
	s.Replies = append(s.Replies, x.replies)
	s.PingLost = append(s.PingLost, x.lost)
	s.BenchCPUSeconds = append(s.BenchCPUSeconds, vmnetRound3(x.benchCPU))
	s.QEMUCPUSeconds = append(s.QEMUCPUSeconds, [2]float64{vmnetRound3(x.vmnetQEMUCPU[0]), vmnetRound3(x.vmnetQEMUCPU[1])})
	s.WallSeconds = append(s.WallSeconds, vmnetRound1(x.wall))
}

// vmnetSample runs iperf3 then ping from A to B over link l, and the CPU
// time this process (the daemon) and both QEMUs spent meanwhile.
func vmnetSample(ctx context.Context, o vmnetOpts, a, b *qemu.VM, l vmnetLink) (vmnetOne, error) {
	var s vmnetOne
	cpu0, qa0, qb0 := vmnetSelfCPU(), vmnetQEMUCPU(a), vmnetQEMUCPU(b)
	t0 := time.Now()
	var ip vmnetIperf
	var out string
	var err error
	// The server may not listen yet right after -D, and a client that
	// fails early (a connect refused) is retried a few times.
	for try := 0; try < 5; try++ {
		out, err = vmnetGuestRun(ctx, a, "iperf3", "-c", l.serverIP, "-t", strconv.Itoa(o.seconds), "-O", "1", "-J")
		if err == nil {
			ip, err = parseVMNetIperf3([]byte(out))
		}
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return s, fmt.Errorf("iperf3: %w\n%s", err, vmnetTail(out, 2000))
	}
	s.mbps, s.senderMbps, s.retrans = ip.receiverBps/1e6, ip.senderBps/1e6, ip.retransmits
	out, err = vmnetGuestRun(ctx, a, "ping", "-c", strconv.Itoa(o.pings+1), "-i", "200", l.serverIP)
	rtts := parseVMNetPingTimes(out)
	if len(rtts) < 2 {
		return s, fmt.Errorf("ping: %d replies (%v)\n%s", len(rtts), err, vmnetTail(out, 2000))
	}
	// u-root's ping gives up at the first echo unanswered within 1 s.
	s.lost = o.pings + 1 - len(rtts)
	rtts = rtts[1:] // the first may carry ARP and cold caches
	us := make([]float64, len(rtts))
	for i, r := range rtts {
		us[i] = float64(r) / float64(time.Microsecond)
	}
	s.rtts = us
	s.rttMed, s.rttMin, s.rttMax, s.replies = vmnetMedian(us), slices.Min(us), slices.Max(us), len(us)
	s.wall = time.Since(t0).Seconds()
	s.benchCPU = vmnetSelfCPU() - cpu0
	s.vmnetQEMUCPU = [2]float64{vmnetQEMUCPU(a) - qa0, vmnetQEMUCPU(b) - qb0}
	return s, nil
}

// vmnetGuestRun runs argv in the guest through its agent and returns stdout and
// stderr together.
func vmnetGuestRun(ctx context.Context, v *qemu.VM, argv ...string) (string, error) {
	var out bytes.Buffer
	err := execIn(ctx, v, "", argv, nil, &out, &out)
	return out.String(), err
}

// vmnetIperf is what the benchmark reads from iperf3 -J.
type vmnetIperf struct {
	receiverBps, senderBps float64
	retransmits            int64
}

// parseVMNetIperf3 reads an iperf3 -J client report: end.sum_received and
// end.sum_sent. A report with an "error" field, or no positive receiver
// rate, is an error.
func parseVMNetIperf3(b []byte) (vmnetIperf, error) {
	var r vmnetIperf
	var doc struct {
		Error string `json:"error"`
		End   struct {
			SumSent struct {
				Bps         float64 `json:"bits_per_second"`
				Retransmits int64   `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				Bps float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	// The agent merges stderr into the same buffer: take the outermost
	// JSON object.
	i, j := bytes.IndexByte(b, '{'), bytes.LastIndexByte(b, '}')
	if i < 0 || j < i {
		return r, errors.New("no JSON report")
	}
	if err := json.Unmarshal(b[i:j+1], &doc); err != nil {
		return r, fmt.Errorf("iperf3 report: %w", err)
	}
	if doc.Error != "" {
		return r, fmt.Errorf("iperf3: %s", doc.Error)
	}
	rx, tx := doc.End.SumReceived.Bps, doc.End.SumSent.Bps
	if !(rx > 0) || math.IsInf(rx, 0) || !(tx >= 0) || math.IsInf(tx, 0) {
		return r, fmt.Errorf("iperf3 report without a valid rate (received %v, sent %v bit/s)", rx, tx)
	}
	r.receiverBps, r.senderBps, r.retransmits = rx, tx, doc.End.SumSent.Retransmits
	return r, nil
}

// vmnetPingTime matches u-root ping's reply lines, whose time is a Go duration:
// "64 bytes from 10.0.0.2: icmp_seq=3 time=512.3µs".
var vmnetPingTime = regexp.MustCompile(`(?m)^\d+ bytes from \S+ icmp_seq=\d+ time=(\S+)\s*$`)

// parseVMNetPingTimes returns the round-trip times of the reply lines in out,
// in order; lines it cannot read are skipped.
func parseVMNetPingTimes(out string) []time.Duration {
	var ds []time.Duration
	for _, m := range vmnetPingTime.FindAllStringSubmatch(out, -1) {
		d, err := time.ParseDuration(m[1])
		if err != nil || d <= 0 {
			continue
		}
		ds = append(ds, d)
	}
	return ds
}

// vmnetMedian of xs (the mean of the middle two for an even count); 0 if empty.
func vmnetMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// vmnetQuantile of xs by the nearest-rank method; 0 if empty.
func vmnetQuantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

func vmnetRound1(x float64) float64 { return math.Round(x*10) / 10 }
func vmnetRound3(x float64) float64 { return math.Round(x*1000) / 1000 }

// vmnetSelfCPU is this process's user+system CPU time in seconds.
func vmnetSelfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// selfSwitches is this process's context switches so far, voluntary (a
// thread slept) and involuntary (preempted), all threads.
func selfSwitches() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Nvcsw + ru.Nivcsw)
}

// vmnetQEMUCPU is a QEMU's user+system CPU time in seconds, from /proc (clock
// ticks of 1/100 s, the Linux USER_HZ).
func vmnetQEMUCPU(v *qemu.VM) float64 {
	pid, ok := v.Pid()
	if !ok {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return vmnetProcStatCPU(b)
}

// vmnetProcStatCPU reads utime+stime (fields 14 and 15) from /proc/PID/stat, in
// seconds; 0 if the line is not understood.
func vmnetProcStatCPU(b []byte) float64 {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14 → f[11], stime f[12].
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return float64(u+s) / 100
}

func vmnetLoadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// vmnetWaitSocket waits until path is a unix socket.
func vmnetWaitSocket(ctx context.Context, path string, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s did not appear in %v", path, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func vmnetStopVM(v *qemu.VM, progress func(string, ...any)) {
	progress("stopping guest %s", v.Name)
	v.Stop()
}

func vmnetFileTail(path string) string {
	b, _ := os.ReadFile(path)
	return vmnetTail(string(b), 2000)
}

func vmnetTail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
