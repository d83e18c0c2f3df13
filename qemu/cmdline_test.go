package qemu

import (
	"strings"
	"testing"
)

func base() Machine {
	return Machine{Name: "A", Kernel: "/k/vmlinuz", Initrd: "/k/initramfs.cpio", ConsoleLog: "/s/A/console.log", AgentSock: "/s/A/agent.sock"}
}

func TestArgsDefaultsAreTheFastTCGMachine(t *testing.T) {
	a, err := base().Args()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a, " ")
	for _, want := range []string{
		"-accel tcg",
		"-machine q35,memory-backend=mem",
		"-object memory-backend-memfd,id=mem,size=1024M,share=on",
		"-m 1024M",
		"-smp 1,maxcpus=2",
		"-cpu qemu64",
		"-nographic -nodefaults -no-reboot",
		"-serial file:/s/A/console.log",
		"-chardev socket,id=agent,path=/s/A/agent.sock,server=on,wait=off",
		"-device virtserialport,chardev=agent,name=falconnic.agent",
		"-append console=ttyS0 panic=-1 loglevel=4 tsc=reliable no_timer_check falconnic.hostname=A",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
}

func TestArgsVhostUserNICHasVectorsZeroAndReconnect(t *testing.T) {
	m := base()
	m.NICs = []NIC{{VhostUser: "/run/fn/a0.sock", MAC: "52:54:00:00:00:0A", CIDR: "10.0.0.1/24", MTU: 9000}}
	a, err := m.Args()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a, " ")
	for _, want := range []string{
		"-chardev socket,id=cn0,path=/run/fn/a0.sock,reconnect=1",
		"-netdev vhost-user,id=n0,chardev=cn0",
		"-device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0a,vectors=0,romfile=",
		"falconnic.net=52:54:00:00:00:0a,10.0.0.1/24,mtu=9000",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
}

// QEMU 7.2 refuses a vhost-user-vsock device whose chardev has reconnect=
// ("vhost_backend_init failed: Protocol error"), so the vsock chardev is a
// plain client socket while NICs and disks keep reconnect=1.
func TestArgsVsockChardevHasNoReconnect(t *testing.T) {
	m := base()
	m.Vsock = &Vsock{VhostUser: "/run/fn/vs0.sock", UDS: "/run/fn/vs0.uds"}
	m.NICs = []NIC{{VhostUser: "/run/fn/a0.sock", MAC: "52:54:00:00:00:0a"}}
	a, err := m.Args()
	if err != nil {
		t.Fatal(err)
	}
	var vsockChardev string
	for i, s := range a {
		if s == "-chardev" && i+1 < len(a) && strings.Contains(a[i+1], "id=cvsock,") {
			vsockChardev = a[i+1]
		}
	}
	if vsockChardev != "socket,id=cvsock,path=/run/fn/vs0.sock" {
		t.Errorf("vsock chardev = %q, want a plain client socket without reconnect=", vsockChardev)
	}
	got := strings.Join(a, " ")
	for _, want := range []string{
		"-device vhost-user-vsock-pci,chardev=cvsock",
		"-chardev socket,id=cn0,path=/run/fn/a0.sock,reconnect=1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
}

func TestArgsMultiqueueNIC(t *testing.T) {
	m := base()
	m.CPUs = 2
	m.NICs = []NIC{{VhostUser: "/run/fn/a0.sock", MAC: "52:54:00:00:00:0a", Queues: 2}}
	a, err := m.Args()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a, " ")
	for _, want := range []string{
		"-netdev vhost-user,id=n0,chardev=cn0,queues=2",
		"-device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0a,mq=on,vectors=0,romfile=",
		"-smp 2,maxcpus=2",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	m.NICs[0].Queues = 17
	if _, err := m.Args(); err == nil {
		t.Error("17 queue pairs accepted")
	}
}

func TestArgsStreamLinkAndBigMemory(t *testing.T) {
	m := base()
	m.MemMiB = 3072
	m.NICs = []NIC{{Stream: "/s/link.sock", StreamServer: true}, {Stream: "/s/other.sock"}}
	m.Disks = []Disk{{VhostUserBlk: "/run/fn/blk.sock"}}
	a, err := m.Args()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a, " ")
	for _, want := range []string{
		"size=3072M,share=on", "-m 3072M",
		"-netdev stream,id=n0,server=on,addr.type=unix,addr.path=/s/link.sock",
		"-netdev stream,id=n1,server=off,addr.type=unix,addr.path=/s/other.sock",
		"-device virtio-net-pci,netdev=n0,mac=" + DefaultMAC("A", 0),
		"-device vhost-user-blk-pci,chardev=cd0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
}

func TestArgsRejectBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Machine)
	}{
		{"bad name", func(m *Machine) { m.Name = "a b" }},
		{"no kernel", func(m *Machine) { m.Kernel = "" }},
		{"comma in path", func(m *Machine) { m.Initrd = "/x,y" }},
		{"tiny memory", func(m *Machine) { m.MemMiB = 16 }},
		{"NIC without backend", func(m *Machine) { m.NICs = []NIC{{}} }},
		{"NIC with both", func(m *Machine) { m.NICs = []NIC{{VhostUser: "/a", Stream: "/b"}} }},
		{"bad MAC", func(m *Machine) { m.NICs = []NIC{{VhostUser: "/a", MAC: "zz"}} }},
		{"multicast MAC", func(m *Machine) { m.NICs = []NIC{{VhostUser: "/a", MAC: "01:00:5e:00:00:01"}} }},
		{"bad CIDR", func(m *Machine) { m.NICs = []NIC{{VhostUser: "/a", CIDR: "10.0.0.1"}} }},
		{"bad MTU", func(m *Machine) { m.NICs = []NIC{{VhostUser: "/a", MTU: 20}} }},
		{"space in kernel arg", func(m *Machine) { m.Append = []string{"a b"} }},
	} {
		m := base()
		c.edit(&m)
		if _, err := m.Args(); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func TestDefaultMACIsStableUnicastAndLocal(t *testing.T) {
	a, b := DefaultMAC("A", 0), DefaultMAC("A", 1)
	if a == b || a != DefaultMAC("A", 0) {
		t.Fatalf("DefaultMAC not stable and distinct: %s %s", a, b)
	}
	if !strings.HasPrefix(a, "52:54:") {
		t.Fatalf("DefaultMAC %s is not in 52:54:..", a)
	}
}

func TestArgsMaxCPUsOverride(t *testing.T) {
	for _, c := range []struct {
		cpus, maxcpus int
		want          string
	}{
		{1, 0, "-smp 1,maxcpus=2"},
		{1, 1, "-smp 1,maxcpus=1"},
		{1, 2, "-smp 1,maxcpus=2"},
		{2, 4, "-smp 2,maxcpus=4"},
	} {
		m := base()
		m.CPUs, m.MaxCPUs = c.cpus, c.maxcpus
		a, err := m.Args()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(a, " "); !strings.Contains(got, c.want) {
			t.Errorf("cpus %d maxcpus %d: args lack %q:\n%s", c.cpus, c.maxcpus, c.want, got)
		}
	}
	for _, bad := range []struct{ cpus, maxcpus int }{{2, 1}, {1, 65}, {1, -1}} {
		m := base()
		m.CPUs, m.MaxCPUs = bad.cpus, bad.maxcpus
		if _, err := m.Args(); err == nil {
			t.Errorf("cpus %d maxcpus %d accepted", bad.cpus, bad.maxcpus)
		}
	}
}
