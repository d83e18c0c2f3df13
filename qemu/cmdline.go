package qemu

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Machine defaults, the fastest under TCG on our hosts.
const (
	DefaultMemMiB = 1024
	DefaultCPUs   = 1
	DefaultCPU    = "qemu64"
	// AgentPortName is the virtio-serial port the guest agent serves.
	AgentPortName = "falconnic.agent"
	// DiagPortName is the agent's second virtio-serial port, kept for
	// diagnosis: a command running on the first cannot block it.
	DiagPortName = "falconnic.diag"
	// ReadyMarker is what guest/uinit prints on the console when the guest
	// is ready (it must match guest/uinit.ReadyMarker).
	ReadyMarker = "FALCONNIC-GUEST-READY"
)

// NIC is one guest network interface.
type NIC struct {
	// VhostUser is the path of a falconnic NIC's vhost-user socket (QEMU
	// connects as client, reconnecting every second if it goes away).
	VhostUser string
	// Stream is the path of a unix socket for a plain QEMU stream link
	// between two guests: the baseline without falconnic. With
	// StreamServer QEMU listens there, else it connects.
	Stream       string
	StreamServer bool
	MAC          string // empty: derived from the machine name and index
	CIDR         string // guest address, e.g. 10.0.0.1/24; empty: none
	MTU          int    // 0: the device default
	// Queues is the number of vhost-user queue pairs (0 or 1: one); more
	// turns on virtio-net multiqueue (the guest uses at most one per CPU).
	Queues int
}

// Disk is one guest disk: a falconnic vhost-user-blk disk (VhostUserBlk)
// or, as the baseline without falconnic, a raw file QEMU serves itself
// through virtio-blk (File).
type Disk struct {
	VhostUserBlk string // vhost-user-blk socket path
	// Queues is the number of vhost-user-blk virtqueues (0 or 1: one);
	// it must not exceed the daemon disk's queues.
	Queues int
	// File is a raw image QEMU opens itself (cache=none, aio=native).
	File string
	// Serial is the local disk's serial (/sys/block/vdX/serial); a
	// vhost-user-blk disk's serial is the daemon's.
	Serial string
	// INTx gives the disk no MSI-X vectors (vectors=0): its interrupts are
	// the PCI pin's, level-triggered through the IOAPIC.
	INTx bool
}

// Vsock is a vhost-user-vsock device served by the daemon.
type Vsock struct {
	VhostUser string // the device's vhost-user socket (QEMU connects)
	UDS       string // the daemon's hybrid bridge socket for host clients ("": none)
}

// Machine describes one guest.
type Machine struct {
	Name   string
	Kernel string
	Initrd string
	MemMiB int // default DefaultMemMiB
	CPUs   int // default DefaultCPUs
	// MaxCPUs overrides -smp's maxcpus (0: smpArg's max(CPUs, 2)). Only
	// `falconnic vm litmus --maxcpus 1` sets it, to show what a machine
	// with one possible vCPU does to the guest's barriers.
	MaxCPUs    int
	CPU        string
	NICs       []NIC
	Disks      []Disk
	Vsock      *Vsock
	ConsoleLog string // serial console file
	AgentSock  string // host end of the agent's virtio-serial port
	DiagSock   string // host end of the agent's diagnosis port (needs AgentSock)
	QMPSock    string // QEMU's QMP monitor socket
	PidFile    string
	Append     []string // more kernel parameters
}

// DefaultMAC derives a stable, locally administered MAC for NIC index of
// the machine called name.
func DefaultMAC(name string, index int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", name, index)))
	return fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", h[0], h[1], h[2], h[3])
}

// validName allows names that are safe in paths, QEMU ids and the kernel
// command line.
func validName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// unsafeOpt reports characters QEMU's option parser would split on.
func unsafeOpt(s string) bool { return strings.ContainsAny(s, ", \t\n") }

// withDefaults fills in defaults.
func (m Machine) withDefaults() Machine {
	if m.MemMiB == 0 {
		m.MemMiB = DefaultMemMiB
	}
	if m.CPUs == 0 {
		m.CPUs = DefaultCPUs
	}
	if m.CPU == "" {
		m.CPU = DefaultCPU
	}
	nics := make([]NIC, len(m.NICs))
	copy(nics, m.NICs)
	for i := range nics {
		if nics[i].MAC == "" {
			nics[i].MAC = DefaultMAC(m.Name, i)
		}
	}
	m.NICs = nics
	return m
}

// Args returns QEMU's arguments (without the program name) for m.
func (m Machine) Args() ([]string, error) {
	m = m.withDefaults()
	if !validName(m.Name) {
		return nil, fmt.Errorf("machine name %q: use 1-32 letters, digits, '-' or '_'", m.Name)
	}
	if m.Kernel == "" || m.Initrd == "" {
		return nil, errors.New("machine needs a kernel and an initrd")
	}
	if m.MemMiB < 128 || m.MemMiB > 64<<10 {
		return nil, fmt.Errorf("memory %d MiB out of range", m.MemMiB)
	}
	if m.CPUs < 1 || m.CPUs > 64 {
		return nil, fmt.Errorf("%d CPUs out of range", m.CPUs)
	}
	if m.MaxCPUs != 0 && (m.MaxCPUs < m.CPUs || m.MaxCPUs > 64) {
		return nil, fmt.Errorf("maxcpus %d out of range %d..64", m.MaxCPUs, m.CPUs)
	}
	for _, p := range []string{m.Kernel, m.Initrd, m.ConsoleLog, m.AgentSock, m.DiagSock, m.QMPSock, m.PidFile} {
		if unsafeOpt(p) {
			return nil, fmt.Errorf("path %q has a comma or space, which QEMU options cannot carry", p)
		}
	}
	mem := strconv.Itoa(m.MemMiB) + "M"
	a := []string{
		// debug-threads: QEMU's threads carry their role in their names
		// (CPU 0/TCG, worker), which a stall report shows.
		"-name", m.Name + ",debug-threads=on",
		"-accel", "tcg",
		"-machine", "q35,memory-backend=mem",
		"-object", "memory-backend-memfd,id=mem,size=" + mem + ",share=on",
		"-m", mem,
		"-smp", smpArg(m.CPUs, m.MaxCPUs),
		"-cpu", m.CPU,
		"-nographic", "-nodefaults", "-no-reboot",
		"-kernel", m.Kernel,
		"-initrd", m.Initrd,
	}
	if m.ConsoleLog != "" {
		a = append(a, "-serial", "file:"+m.ConsoleLog)
	}
	if m.PidFile != "" {
		a = append(a, "-pidfile", m.PidFile)
	}
	// tsc=reliable: the guest keeps the TSC as its clocksource. qemu64 is an
	// AMD model without constant_tsc, whose TSC Linux takes for
	// unsynchronized as soon as more than one CPU is possible (smpArg gives
	// every guest two), and the clocksource watchdog marks it unstable
	// whenever the loaded host delays a read; either way the guest falls
	// back to the HPET, every clock read becomes an exit to QEMU, and
	// perftest's own CPU-frequency calibration (TSC against gettimeofday)
	// fails. TCG's TSC follows the host's clock: it is reliable.
	// no_timer_check: at boot Linux checks that the timer interrupt reaches
	// the CPU through the IO-APIC within a few ticks of a busy loop; under
	// TCG on a loaded host the vCPU runs too slowly for that, and the guest
	// panics with "IO-APIC + timer doesn't work!" (seen once in 12 boots at
	// host load 12-22). The timer works; the check's timing does not.
	kargs := []string{"console=ttyS0", "panic=-1", "loglevel=4", "tsc=reliable", "no_timer_check", "falconnic.hostname=" + m.Name}
	for i, n := range m.NICs {
		id := fmt.Sprintf("n%d", i)
		hw, err := net.ParseMAC(n.MAC)
		if err != nil || len(hw) != 6 {
			return nil, fmt.Errorf("NIC %d: bad MAC %q", i, n.MAC)
		}
		if hw[0]&1 != 0 {
			return nil, fmt.Errorf("NIC %d: MAC %s is multicast", i, n.MAC)
		}
		mac := hw.String()
		switch {
		case n.VhostUser != "" && n.Stream != "":
			return nil, fmt.Errorf("NIC %d: both a vhost-user socket and a stream link", i)
		case n.VhostUser != "":
			if unsafeOpt(n.VhostUser) {
				return nil, fmt.Errorf("NIC %d: socket path %q has a comma or space", i, n.VhostUser)
			}
			if n.Queues < 0 || n.Queues > 16 {
				return nil, fmt.Errorf("NIC %d: %d queue pairs out of range 1..16", i, n.Queues)
			}
			netdev, mq := "vhost-user,id="+id+",chardev=c"+id, ""
			if n.Queues > 1 {
				netdev += ",queues=" + strconv.Itoa(n.Queues)
				mq = ",mq=on"
			}
			a = append(a,
				"-chardev", "socket,id=c"+id+",path="+n.VhostUser+",reconnect=1",
				"-netdev", netdev,
				// vectors=0: QEMU 7.2 segfaults on vhost-user-net with
				// MSI-X under TCG.
				// romfile=: no iPXE option ROM, which only slows the boot.
				"-device", "virtio-net-pci,netdev="+id+",mac="+mac+mq+",vectors=0,romfile=")
		case n.Stream != "":
			if unsafeOpt(n.Stream) {
				return nil, fmt.Errorf("NIC %d: socket path %q has a comma or space", i, n.Stream)
			}
			server := "off"
			if n.StreamServer {
				server = "on"
			}
			a = append(a,
				"-netdev", "stream,id="+id+",server="+server+",addr.type=unix,addr.path="+n.Stream,
				"-device", "virtio-net-pci,netdev="+id+",mac="+mac+",romfile=")
		default:
			return nil, fmt.Errorf("NIC %d: neither a vhost-user socket nor a stream link", i)
		}
		karg := "falconnic.net=" + mac
		if n.CIDR != "" {
			if _, _, err := net.ParseCIDR(n.CIDR); err != nil {
				return nil, fmt.Errorf("NIC %d: %v", i, err)
			}
			karg += "," + n.CIDR
		}
		if n.MTU != 0 {
			if n.MTU < 68 || n.MTU > 65535 {
				return nil, fmt.Errorf("NIC %d: MTU %d out of range", i, n.MTU)
			}
			karg += ",mtu=" + strconv.Itoa(n.MTU)
		}
		kargs = append(kargs, karg)
	}
	for i, d := range m.Disks {
		da, err := d.args(fmt.Sprintf("d%d", i))
		if err != nil {
			return nil, fmt.Errorf("disk %d: %w", i, err)
		}
		a = append(a, da...)
	}
	if m.Vsock != nil {
		if m.Vsock.VhostUser == "" || unsafeOpt(m.Vsock.VhostUser) {
			return nil, fmt.Errorf("vsock: bad vhost-user socket path %q", m.Vsock.VhostUser)
		}
		// The guest CID is the backend's (config space), not QEMU's.
		// No reconnect=: QEMU 7.2's vhost-user-vsock realize fails with
		// it ("Failed to set msg fds", vhost_backend_init: protocol
		// error), and the device does not recover from a dropped
		// connection anyway (vsock stays dead until QEMU restarts).
		a = append(a,
			"-chardev", "socket,id=cvsock,path="+m.Vsock.VhostUser,
			"-device", "vhost-user-vsock-pci,chardev=cvsock")
	}
	if m.AgentSock != "" {
		a = append(a,
			"-device", "virtio-serial-pci",
			"-chardev", "socket,id=agent,path="+m.AgentSock+",server=on,wait=off",
			"-device", "virtserialport,chardev=agent,name="+AgentPortName)
		if m.DiagSock != "" {
			a = append(a,
				"-chardev", "socket,id=diag,path="+m.DiagSock+",server=on,wait=off",
				"-device", "virtserialport,chardev=diag,name="+DiagPortName)
		}
	}
	if m.QMPSock != "" {
		a = append(a, "-qmp", "unix:"+m.QMPSock+",server=on,wait=off")
	}
	for _, k := range m.Append {
		if strings.ContainsAny(k, " \t\n") {
			return nil, fmt.Errorf("kernel parameter %q has a space", k)
		}
	}
	kargs = append(kargs, m.Append...)
	a = append(a, "-append", strings.Join(kargs, " "))
	return a, nil
}

// smpArg is -smp for n online vCPUs. maxcpus is at least 2, whatever n:
// QEMU 7.2's TCG translates a machine whose max_cpus is 1 without
// CF_PARALLEL (accel/tcg/tcg-accel-ops-mttcg.c: tcg_cpu_init_cflags), and
// then drops the guest's memory barriers (tcg/tcg-op.c: tcg_gen_mb emits
// nothing) and runs its LOCK-prefixed instructions as plain loads and
// stores. The guest's smp_mb() between writing a ring's used_event and
// re-reading its used idx is then no barrier on the host, whose store
// buffer lets the load pass the store, while the device — QEMU's main loop
// for its own virtio-blk, our daemon for a vhost-user device — runs on
// another host thread: each side misses the other's update and the
// completion interrupt is never sent (the bench nvme / soak stalls). A
// second, offline, possible vCPU makes TCG translate with CF_PARALLEL.
// maxcpus, when not 0, is taken as it is (Machine.MaxCPUs).
func smpArg(n, maxcpus int) string {
	if maxcpus == 0 {
		maxcpus = max(n, 2)
	}
	return strconv.Itoa(n) + ",maxcpus=" + strconv.Itoa(maxcpus)
}
