package device

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"falconnic/device/port"
	"falconnic/device/storage"
	"falconnic/falcon"
	"falconnic/nvme"
	"falconnic/vhostuser"
)

// nvmeDaemon is what the daemon's NVMe side shares between NICs (each
// NIC owns its NVMe function and disks: daemonNIC).
type nvmeDaemon struct {
	served sync.WaitGroup // the disks' servers
	mu     sync.Mutex     // remote disks' blk/srv
}

type nvmeDisk struct {
	spec DiskSpec
	ini  *storage.NVMeFunc // its NIC's NVMe function
	// blk and srv are set by NewDaemon for a local target, by remoteDisk
	// in Run (under nvmeDaemon.mu) for a target on another daemon.
	blk *storage.Blk
	srv *vhostuser.Server
	err error
}

// nvmeIdentifyTimeout bounds a disk's Identify at start-up.
const nvmeIdentifyTimeout = 5 * time.Second

// addNVMeFuncs attaches an NVMe function to the port of each NIC that
// exports namespaces or has disks (before the ports run) and returns
// those NICs in the order the functions were built: namespaces' NICs,
// then each disk's initiator and local target.
func (d *Daemon) addNVMeFuncs() []*daemonNIC {
	spec := d.cfg.NVMe
	if spec == nil {
		return nil
	}
	var order []*daemonNIC
	add := func(name string) {
		n := d.nic(name)
		if n == nil || n.nvme != nil {
			return
		}
		n.nvme = storage.NewNVMeFunc(n.falcon, uint32(len(order)+1))
		n.nvme.MAC = n.mac()
		n.nvme.AttachCM(n.cm)
		if t := spec.CommandTimeout; t > 0 {
			n.nvme.Engine.SetCommandTimeout(time.Duration(t))
		}
		order = append(order, n)
	}
	for _, s := range spec.Namespaces {
		add(s.NIC)
	}
	for _, ds := range spec.Disks {
		add(ds.NIC)
		add(ds.Target) // when it is a NIC of this daemon
	}
	return order
}

// addNVMe builds the config's namespaces and disks (the ports run).
func (d *Daemon) addNVMe() error {
	spec := d.cfg.NVMe
	if spec == nil {
		return nil
	}
	for _, s := range spec.Namespaces {
		f := d.nic(s.NIC).nvme
		var err error
		if !f.Port.Call(func(*falcon.Endpoint) { _, err = f.AddNamespace(s) }) {
			err = port.ErrStopped
		}
		if err != nil {
			return fmt.Errorf("nic %s: %w", s.NIC, err)
		}
	}
	for _, ds := range spec.Disks {
		n := d.nic(ds.NIC)
		ini := n.nvme
		if !ds.Dial {
			if err := os.MkdirAll(filepath.Dir(ds.Socket), 0o755); err != nil {
				return fmt.Errorf("disk %s: %w", ds.Name, err)
			}
		}
		tgt := d.nic(ds.Target)
		if tgt == nil {
			// Set up in Run, once the fabric receives (remoteDisk).
			if d.fabric == nil {
				return fmt.Errorf("disk %s: target %s is not a nic of this daemon, and there is no fabric", ds.Name, ds.Target)
			}
			n.disks = append(n.disks, &nvmeDisk{spec: ds, ini: ini})
			continue
		}
		path, _, err := storage.ConnectNVMeLocal(ini, tgt.nvme, storage.LocalCIDs(d.cm, ini, tgt.nvme))
		if err != nil {
			return fmt.Errorf("disk %s: %w", ds.Name, err)
		}
		info, err := storage.IdentifyRemote(ini.Port, path, ds.NSID, nvmeIdentifyTimeout)
		if err != nil {
			return fmt.Errorf("disk %s: %w", ds.Name, err)
		}
		blk, err := storage.NewBlk(storage.BlkConfig{Port: ini.Port, Path: path, NSID: ds.NSID, Info: info, Serial: ds.Serial, Queues: ds.Queues})
		if err != nil {
			return fmt.Errorf("disk %s: %w", ds.Name, err)
		}
		n.disks = append(n.disks, &nvmeDisk{spec: ds, ini: ini, blk: blk, srv: &vhostuser.Server{Path: ds.Socket, Dial: ds.Dial, Device: blk,
			Log: d.log.With("disk", ds.Name), WatchdogObserve: d.watchObserve}})
	}
	return nil
}

// remoteRetryEvery paces a remote disk's set-up while its target does
// not answer (its daemon not up yet).
const remoteRetryEvery = time.Second

// remoteDisk sets up disk k whose target NIC is on another daemon: a path
// from the NVMe CM, Identify, the block function; it retries until it
// works or ctx ends. The disk's socket appears once it is set up.
func (d *Daemon) remoteDisk(ctx context.Context, k *nvmeDisk) (*vhostuser.Server, error) {
	ds, ini := k.spec, k.ini
	hw, err := net.ParseMAC(ds.Target)
	if err != nil || len(hw) != 6 {
		return nil, fmt.Errorf("target %q: not a MAC address", ds.Target)
	}
	p := storage.NewDiskPaths(ini, [6]byte(hw))
	if !ini.Port.Call(func(*falcon.Endpoint) { ini.Dial([6]byte(hw), p.Use) }) {
		return nil, port.ErrStopped
	}
	var path *nvme.Path
	for {
		wait, stop := d.after(remoteRetryEvery * 5)
		select {
		case path = <-p.First():
			stop()
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-wait:
			d.log.Warn("disk waiting for its target", "disk", ds.Name, "target", ds.Target)
			ini.Port.Do(func(*falcon.Endpoint) { p.BrokenLatest() })
			continue
		}
		info, err := storage.IdentifyRemote(ini.Port, path, ds.NSID, nvmeIdentifyTimeout)
		if err == nil {
			blk, err := storage.NewBlk(storage.BlkConfig{Port: ini.Port, Path: path, NSID: ds.NSID, Info: info, Serial: ds.Serial,
				Queues: ds.Queues, Paths: p, RetryWindow: time.Duration(d.cfg.NVMe.RetryWindow)})
			if err != nil {
				return nil, err
			}
			if !ini.Port.Call(func(*falcon.Endpoint) { p.Attach(blk) }) {
				return nil, port.ErrStopped
			}
			srv := &vhostuser.Server{Path: ds.Socket, Dial: ds.Dial, Device: blk, Log: d.log.With("disk", ds.Name), WatchdogObserve: d.watchObserve}
			d.nvme.mu.Lock()
			k.blk, k.srv = blk, srv
			d.nvme.mu.Unlock()
			return srv, nil
		}
		d.log.Warn("disk identify failed", "disk", ds.Name, "target", ds.Target, "err", err)
		pause, cancel := d.after(remoteRetryEvery)
		select {
		case <-ctx.Done():
			cancel()
			return nil, ctx.Err()
		case <-pause:
		}
		ini.Port.Do(func(*falcon.Endpoint) { p.Broken(path) })
	}
}

func (d *Daemon) runNVMe(ctx context.Context, wg *sync.WaitGroup) {
	for _, k := range d.disks() {
		wg.Add(1)
		d.nvme.served.Add(1)
		go func() {
			defer wg.Done()
			defer d.nvme.served.Done()
			srv := k.srv
			if srv == nil {
				var err error
				if srv, err = d.remoteDisk(ctx, k); err != nil {
					if ctx.Err() == nil {
						k.err = err
						d.log.Error("disk set-up failed", "disk", k.spec.Name, "err", err)
					}
					return
				}
			}
			if err := srv.Serve(ctx); err != nil && ctx.Err() == nil {
				k.err = err
				d.log.Error("disk stopped", "disk", k.spec.Name, "err", err)
			}
		}()
	}
}

// closeNVMe waits for the disks' servers to return (their queue workers
// hand the ports their last requests; closePorts then stops the ports).
func (d *Daemon) closeNVMe() { d.nvme.served.Wait() }

// DiskStatus is one disk in the daemon status.
type DiskStatus struct {
	Name     string                  `json:"name"`
	Socket   string                  `json:"socket"`
	Target   string                  `json:"target"`
	NSID     uint16                  `json:"nsid"`
	Blocks   uint64                  `json:"blocks"`
	Session  vhostuser.SessionStatus `json:"session"`
	Counters map[string]uint64       `json:"counters"`
	// VhostUser are the disk's vhost-user counters (kicks, calls, chains).
	VhostUser map[string]uint64 `json:"vhost_user,omitempty"`
}

// NVMeStatus is the NVMe side of the daemon status.
type NVMeStatus struct {
	Disks      []DiskStatus                 `json:"disks,omitempty"`
	Engines    map[string]map[string]uint64 `json:"engines,omitempty"`
	Namespaces map[string]map[string]uint64 `json:"namespaces,omitempty"`
	CM         map[string]uint64            `json:"cm,omitempty"` // the NVMe connection manager
}

// disks lists the daemon's disks, NIC by NIC.
func (d *Daemon) disks() []*nvmeDisk {
	var all []*nvmeDisk
	for _, n := range d.nics {
		all = append(all, n.disks...)
	}
	return all
}

func (d *Daemon) nvmeStatus() *NVMeStatus {
	if d.cfg.NVMe == nil || len(d.cfg.NVMe.Namespaces) == 0 && len(d.cfg.NVMe.Disks) == 0 {
		return nil
	}
	st := &NVMeStatus{Engines: map[string]map[string]uint64{}, Namespaces: map[string]map[string]uint64{}}
	d.nvme.mu.Lock()
	for _, k := range d.disks() {
		ds := DiskStatus{Name: k.spec.Name, Socket: k.spec.Socket, Target: k.spec.Target, NSID: k.spec.NSID}
		if k.blk != nil {
			ds.Blocks, ds.Session, ds.Counters = k.blk.Blocks(), k.srv.Status(), k.blk.Stats.Set().Snapshot()
			ds.VhostUser = k.srv.Counters.Set().Snapshot()
		}
		st.Disks = append(st.Disks, ds)
	}
	d.nvme.mu.Unlock()
	for _, n := range d.nics {
		if n.nvme != nil {
			st.Engines[n.spec.Name] = n.nvme.Engine.Stats.Set().Snapshot()
		}
	}
	if d.cfg.NVMe != nil {
		for _, s := range d.cfg.NVMe.Namespaces {
			if n := d.nic(s.NIC); n != nil && n.nvme != nil {
				if set, ok := n.nvme.NamespaceCounters(s.NSID); ok {
					st.Namespaces[fmt.Sprintf("%s/%d", s.NIC, s.NSID)] = set.Snapshot()
				}
			}
		}
	}
	return st
}
