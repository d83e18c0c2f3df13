// Command uinit is the falconnic guest's first job, run by u-root's init.
//
// It mounts what is missing, turns off IPv6 duplicate-address detection,
// loads the kernel modules listed in /etc/falconnic/modules in order (u-root
// has no modprobe, so the image builder resolves dependencies), sets the
// hostname and each NIC's address from the kernel command line, starts the
// agent and prints the readiness marker on the console. Then it keeps the
// agent running.
//
// Kernel command line parameters:
//
//	falconnic.hostname=NAME
//	falconnic.net=MAC,CIDR[,mtu=N]   once per NIC, matched by MAC
//	falconnic.ip=CIDR                address of the first NIC (eth0)
//	falconnic.noload=MOD[,MOD...]    do not load these modules (names without
//	                                 .ko, e.g. falconnic for a Soft-RoCE guest)
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// ReadyMarker is printed on the console when the guest is ready; the host
// (package qemu) waits for it.
const ReadyMarker = "FALCONNIC-GUEST-READY"

// modulesList holds the module files to load, one per line, in order.
const modulesList = "/etc/falconnic/modules"

func main() {
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Printf("falconnic-init: [%5.2fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	os.Setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin:/bbin")
	mountAll(logf)
	cmdline, _ := os.ReadFile("/proc/cmdline")
	cfg, errs := parseCmdline(string(cmdline))
	for _, err := range errs {
		logf("kernel command line: %v", err)
	}
	for _, p := range []string{"all", "default"} {
		os.WriteFile("/proc/sys/net/ipv6/conf/"+p+"/accept_dad", []byte("0"), 0)
	}
	n, err := loadModules(modulesList, cfg.noload, logf)
	if err != nil {
		logf("modules: %v", err)
	}
	logf("loaded %d modules", n)
	mountAll(logf) // configfs is a module: mount it now
	if cfg.hostname != "" {
		if err := syscall.Sethostname([]byte(cfg.hostname)); err != nil {
			logf("hostname: %v", err)
		}
	}
	run(logf, "ip", "link", "set", "lo", "up")
	for _, nic := range cfg.nics {
		if err := configure(nic, logf); err != nil {
			logf("nic %s: %v", nic.mac, err)
		}
	}
	agent, err := startAgent()
	if err != nil {
		logf("agent: %v", err)
	} else {
		host, _ := os.Hostname()
		fmt.Printf("%s hostname=%s t=%.2fs\n", ReadyMarker, host, time.Since(start).Seconds())
	}
	for {
		if agent != nil {
			err := agent.Wait()
			logf("agent exited: %v; restarting", err)
		}
		time.Sleep(time.Second)
		agent, _ = startAgent()
	}
}

// mountAll mounts the pseudo filesystems that are not mounted yet.
func mountAll(logf func(string, ...any)) {
	mounted := map[string]bool{}
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				mounted[f[1]] = true
			}
		}
	}
	for _, m := range []struct{ fs, dir string }{
		{"proc", "/proc"},
		{"sysfs", "/sys"},
		{"devtmpfs", "/dev"},
		{"devpts", "/dev/pts"},
		{"tmpfs", "/dev/shm"},
		{"tmpfs", "/run"},
		{"tmpfs", "/tmp"},
		{"configfs", "/sys/kernel/config"},
		{"debugfs", "/sys/kernel/debug"},
	} {
		if mounted[m.dir] {
			continue
		}
		os.MkdirAll(m.dir, 0o755)
		if err := syscall.Mount(m.fs, m.dir, m.fs, 0, ""); err == nil {
			mounted[m.dir] = true
		} else if m.fs != "debugfs" && m.fs != "configfs" {
			logf("mount %s on %s: %v", m.fs, m.dir, err)
		}
	}
}

// loadModules loads each module file listed in path with finit_module,
// except those named in noload. A module that is already loaded is fine.
func loadModules(path string, noload map[string]bool, logf func(string, ...any)) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		mod := strings.TrimSpace(sc.Text())
		if mod == "" || strings.HasPrefix(mod, "#") {
			continue
		}
		if name := strings.TrimSuffix(filepath.Base(mod), ".ko"); noload[name] {
			logf("not loading %s (falconnic.noload)", name)
			continue
		}
		if err := insmod(mod); err != nil {
			return n, fmt.Errorf("%s: %w", mod, err)
		}
		n++
	}
	return n, sc.Err()
}

func insmod(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	params, _ := syscall.BytePtrFromString("")
	_, _, errno := syscall.Syscall(sysFinitModule, f.Fd(), uintptr(unsafe.Pointer(params)), 0)
	if errno != 0 && errno != syscall.EEXIST {
		return errno
	}
	return nil
}

// configure gives the NIC with nic.mac its address and brings it up.
func configure(nic nicConfig, logf func(string, ...any)) error {
	dev, err := ifaceByMAC(nic.mac, 10*time.Second)
	if err != nil {
		return err
	}
	if nic.mtu != "" {
		if err := run(logf, "ip", "link", "set", dev, "mtu", nic.mtu); err != nil {
			return err
		}
	}
	if nic.cidr != "" {
		if err := run(logf, "ip", "addr", "add", nic.cidr, "dev", dev); err != nil {
			return err
		}
	}
	if err := run(logf, "ip", "link", "set", dev, "up"); err != nil {
		return err
	}
	logf("%s (%s) up with %s", dev, nic.mac, nic.cidr)
	return nil
}

// ifaceByMAC finds the network interface with the given MAC; an empty mac
// means the first Ethernet interface.
func ifaceByMAC(mac string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		devs, _ := filepath.Glob("/sys/class/net/*")
		for _, d := range devs {
			name := filepath.Base(d)
			if name == "lo" {
				continue
			}
			b, err := os.ReadFile(d + "/address")
			if err != nil {
				continue
			}
			if mac == "" && strings.HasPrefix(name, "eth") || strings.EqualFold(strings.TrimSpace(string(b)), mac) {
				return name, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no interface with MAC %q", mac)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func run(logf func(string, ...any), name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// startAgent starts the agent and waits until it closes its ready pipe.
func startAgent() (*exec.Cmd, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	cmd := exec.Command("agent", "-ready-fd", "3")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{pw}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		var b [1]byte
		pr.Read(b[:]) // returns at EOF: the agent closed fd 3 or died
		close(done)
	}()
	select {
	case <-done:
		return cmd, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("agent not ready after 30s")
	}
}
