package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"falconnic/falcon/sim"
	"falconnic/internal/control"
	"falconnic/qemu"
)

func init() {
	benchmarks["soak"] = benchmark{"hours of fio with verify on an NVMe-over-Falcon disk and a local disk, alternating as bench nvme does: stalls, verify errors, watchdog counters", benchSoak}
}

// soakJob is one fio workload of the soak. Write jobs verify what they
// wrote (crc32c, read back in the same run); read jobs are time based.
type soakJob struct {
	Name    string
	RW      string
	BS      string
	IODepth int
	SizeMiB int // write jobs: the region written and verified
}

// soakJobs mixes 4 KiB random and 128 KiB sequential I/O, reads and
// writes, at queue depths 1 to 32.
var soakJobs = []soakJob{
	{"randwrite_4k_qd32_verify", "randwrite", "4k", 32, 32},
	{"randread_4k_qd32", "randread", "4k", 32, 0},
	{"write_128k_qd8_verify", "write", "128k", 8, 96},
	{"read_128k_qd32", "read", "128k", 32, 0},
	{"randwrite_4k_qd1_verify", "randwrite", "4k", 1, 4},
	{"randread_4k_qd1", "randread", "4k", 1, 0},
	{"randwrite_128k_qd16_verify", "randwrite", "128k", 16, 64},
	{"read_4k_qd4", "read", "4k", 4, 0},
}

// soakJobLimit bounds one size-based (verify) fio run: the region written
// and read back at the slowest rate seen on this host, with a margin.
const soakJobLimit = 3 * time.Minute

// soakReport is what bench soak prints.
type soakReport struct {
	Command  string            `json:"command"`
	Setup    map[string]string `json:"setup"`
	ElapsedS float64           `json:"elapsed_s"`
	Runs     map[string]int    `json:"runs"` // fio runs per disk
	// Stalls are execs that overran their deadline (each printed a
	// stall report); the soak stops at the first.
	Stalls       int `json:"stalls"`
	VerifyErrors int `json:"verify_errors"`
	IOErrors     int `json:"io_errors"`
	AgentErrors  int `json:"agent_errors"`
	Restarts     int `json:"restarts"`
	// Interrupted says the soak was stopped (a signal) before its
	// duration: its figures cover the time it ran.
	Interrupted bool `json:"interrupted,omitempty"`
	// Counters are the daemons' watchdog and port counters, summed over
	// daemons and across restarts.
	Counters map[string]uint64 `json:"counters"`
	// WatchdogLog are the daemons' log lines of each act of the ring
	// watchdog: the ring's state when it acted.
	WatchdogLog []string   `json:"watchdog_log,omitempty"`
	Goals       []sim.Goal `json:"goals"`
	Met         bool       `json:"goal_met"`
}

// soakCounters are the daemon counters the soak adds up: the ring
// watchdog's (any non-zero but watchdog_avail_held, a held ring that no
// completion reached for 2 s, is a lost notification) and the Falcon
// ports' resends, spurious RTO episodes, late wakes and stall resumes.
var soakCounters = []string{"watchdog_avail_no_kick", "watchdog_used_no_call", "watchdog_not_taken", "watchdog_avail_held", "watchdog_checks", "call_fd_swaps", "call_no_fd", "call_failed",
	"retx_rto", "retx_ulp_poke", "rto_spurious", "port_timer_late", "port_resumed"}

func benchSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cache := fs.String("cache", qemu.DefaultCacheDir(), "guest image cache")
	duration := fs.Duration("duration", time.Hour, "how long to run fio jobs")
	readFor := fs.Duration("runtime", 5*time.Second, "run time of each read job")
	daemons := fs.Int("daemons", 1, "1: one daemon with the initiator and target NICs; 2: two daemons over the UDP fabric")
	loss := fs.Float64("loss", 0, "fabric loss in percent, each direction (needs --daemons 2)")
	restarts := fs.Int("restart", 0, "SIGKILL and restart the initiator's daemon this many times, spread over the run, each during a verifying NVMe job")
	intx := fs.String("intx", "none", "disks without MSI-X, on the PCI pin's level interrupt: none, local (QEMU's virtio-blk) or all")
	sizeMiB := fs.Int("size", 256, "size of each disk in MiB")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *duration <= 0 || *readFor < time.Second || *daemons < 1 || *daemons > 2 || *loss < 0 || *loss >= 100 ||
		(*loss > 0 && *daemons == 1) || *restarts < 0 || *sizeMiB < 128 {
		return fmt.Errorf("%w: duration > 0, runtime ≥ 1s, daemons 1 or 2, loss in [0,100) with 2 daemons, restart ≥ 0, size ≥ 128 MiB", errUsage)
	}
	im, err := qemu.LoadImage(*cache)
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fns-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	size := int64(*sizeMiB) << 20
	nsFile, localFile := filepath.Join(dir, "ns.img"), filepath.Join(dir, "local.img")
	for _, f := range []string{nsFile, localFile} {
		if err := fillFile(f, size); err != nil {
			return err
		}
	}
	set, err := startSoakDaemons(bin, dir, *daemons, *loss, nsFile, size)
	if err != nil {
		return err
	}
	defer set.stop()

	m := qemu.Machine{Name: "soak", Kernel: im.KernelPath(), Initrd: im.InitrdPath(),
		Disks: []qemu.Disk{{VhostUserBlk: set.disk}, {File: localFile, Serial: "fn-local"}}}
	if err := intxDisks(*intx, m.Disks); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	vm, err := qemu.Start(filepath.Join(dir, "vm"), m)
	if err != nil {
		return err
	}
	defer vm.Stop()
	fmt.Fprintf(stderr, "bench soak: booting (console: %s)\n", vm.ConsoleLog())
	if err := vm.WaitReady(ctx, 5*time.Minute); err != nil {
		return err
	}
	nvmeDev, localDev, err := guestDisks(ctx, vm, soakSerial, "fn-local")
	if err != nil {
		return err
	}

	rep := soakReport{
		Command: "falconnic bench soak " + strings.Join(args, " "),
		Setup: map[string]string{
			"nvme":     fmt.Sprintf("vhost-user-blk → NVMe-over-Falcon, %d daemon(s) as processes, fabric loss %g %%", *daemons, *loss),
			"local":    "QEMU virtio-blk-pci, cache=none, aio=native, its own file",
			"jobs":     soakJobNames(),
			"duration": duration.String(),
			"restarts": strconv.Itoa(*restarts),
			"intx":     intxSetup(*intx),
		},
		Runs:     map[string]int{"nvme": 0, "local": 0},
		Counters: map[string]uint64{},
	}
	diag := func() string { return set.statusJSON(ctx) }
	start := time.Now()
	end := start.Add(*duration)
	nextRestart := func() time.Time {
		if rep.Restarts >= *restarts {
			return time.Time{}
		}
		return start.Add(*duration * time.Duration(rep.Restarts+1) / time.Duration(*restarts+1))
	}
	stopped := false
	for i := 0; !stopped && time.Now().Before(end); i++ {
		job := soakJobs[i%len(soakJobs)]
		order := []string{nvmeDev, localDev}
		if (i/len(soakJobs)+i)%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, dev := range order {
			restart := false
			if r := nextRestart(); dev == nvmeDev && !r.IsZero() && time.Now().After(r) && job.SizeMiB > 0 {
				restart = true
			}
			var during func()
			if restart {
				during = func() {
					set.addCounters(ctx, rep.Counters)
					fmt.Fprintf(stderr, "bench soak: restarting the initiator's daemon during %s\n", job.Name)
					if err := set.restartInitiator(); err != nil {
						fmt.Fprintf(stderr, "bench soak: restart: %v\n", err)
					}
				}
			}
			out, err := runSoakJob(ctx, vm, dev, job, *readFor, diag, stderr, during)
			if restart {
				rep.Restarts++
			}
			kind := "local"
			if dev == nvmeDev {
				kind = "nvme"
			}
			rep.Runs[kind]++
			var ge *guestExit
			switch {
			case ctx.Err() != nil:
				// Interrupted (Ctrl-C): the killed job is not counted.
				rep.Runs[kind]--
				stopped = true
				rep.Interrupted = true
			case err == nil:
			case errors.Is(err, errStall):
				rep.Stalls++
				stopped = true
			case errors.As(err, &ge):
				if fioVerifyFailed(out) {
					rep.VerifyErrors++
				} else {
					rep.IOErrors++
				}
				fmt.Fprintf(stderr, "bench soak: %s on %s: %v\n%s\n", job.Name, dev, err, tailLines(out, 20))
			default:
				rep.AgentErrors++
				stopped = true
				fmt.Fprintf(stderr, "bench soak: %s on %s: %v\n", job.Name, dev, err)
			}
			if stopped || ctx.Err() != nil {
				stopped = true
				break
			}
		}
		if i%len(soakJobs) == len(soakJobs)-1 {
			fmt.Fprintf(stderr, "bench soak: %s: %d+%d fio runs, %d stalls, %d verify errors, %d restarts\n",
				time.Since(start).Round(time.Second), rep.Runs["nvme"], rep.Runs["local"], rep.Stalls, rep.VerifyErrors, rep.Restarts)
		}
	}
	rep.ElapsedS = time.Since(start).Seconds()
	set.addCounters(context.WithoutCancel(ctx), rep.Counters) // after a Ctrl-C too
	rep.WatchdogLog = set.logLines("watchdog")
	rep.Goals = []sim.Goal{
		sim.NewGoal("stalls", float64(rep.Stalls), "<=", 0),
		sim.NewGoal("verify_errors", float64(rep.VerifyErrors), "<=", 0),
		sim.NewGoal("io_errors", float64(rep.IOErrors+rep.AgentErrors), "<=", 0),
		sim.NewGoal("watchdog", float64(rep.Counters["watchdog_avail_no_kick"]+rep.Counters["watchdog_used_no_call"]+rep.Counters["watchdog_not_taken"]), "<=", 0),
		sim.NewGoal("duration_s", rep.ElapsedS, ">=", duration.Seconds()),
		sim.NewGoal("restarts", float64(rep.Restarts), ">=", float64(*restarts)),
	}
	rep.Met = true
	for _, g := range rep.Goals {
		rep.Met = rep.Met && g.Met
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return err
	}
	if !rep.Met {
		return errors.New("bench soak: goals not met")
	}
	return nil
}

func soakJobNames() string {
	var s []string
	for _, j := range soakJobs {
		s = append(s, j.Name)
	}
	return strings.Join(s, ",")
}

// runSoakJob runs one fio job on dev. With during non-nil it is called a
// second into the job (a daemon restart), and the job's result is taken
// once both are done. It returns fio's output.
func runSoakJob(ctx context.Context, vm *qemu.VM, dev string, job soakJob, readFor time.Duration, diag func() string, stderr io.Writer, during func()) (string, error) {
	argv := []string{"fio", "--name=" + job.Name, "--filename=" + dev, "--direct=1", "--ioengine=libaio",
		"--rw=" + job.RW, "--bs=" + job.BS, "--iodepth=" + strconv.Itoa(job.IODepth), "--output-format=json"}
	sp := execSpec{diag: diag, report: stderr}
	if job.SizeMiB > 0 {
		argv = append(argv, "--size="+strconv.Itoa(job.SizeMiB)+"M", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1")
		sp.limit = soakJobLimit
	} else {
		argv = append(argv, "--runtime="+strconv.Itoa(int(readFor.Seconds())), "--time_based")
	}
	var out bytes.Buffer
	if during == nil {
		err := execSpecIn(ctx, vm, argv, sp, &out, &out)
		return out.String(), err
	}
	done := make(chan error, 1)
	go func() { done <- execSpecIn(ctx, vm, argv, sp, &out, &out) }()
	select {
	case err := <-done:
		return out.String(), err // ended before the hook: nothing to do
	case <-time.After(time.Second):
	}
	during()
	err := <-done
	return out.String(), err
}

// fioVerifyFailed reports whether fio's output shows a verify failure
// (fio's job error EILSEQ, or its verify messages).
func fioVerifyFailed(out string) bool {
	if i := strings.IndexByte(out, '{'); i >= 0 {
		var res struct {
			Jobs []struct {
				Error int `json:"error"`
			} `json:"jobs"`
		}
		if json.Unmarshal([]byte(out[i:]), &res) == nil && len(res.Jobs) > 0 && res.Jobs[0].Error == int(syscall.EILSEQ) {
			return true
		}
	}
	return strings.Contains(out, "verify failed") || strings.Contains(out, "bad magic")
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// soakSerial is the NVMe disk's serial in the soak's daemon config.
const soakSerial = "fn-soak"

// soakDaemons are the soak's daemon processes: one with both NICs, or a
// store daemon (the namespace) and a host daemon (the disk) over the UDP
// fabric. The initiator's daemon is the host's (the only one with one
// daemon).
type soakDaemons struct {
	bin   string
	procs []*soakProc
	disk  string // the disk's vhost-user socket
}

type soakProc struct {
	dir, config string
	sockets     []string
	cmd         *exec.Cmd
}

func startSoakDaemons(bin, dir string, daemons int, loss float64, nsFile string, size int64) (*soakDaemons, error) {
	type cfgT = map[string]any
	ns := cfgT{"nsid": 1, "backing": nsFile, "size": size, "direct": true}
	disk := cfgT{"name": "d0", "socket": "d0.sock", "nsid": 1, "serial": soakSerial}
	var cfgs []cfgT
	var socks [][]string
	if daemons == 1 {
		ns["nic"] = "tgt"
		disk["nic"], disk["target"] = "ini", "tgt"
		cfgs = []cfgT{{"control": "control.sock",
			"nics": []cfgT{{"name": "ini", "socket": "ini.sock", "mac": "52:54:00:5a:00:01"}, {"name": "tgt", "socket": "tgt.sock", "mac": "52:54:00:5a:00:02"}},
			"nvme": cfgT{"namespaces": []cfgT{ns}, "disks": []cfgT{disk}}}}
		socks = [][]string{{"ini.sock", "tgt.sock", "d0.sock"}}
	} else {
		ports, err := freeUDPPorts(2)
		if err != nil {
			return nil, err
		}
		ns["nic"] = "store"
		ns["allow"] = []string{"52:54:00:5a:00:01"} // the host's NIC, on the other daemon
		disk["nic"], disk["target"] = "host", "52:54:00:5a:00:02"
		key, err := fabricKeyFile(dir, false)
		if err != nil {
			return nil, err
		}
		fab := func(i int) cfgT {
			return cfgT{"listen": ports[i], "peers": []string{ports[1-i]}, "loss_percent": loss, "seed": i + 1, "key_file": key}
		}
		// The host (initiator) first: restartInitiator restarts procs[0].
		cfgs = []cfgT{
			{"control": "control.sock", "nics": []cfgT{{"name": "host", "socket": "host.sock", "mac": "52:54:00:5a:00:01"}},
				"fabric": fab(0), "nvme": cfgT{"disks": []cfgT{disk}}},
			{"control": "control.sock", "nics": []cfgT{{"name": "store", "socket": "store.sock", "mac": "52:54:00:5a:00:02"}},
				"fabric": fab(1), "nvme": cfgT{"namespaces": []cfgT{ns}}},
		}
		socks = [][]string{{"host.sock", "d0.sock"}, {"store.sock"}}
	}
	set := &soakDaemons{bin: bin}
	// Start the store first: the host's disk identifies the namespace at
	// start.
	for i := len(cfgs) - 1; i >= 0; i-- {
		d := filepath.Join(dir, fmt.Sprintf("d%d", i+1))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		b, _ := json.MarshalIndent(cfgs[i], "", "  ")
		p := &soakProc{dir: d, config: filepath.Join(d, "daemon.json")}
		if err := os.WriteFile(p.config, b, 0o644); err != nil {
			return nil, err
		}
		for _, s := range socks[i] {
			p.sockets = append(p.sockets, filepath.Join(d, s))
		}
		set.procs = append([]*soakProc{p}, set.procs...)
		if err := set.start(p); err != nil {
			set.stop()
			return nil, err
		}
	}
	set.disk = filepath.Join(set.procs[0].dir, "d0.sock")
	return set, nil
}

// start starts p's daemon and waits for its sockets.
func (s *soakDaemons) start(p *soakProc) error {
	logPath := filepath.Join(p.dir, "daemon.log")
	cmd, err := startServeProc(s.bin, p.config, logPath)
	if err != nil {
		return err
	}
	p.cmd = cmd
	if sock, ok := waitSockets(p.sockets, 30*time.Second); !ok {
		return fmt.Errorf("daemon socket %s did not appear in 30s (log %s)", sock, logPath)
	}
	return nil
}

// restartInitiator SIGKILLs the initiator's daemon and starts it again on
// the same config: QEMU reconnects and the new back-end resubmits what
// was in flight.
func (s *soakDaemons) restartInitiator() error {
	p := s.procs[0]
	p.cmd.Process.Kill()
	p.cmd.Wait()
	for _, sock := range p.sockets {
		os.Remove(sock)
	}
	time.Sleep(2 * time.Second)
	return s.start(p)
}

func (s *soakDaemons) stop() {
	for _, p := range s.procs {
		if p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	}
}

// logLines returns the daemons' log lines that contain word (the logs
// live in the soak's temporary directory, gone when it ends).
func (s *soakDaemons) logLines(word string) []string {
	var out []string
	for _, p := range s.procs {
		b, _ := os.ReadFile(filepath.Join(p.dir, "daemon.log"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, word) {
				out = append(out, l)
			}
		}
	}
	return out
}

// status asks p's daemon for its status (10 s at most).
func (p *soakProc) status(ctx context.Context) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var raw json.RawMessage
	err := control.Call(ctx, filepath.Join(p.dir, "control.sock"), "status", nil, &raw)
	return raw, err
}

// statusJSON is every daemon's status, for a stall report.
func (s *soakDaemons) statusJSON(ctx context.Context) string {
	var b strings.Builder
	for _, p := range s.procs {
		raw, err := p.status(ctx)
		if err != nil {
			fmt.Fprintf(&b, "daemon %s: %v\n", p.dir, err)
			continue
		}
		var v any
		json.Unmarshal(raw, &v)
		out, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintf(&b, "daemon %s:\n%s\n", p.dir, out)
	}
	return b.String()
}

// addCounters adds the daemons' soakCounters (disks' vhost-user counters,
// ports' counters) to sum.
func (s *soakDaemons) addCounters(ctx context.Context, sum map[string]uint64) {
	for _, p := range s.procs {
		raw, err := p.status(ctx)
		if err != nil {
			continue
		}
		var st struct {
			NICs []struct {
				Falcon *struct {
					Counters map[string]uint64 `json:"counters"`
				} `json:"falcon_port"`
			} `json:"nics"`
			NVMe *struct {
				Disks []struct {
					VhostUser map[string]uint64 `json:"vhost_user"`
				} `json:"disks"`
			} `json:"nvme"`
		}
		if json.Unmarshal(raw, &st) != nil {
			continue
		}
		var maps []map[string]uint64
		for _, n := range st.NICs {
			if n.Falcon != nil {
				maps = append(maps, n.Falcon.Counters)
			}
		}
		if st.NVMe != nil {
			for _, d := range st.NVMe.Disks {
				maps = append(maps, d.VhostUser)
			}
		}
		for _, m := range maps {
			for _, k := range soakCounters {
				sum[k] += m[k]
			}
			if v := m["port_timer_late_max_us"]; v > sum["port_timer_late_max_us"] {
				sum["port_timer_late_max_us"] = v // a high-water mark: the largest
			}
		}
	}
}
