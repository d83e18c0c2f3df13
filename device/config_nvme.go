package device

import (
	"fmt"
	"net"
	"path/filepath"

	"falconnic/device/storage"
)

// NVMeSpec is the "nvme" section of the config: namespaces NICs export and
// disks (vhost-user-blk) whose blocks are such a namespace.
//
//	"nvme": {
//	  "namespaces": [
//	    {"nic": "n1", "nsid": 1, "backing": "memory", "size": 67108864},
//	    {"nic": "n1", "nsid": 2, "backing": "/var/lib/falconnic/disk.img", "size": 1073741824,
//	     "block_size": 4096, "read_only": false,          // a file or a block device (O_DIRECT)
//	     "direct": true, "aio": "io_uring"}               // a file with O_DIRECT too; aio: io_uring or threads
//	  ],
//	  "disks": [
//	    {"name": "d0", "socket": "d0.sock", "nic": "n0", "target": "n1", "nsid": 1,
//	     "serial": "falconnic-d0", "queues": 1, "dial": false},
//	    {"name": "d1", "socket": "d1.sock", "nic": "n0", "target": "52:54:00:00:00:09", "nsid": 1}
//	  ],
//	  "command_timeout": "30s",   // an NVMe command without a response fails (and is retried)
//	  "retry_window": "30s",      // a remote disk's command waits this long for a new path
//	  "cores": 1                  // goroutines running the NICs' Falcon ports (see below; port_cores overrides)
//	}
//
// A disk belongs to NIC "nic" (its initiator) and reaches namespace nsid
// exported by NIC "target": the name of a NIC of this daemon, or the MAC
// address of a NIC of another daemon reached over the fabric (the config
// needs a "fabric" section; the NVMe connection manager finds the daemon
// that has the MAC). A remote disk's path is replaced when it breaks
// (either daemon restarted): commands it failed are resubmitted.
//
// The NVMe functions' Falcon ports run on "cores" goroutines, one by
// default: two NICs of one daemon that exchange a disk's traffic then
// pass it without waking another thread, which on a small host costs
// less CPU per byte than two busy threads (`bench nvme --cores 1|2`).
// Ports on one goroutine share its work queue, so one NIC's bursts can
// crowd another's: a host with cores to spare and several busy disks
// sets more (up to one per NIC). The daemon's port_cores, when set, is
// the number for every NIC's port, NVMe or not (Config.PortCores).
type NVMeSpec struct {
	Namespaces     []storage.NamespaceSpec `json:"namespaces,omitempty"`
	Disks          []DiskSpec              `json:"disks,omitempty"`
	CommandTimeout Duration                `json:"command_timeout,omitzero"`
	RetryWindow    Duration                `json:"retry_window,omitzero"`
	// Cores is how many goroutines (the NIC cores) run the NVMe functions'
	// Falcon ports, the functions spread over them in the order they are
	// built (namespaces' NICs, then disks'); 0 means 1.
	Cores int `json:"cores,omitempty"`
}

// maxNVMeCores bounds NVMeSpec.Cores.
const maxNVMeCores = 64

// DiskSpec is one vhost-user-blk disk.
type DiskSpec struct {
	Name   string `json:"name"`
	Socket string `json:"socket"`
	NIC    string `json:"nic"`
	Target string `json:"target"`
	NSID   uint16 `json:"nsid"`
	Serial string `json:"serial,omitempty"`
	Queues int    `json:"queues,omitempty"`
	Dial   bool   `json:"dial,omitempty"`
}

// check validates the section against the NIC names and sockets in use.
func (s *NVMeSpec) check(nics []NICSpec, sockets map[string]bool) error {
	if s == nil {
		return nil
	}
	if s.Cores < 0 || s.Cores > maxNVMeCores {
		return fmt.Errorf("nvme.cores %d out of range 0..%d", s.Cores, maxNVMeCores)
	}
	names := map[string]bool{}
	for _, n := range nics {
		names[n.Name] = true
	}
	nsids := map[[2]any]storage.NamespaceSpec{}
	for i := range s.Namespaces {
		n := &s.Namespaces[i]
		switch {
		case !names[n.NIC]:
			return fmt.Errorf("nvme.namespaces[%d]: no nic %q", i, n.NIC)
		case n.NSID == 0:
			return fmt.Errorf("nvme.namespaces[%d]: nsid must be 1..65535", i)
		case n.Backing == "":
			return fmt.Errorf("nvme.namespaces[%d]: backing must be %q or a path", i, storage.NamespaceMemory)
		case n.Size < 0 || (n.Backing == storage.NamespaceMemory && n.Size == 0):
			return fmt.Errorf("nvme.namespaces[%d]: size must be positive", i)
		case n.AIO != "" && n.AIO != storage.AIOUring && n.AIO != storage.AIOThreads:
			return fmt.Errorf("nvme.namespaces[%d]: aio %q must be %q or %q", i, n.AIO, storage.AIOUring, storage.AIOThreads)
		}
		if n.BlockSize == 0 {
			n.BlockSize = 512
		}
		if n.BlockSize < 512 || n.BlockSize > 4096 || n.BlockSize&(n.BlockSize-1) != 0 || n.Size%int64(n.BlockSize) != 0 {
			return fmt.Errorf("nvme.namespaces[%d]: block_size %d must be a power of two in 512..4096 dividing size", i, n.BlockSize)
		}
		k := [2]any{n.NIC, n.NSID}
		if _, dup := nsids[k]; dup {
			return fmt.Errorf("nvme.namespaces[%d]: nic %s exports nsid %d twice", i, n.NIC, n.NSID)
		}
		if err := resolveACL(n, nics); err != nil {
			return fmt.Errorf("nvme.namespaces[%d]: %w", i, err)
		}
		nsids[k] = *n
	}
	for i := range s.Disks {
		d := &s.Disks[i]
		switch {
		case !nicName.MatchString(d.Name):
			return fmt.Errorf("nvme.disks[%d]: name %q must match %s", i, d.Name, nicName)
		case d.Socket == "" || sockets[d.Socket]:
			return fmt.Errorf("nvme.disks[%d]: socket %q missing or used twice", i, d.Socket)
		case !names[d.NIC]:
			return fmt.Errorf("nvme.disks[%d]: no nic %q", i, d.NIC)
		case !names[d.Target] && !isMAC(d.Target):
			return fmt.Errorf("nvme.disks[%d]: target %q is neither a nic nor a MAC address", i, d.Target)
		case d.NSID == 0:
			return fmt.Errorf("nvme.disks[%d]: nsid must be 1..65535", i)
		case len(d.Serial) > 20:
			return fmt.Errorf("nvme.disks[%d]: serial longer than 20 bytes", i)
		}
		if _, ok := nsids[[2]any{d.Target, d.NSID}]; !ok && names[d.Target] {
			return fmt.Errorf("nvme.disks[%d]: nic %q exports no nsid %d", i, d.Target, d.NSID)
		}
		if d.Queues == 0 {
			d.Queues = 1
		}
		if d.Queues < 1 || d.Queues > storage.MaxBlkQueues {
			return fmt.Errorf("nvme.disks[%d]: queues %d out of range 1..%d", i, d.Queues, storage.MaxBlkQueues)
		}
		sockets[d.Socket] = true
	}
	return nil
}

// isMAC reports whether s is a 48-bit MAC address.
func isMAC(s string) bool {
	hw, err := net.ParseMAC(s)
	return err == nil && len(hw) == 6
}

// resolve makes relative paths absolute against dir.
func (s *NVMeSpec) resolve(dir string) {
	if s == nil {
		return
	}
	abs := func(p string) string {
		if p == "" || p == storage.NamespaceMemory || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	for i := range s.Namespaces {
		s.Namespaces[i].Backing = abs(s.Namespaces[i].Backing)
	}
	for i := range s.Disks {
		s.Disks[i].Socket = abs(s.Disks[i].Socket)
	}
}
