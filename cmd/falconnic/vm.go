package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"falconnic/guest/agentproto"
	"falconnic/qemu"
)

func init() {
	register("vm", "guest VMs: vm run|ls|stop|exec|litmus (see `falconnic vm help`)", runVM)
}

const vmUsage = `usage:
  falconnic vm run --name NAME [--nic SOCK[,mac=M][,ip=CIDR][,mtu=N][,queues=Q]]...
                   [--net-stream SOCK[,mac=M][,ip=CIDR][,server=on|off]]...
                   [--disk SOCK[,queues=N] | --disk file=PATH[,serial=S][,intx=on]]...
                   [--vsock SOCK[,uds=BRIDGE]]
                   [--mem 1G] [--cpus 1] [--timeout 3m]
                   [-- CMD ARGS...]
      boot, wait until ready; with CMD run it in the guest, print its output
      and power off; without CMD keep running until interrupted. Each
      --disk is a vhost-user-blk disk the daemon serves at SOCK (nvme.disks
      in its config) or, with file=, QEMU's own virtio-blk on a host file
      (intx=on: no MSI-X vectors, the PCI pin's level interrupt);
      /dev/vda, /dev/vdb, ... in the guest in flag order
  falconnic vm ls                      list VMs (their NICs and disks)
  falconnic vm stop NAME               stop a VM (a stopped one: forget it)
  falconnic vm exec NAME [--stdin] [--timeout D] [--via serial|vsock|diag] -- CMD ARGS...
      run a command in a running VM (--via diag: through the agent's
      diagnosis port, while another command holds its main channel)
  falconnic vm litmus [--maxcpus N] [--test peterson|sb] [--rounds N] [--spread N] [--timeout D] [--mem 1G] [--name NAME]
      boot a guest and play a store→load ordering litmus between a guest
      vCPU and a host thread over one page of guest RAM: Peterson's lock
      (violations, lost increments) or the store-buffering test (rounds in
      which both sides load the other's old value). With --maxcpus 1 QEMU
      7.2's TCG drops the guest's barriers; the default (maxcpus 2) keeps them
common flags: --cache DIR (guest image cache), --state DIR (VM state)`

func runVM(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: falconnic vm run|ls|stop|exec|litmus", errUsage)
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "run":
		return vmRun(ctx, rest, stdout, stderr)
	case "ls":
		return vmList(rest, stdout, stderr)
	case "stop":
		return vmStop(rest, stdout, stderr)
	case "exec":
		return vmExec(ctx, rest, stdout, stderr)
	case "litmus":
		return vmLitmus(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, vmUsage)
		return nil
	}
	return fmt.Errorf("%w: unknown vm command %q", errUsage, sub)
}

// vmFlags are the flags every vm subcommand takes.
type vmFlags struct {
	fs    *flag.FlagSet
	state *string
	cache *string
}

func newVMFlags(name string, stderr io.Writer) vmFlags {
	fs := flag.NewFlagSet("vm "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return vmFlags{
		fs:    fs,
		state: fs.String("state", qemu.DefaultStateDir(), "VM state directory"),
		cache: fs.String("cache", qemu.DefaultCacheDir(), "guest image cache"),
	}
}

func (f vmFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// nicFlag collects --nic and --net-stream values.
type nicFlag struct {
	nics   *[]qemu.NIC
	stream bool
}

func (n nicFlag) String() string { return "" }

func (n nicFlag) Set(s string) error {
	parts := strings.Split(s, ",")
	nic := qemu.NIC{}
	if parts[0] == "" {
		return errors.New("missing socket path")
	}
	if n.stream {
		nic.Stream = parts[0]
	} else {
		nic.VhostUser = parts[0]
	}
	serverSet := false
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("option %q is not KEY=VALUE", p)
		}
		switch {
		case k == "mac":
			nic.MAC = v
		case k == "ip":
			nic.CIDR = v
		case k == "mtu":
			m, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("bad mtu %q", v)
			}
			nic.MTU = m
		case k == "queues" && !n.stream:
			q, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("bad queues %q", v)
			}
			nic.Queues = q
		case k == "server" && n.stream:
			nic.StreamServer, serverSet = v == "on", true
		default:
			return fmt.Errorf("unknown option %q", k)
		}
	}
	if n.stream && !serverSet {
		// The first VM on a link listens; the second finds the socket.
		fi, err := os.Stat(nic.Stream)
		nic.StreamServer = err != nil || fi.Mode()&os.ModeSocket == 0
	}
	*n.nics = append(*n.nics, nic)
	return nil
}

// diskFlag collects --disk values: SOCK[,queues=N] (a vhost-user-blk disk
// the daemon serves) or file=PATH[,serial=S] (QEMU's own virtio-blk on a
// host file: a baseline beside ours, or a guest without any device of ours).
type diskFlag struct{ disks *[]qemu.Disk }

func (d diskFlag) String() string { return "" }

func (d diskFlag) Set(s string) error {
	sock, opts, _ := strings.Cut(s, ",")
	if sock == "" {
		return errors.New("missing socket path")
	}
	if path, ok := strings.CutPrefix(sock, "file="); ok {
		disk := qemu.Disk{File: path}
		for opts != "" {
			var p string
			p, opts, _ = strings.Cut(opts, ",")
			k, v, ok := strings.Cut(p, "=")
			switch {
			case ok && k == "serial":
				disk.Serial = v
			case ok && k == "intx" && (v == "on" || v == "off"):
				disk.INTx = v == "on"
			default:
				return fmt.Errorf("unknown option %q (want file=PATH[,serial=S][,intx=on|off])", p)
			}
		}
		if path == "" {
			return errors.New("missing file path")
		}
		*d.disks = append(*d.disks, disk)
		return nil
	}
	disk := qemu.Disk{VhostUserBlk: sock}
	for opts != "" {
		var p string
		p, opts, _ = strings.Cut(opts, ",")
		k, v, ok := strings.Cut(p, "=")
		if !ok || k != "queues" {
			return fmt.Errorf("unknown option %q (want SOCK[,queues=N])", p)
		}
		q, err := strconv.Atoi(v)
		if err != nil || q < 1 || q > qemu.MaxDiskQueues {
			return fmt.Errorf("bad queues %q (1..%d)", v, qemu.MaxDiskQueues)
		}
		disk.Queues = q
	}
	*d.disks = append(*d.disks, disk)
	return nil
}

// checkDiskSockets fails early, with the daemon named, when a --disk
// socket is missing or nobody accepts on it (a daemon that died leaves
// its socket file behind).
func checkDiskSockets(disks []qemu.Disk) error {
	for _, d := range disks {
		if d.File != "" {
			if fi, err := os.Stat(d.File); err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("--disk file=%s: not a regular file", d.File)
			}
			continue
		}
		fi, err := os.Stat(d.VhostUserBlk)
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("--disk %s: no vhost-user-blk socket there; is `falconnic serve` running with this disk in its config (nvme.disks[].socket)?", d.VhostUserBlk)
		}
		c, err := net.DialTimeout("unix", d.VhostUserBlk, 2*time.Second)
		if err != nil {
			return fmt.Errorf("--disk %s: nobody serves this socket (%v); is `falconnic serve` running?", d.VhostUserBlk, err)
		}
		c.Close()
	}
	return nil
}

// parseMem reads 1G, 1536M or a plain number of MiB.
func parseMem(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1024, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		s = strings.TrimSuffix(s, "M")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad memory size %q (want e.g. 1G or 1536M)", s)
	}
	return n * mult, nil
}

func vmRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newVMFlags("run", stderr)
	name := f.fs.String("name", "", "VM name (required)")
	mem := f.fs.String("mem", "1G", "guest memory")
	cpus := f.fs.Int("cpus", qemu.DefaultCPUs, "guest CPUs")
	timeout := f.fs.Duration("timeout", 3*time.Minute, "how long to wait for the guest to be ready")
	var nics []qemu.NIC
	var disks []qemu.Disk
	f.fs.Var(diskFlag{&disks}, "disk", "falconnic vhost-user-blk disk: SOCK[,queues=N] (the daemon must serve SOCK), or QEMU's virtio-blk on a host file: file=PATH[,serial=S][,intx=on] (repeatable)")
	vsock := f.fs.String("vsock", "", "vhost-user-vsock device: SOCK[,uds=BRIDGE] (the daemon's; with uds, vm exec uses vsock)")
	f.fs.Var(nicFlag{&nics, false}, "nic", "falconnic NIC: vhost-user SOCK[,mac=M][,ip=CIDR][,mtu=N][,queues=Q] (repeatable)")
	f.fs.Var(nicFlag{&nics, true}, "net-stream", "plain QEMU stream link SOCK[,mac=M][,ip=CIDR][,server=on|off] (repeatable)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *name == "" {
		return fmt.Errorf("%w: vm run needs --name", errUsage)
	}
	memMiB, err := parseMem(*mem)
	if err != nil {
		return err
	}
	if err := checkDiskSockets(disks); err != nil {
		return err
	}
	im, err := qemu.LoadImage(*f.cache)
	if err != nil {
		return err
	}
	m := qemu.Machine{Name: *name, Kernel: im.KernelPath(), Initrd: im.InitrdPath(), MemMiB: memMiB, CPUs: *cpus, NICs: nics, Disks: disks}
	if *vsock != "" {
		sock, opt, _ := strings.Cut(*vsock, ",")
		m.Vsock = &qemu.Vsock{VhostUser: sock}
		if opt != "" {
			uds, ok := strings.CutPrefix(opt, "uds=")
			if !ok || uds == "" {
				return fmt.Errorf("%w: --vsock SOCK[,uds=BRIDGE]", errUsage)
			}
			m.Vsock.UDS = uds
		}
	}
	vm, err := qemu.Start(*f.state, m)
	if err != nil {
		return err
	}
	defer vm.Stop()
	fmt.Fprintf(stderr, "vm %s: booting (console: %s)\n", *name, vm.ConsoleLog())
	start := time.Now()
	if err := vm.WaitReady(ctx, *timeout); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "vm %s: ready in %.1fs\n", *name, time.Since(start).Seconds())
	if cmd := f.fs.Args(); len(cmd) > 0 {
		return execIn(ctx, vm, "", cmd, nil, stdout, stderr)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintf(stderr, "vm %s: stopping\n", *name)
	case <-vm.Exited():
		// `vm stop` from elsewhere, or the guest powered off.
		fmt.Fprintf(stderr, "vm %s: QEMU exited (%s)\n", *name, vm.QEMULog())
	}
	return nil
}

func vmList(args []string, stdout, stderr io.Writer) error {
	f := newVMFlags("ls", stderr)
	if err := f.parse(args); err != nil {
		return err
	}
	vms, err := qemu.List(*f.state)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%-12s %-8s %-8s %s\n", "NAME", "STATE", "PID", "NICS, DISKS")
	for _, v := range vms {
		state, pidS := "stopped", "-"
		if pid, alive := v.Pid(); alive {
			state, pidS = "running", strconv.Itoa(pid)
		}
		var nics []string
		if m, err := v.Machine(); err == nil {
			for _, n := range m.NICs {
				desc := n.VhostUser
				if n.Stream != "" {
					desc = "stream:" + n.Stream
				}
				if n.CIDR != "" {
					desc += "," + n.CIDR
				}
				nics = append(nics, desc)
			}
			for _, d := range m.Disks {
				desc := "disk:" + d.VhostUserBlk
				if d.File != "" {
					desc = "disk:file:" + d.File
				}
				nics = append(nics, desc)
			}
		}
		fmt.Fprintf(stdout, "%-12s %-8s %-8s %s\n", v.Name, state, pidS, strings.Join(nics, " "))
	}
	return nil
}

func vmStop(args []string, stdout, stderr io.Writer) error {
	f := newVMFlags("stop", stderr)
	// NAME may come before or after the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := f.parse(args); err != nil {
		return err
	}
	if name == "" && f.fs.NArg() == 1 {
		name = f.fs.Arg(0)
	} else if name == "" || f.fs.NArg() != 0 {
		return fmt.Errorf("%w: falconnic vm stop NAME", errUsage)
	}
	vm, err := qemu.Lookup(*f.state, name)
	if err != nil {
		return err
	}
	if _, alive := vm.Pid(); !alive {
		// Already stopped: forget it, so vm ls stops listing it.
		if err := os.RemoveAll(vm.Dir); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "vm %s was not running; removed its state\n", vm.Name)
		return nil
	}
	return vm.Stop()
}

func vmExec(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%w: falconnic vm exec NAME [--stdin] [--timeout D] -- CMD ARGS...", errUsage)
	}
	name := args[0]
	f := newVMFlags("exec", stderr)
	useStdin := f.fs.Bool("stdin", false, "send this process's standard input to the command")
	timeout := f.fs.Duration("timeout", 0, "the command's deadline: past it a stall report is printed and the command is killed (0: fio's run time plus a margin, else "+defaultExecLimit.String()+")")
	via := f.fs.String("via", "", "agent transport: serial, vsock, or diag (the agent's diagnosis port, free while another command holds its main channel) (default: vsock when the VM has a vsock bridge)")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	if f.fs.NArg() == 0 {
		return fmt.Errorf("%w: vm exec needs a command after --", errUsage)
	}
	vm, err := qemu.Lookup(*f.state, name)
	if err != nil {
		return err
	}
	if _, alive := vm.Pid(); !alive {
		return fmt.Errorf("vm %s is not running", name)
	}
	if *timeout < 0 {
		return fmt.Errorf("%w: --timeout must not be negative", errUsage)
	}
	var in io.Reader
	if *useStdin {
		in = os.Stdin
	}
	return execSpecIn(ctx, vm, f.fs.Args(), execSpec{via: *via, stdin: in, limit: *timeout}, stdout, stderr)
}

// hello opens the agent session. A Hello can be lost on a virtio-serial
// port (bytes a guest had received before closing the port are discarded),
// so it is sent again, with a fresh nonce, after helloWait without an
// answer; the agent answers every Hello and the client takes only the
// Ready that echoes the latest nonce.
func hello(c *agentproto.Client, conn net.Conn) error {
	const helloWait, tries = 10 * time.Second, 4
	var err error
	for i := 0; i < tries; i++ {
		var nb [8]byte
		rand.Read(nb[:])
		conn.SetDeadline(time.Now().Add(helloWait))
		_, err = c.Hello(binary.LittleEndian.Uint64(nb[:]))
		if err == nil {
			conn.SetDeadline(time.Time{})
			return nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
	}
	return err
}

// guestExit is a guest command's non-zero exit status.
type guestExit struct {
	code int
	err  error
}

func (g *guestExit) Error() string { return g.err.Error() }

// ExitCode is the guest command's exit status.
func (g *guestExit) ExitCode() int { return g.code }
