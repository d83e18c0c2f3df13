package qemu

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// GuestModules are the kernel modules the guest loads, in the order their
// roots must load. The closure of each comes from modules.dep; modules that
// depend on an algorithm at init without declaring it (rdma_rxe needs crc32,
// ext4 needs crc32c) get it listed first.
var GuestModules = []string{
	"crc32_generic",  // rdma_rxe: "failed to init crc32 algorithm" without it
	"crc32c_generic", // ext4, nvme
	"virtio_pci",
	"virtio_net",
	"virtio_blk",
	"virtio_console", // virtio-serial: the agent's port
	"vsock",
	"vmw_vsock_virtio_transport",
	"ib_core",
	"ib_uverbs",
	"rdma_ucm", // rdma_cm for perftest -R and rping
	"nvme",
	"ext4",
	// NVMe over Fabrics on RDMA: the host (nvme connect -t rdma; u-root has
	// no modprobe, so fabrics cannot autoload it) and the target (nvmet
	// configfs). They attach to falcon0 when falconnic.ko loads after them.
	"nvme_rdma",
	"nvmet_rdma",
	// NVMe over TCP, the guests' alternative on the Ethernet function
	// (falconnic bench nvmf compares the two).
	"nvme_tcp",
	"nvmet_tcp",
	// NFSv4 over RDMA (falconnic nfs): the server (nfsd; rpcrdma holds
	// svcrdma too) and the client (nfsv4 registers the version the nfs4
	// filesystem type needs; rpcrdma the "rdma" transport).
	"rpcrdma",
	"nfsd",
	"nfsv4",
	// tc's clsact qdisc, matchall filter and mirred action: the driver's
	// adversarial test reflects a forged control frame from eth0's egress
	// into its ingress (tests/driver_adversarial_test.go).
	"sch_ingress",
	"cls_matchall",
	"act_mirred",
}

// StagedModules are in the image with their closure but not loaded at
// boot; StagedList names them in load order. rdma_rxe (Soft-RoCE, the
// baseline) is one: loaded next to falconnic.ko, its netdev notifier takes
// falcon0 (which registers with rxe's driver id so that librxe drives it)
// for one of its own and oopses in rxe_set_port_state. A test that wants
// Soft-RoCE loads it with: while read -r m; do insmod "$m" || exit 1; done < /etc/falconnic/modules.staged
var StagedModules = []string{"rdma_rxe"}

// StagedList is where the image lists the staged modules' files (those not
// already loaded at boot), one per line, in load order.
const StagedList = "/etc/falconnic/modules.staged"

// ModuleDeps is a parsed modules.dep: module file → the files it needs.
type ModuleDeps struct {
	deps   map[string][]string // file (relative to lib/modules/KVER) → deps
	byName map[string]string   // normalised module name → file
}

// ModuleName returns the module name of a module file path: the base name
// without ".ko" (and a compression suffix), with '-' as '_'.
func ModuleName(file string) string {
	b := path.Base(file)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

// ParseModulesDep reads modules.dep ("file: dep dep ..." per line).
func ParseModulesDep(r io.Reader) (*ModuleDeps, error) {
	md := &ModuleDeps{deps: map[string][]string{}, byName: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		file, rest, ok := strings.Cut(s, ":")
		file = strings.TrimSpace(file)
		if !ok || file == "" || !strings.Contains(file, ".ko") || strings.Contains(file, "..") {
			return nil, fmt.Errorf("modules.dep line %d: malformed %q", line, s)
		}
		deps := strings.Fields(rest)
		for _, d := range deps {
			if !strings.Contains(d, ".ko") || strings.Contains(d, "..") {
				return nil, fmt.Errorf("modules.dep line %d: malformed dependency %q", line, d)
			}
		}
		md.deps[file] = deps
		md.byName[ModuleName(file)] = file
	}
	return md, sc.Err()
}

// File returns the module file of a module name.
func (md *ModuleDeps) File(name string) (string, bool) {
	f, ok := md.byName[strings.ReplaceAll(name, "-", "_")]
	return f, ok
}

// LoadOrder returns the module files to load for roots, each after all it
// depends on, each once, roots in the given order otherwise. Names in
// builtin (kernel built-ins) are skipped; an unknown name is an error.
func (md *ModuleDeps) LoadOrder(roots []string, builtin map[string]bool) ([]string, error) {
	var order []string
	state := map[string]int{} // 0 new, 1 visiting, 2 done
	var visit func(file string, chain []string) error
	visit = func(file string, chain []string) error {
		switch state[file] {
		case 1:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(chain, file), " → "))
		case 2:
			return nil
		}
		deps, ok := md.deps[file]
		if !ok {
			return fmt.Errorf("module %s is needed by %s but not in modules.dep", file, strings.Join(chain, " → "))
		}
		state[file] = 1
		for _, d := range deps {
			if err := visit(d, append(chain, file)); err != nil {
				return err
			}
		}
		state[file] = 2
		order = append(order, file)
		return nil
	}
	for _, r := range roots {
		if builtin[strings.ReplaceAll(r, "-", "_")] {
			continue
		}
		f, ok := md.File(r)
		if !ok {
			return nil, fmt.Errorf("kernel module %q not found in modules.dep", r)
		}
		if err := visit(f, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// ParseModulesBuiltin reads modules.builtin into a set of module names.
func ParseModulesBuiltin(r io.Reader) (map[string]bool, error) {
	set := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			set[ModuleName(s)] = true
		}
	}
	return set, sc.Err()
}
