package device

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"falconnic/falcon"
	"falconnic/vhostuser"
)

// nvmeDaemon is the daemon's NVMe side: a Falcon port and NVMe function
// per NIC that exports namespaces or has disks, and the disks' vhost-user-
// blk servers. The ports run from NewDaemon (disks need Identify before
// they serve) until close.
type nvmeDaemon struct {
	funcs  map[string]*NVMeFunc
	disks  []*nvmeDisk
	stop   context.CancelFunc
	ports  sync.WaitGroup
	served sync.WaitGroup // the disks' servers
	nextID uint32
}

type nvmeDisk struct {
	spec DiskSpec
	blk  *Blk
	srv  *vhostuser.Server
	err  error
}

// nvmeIdentifyTimeout bounds a disk's Identify at start-up.
const nvmeIdentifyTimeout = 5 * time.Second

// nvmeCIDBase keeps NVMe connections' CIDs apart from the RDMA hub's,
// which counts up from 1 (CIDs only need to be unique per endpoint today;
// this keeps them unique in the daemon for a shared fabric demux).
const nvmeCIDBase = 1 << 23

// addNVMe builds the config's namespaces and disks.
func (d *Daemon) addNVMe() error {
	spec := d.cfg.NVMe
	if spec == nil || (len(spec.Namespaces) == 0 && len(spec.Disks) == 0) {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &d.nvme
	n.funcs, n.stop, n.nextID = map[string]*NVMeFunc{}, cancel, nvmeCIDBase
	fn := func(nic string) *NVMeFunc {
		if f := n.funcs[nic]; f != nil {
			return f
		}
		port := NewFalconPort(nil, nil)
		n.ports.Add(1)
		f := NewNVMeFunc(port, uint32(len(n.funcs)+1)) // before Run: SetULP
		go func() { defer n.ports.Done(); port.Run(ctx) }()
		n.funcs[nic] = f
		return f
	}
	for _, s := range spec.Namespaces {
		f := fn(s.NIC)
		var err error
		if !f.Port.Call(func(*falcon.Endpoint) { _, err = f.AddNamespace(s) }) {
			err = ErrPortStopped
		}
		if err != nil {
			return fmt.Errorf("nic %s: %w", s.NIC, err)
		}
	}
	cid := func() uint32 { n.nextID++; return n.nextID }
	for _, ds := range spec.Disks {
		ini, tgt := fn(ds.NIC), fn(ds.Target)
		path, _, err := ConnectNVMeLocal(ini, tgt, cid)
		if err != nil {
			return fmt.Errorf("disk %s: %w", ds.Name, err)
		}
		info, err := IdentifyRemote(ini.Port, path, ds.NSID, nvmeIdentifyTimeout)
		if err != nil {
			return fmt.Errorf("disk %s: %w", ds.Name, err)
		}
		blk, err := NewBlk(BlkConfig{Port: ini.Port, Path: path, NSID: ds.NSID, Info: info, Serial: ds.Serial, Queues: ds.Queues})
		if err != nil {
			return fmt.Errorf("disk %s: %w", ds.Name, err)
		}
		if !ds.Dial {
			if err := os.MkdirAll(filepath.Dir(ds.Socket), 0o755); err != nil {
				return fmt.Errorf("disk %s: %w", ds.Name, err)
			}
		}
		n.disks = append(n.disks, &nvmeDisk{spec: ds, blk: blk, srv: &vhostuser.Server{Path: ds.Socket, Dial: ds.Dial, Device: blk}})
	}
	return nil
}

func (d *Daemon) runNVMe(ctx context.Context, wg *sync.WaitGroup) {
	for _, k := range d.nvme.disks {
		wg.Add(1)
		d.nvme.served.Add(1)
		go func() {
			defer wg.Done()
			defer d.nvme.served.Done()
			if err := k.srv.Serve(ctx); err != nil && ctx.Err() == nil {
				k.err = err
				d.log.Error("disk stopped", "disk", k.spec.Name, "err", err)
			}
		}()
	}
}

// closeNVMe stops the ports once the disks' servers returned (their queue
// workers hand the ports their last requests).
func (d *Daemon) closeNVMe() {
	d.nvme.served.Wait()
	if d.nvme.stop != nil {
		d.nvme.stop()
		d.nvme.ports.Wait()
	}
}

// DiskStatus is one disk in the daemon status.
type DiskStatus struct {
	Name     string                  `json:"name"`
	Socket   string                  `json:"socket"`
	Target   string                  `json:"target"`
	NSID     uint16                  `json:"nsid"`
	Blocks   uint64                  `json:"blocks"`
	Session  vhostuser.SessionStatus `json:"session"`
	Counters map[string]uint64       `json:"counters"`
}

// NVMeStatus is the NVMe side of the daemon status.
type NVMeStatus struct {
	Disks      []DiskStatus                 `json:"disks,omitempty"`
	Engines    map[string]map[string]uint64 `json:"engines,omitempty"`
	Namespaces map[string]map[string]uint64 `json:"namespaces,omitempty"`
}

func (d *Daemon) nvmeStatus() *NVMeStatus {
	if len(d.nvme.funcs) == 0 {
		return nil
	}
	st := &NVMeStatus{Engines: map[string]map[string]uint64{}, Namespaces: map[string]map[string]uint64{}}
	for _, k := range d.nvme.disks {
		st.Disks = append(st.Disks, DiskStatus{Name: k.spec.Name, Socket: k.spec.Socket, Target: k.spec.Target,
			NSID: k.spec.NSID, Blocks: k.blk.cfg.Info.Blocks, Session: k.srv.Status(), Counters: k.blk.Stats.Set().Snapshot()})
	}
	for name, f := range d.nvme.funcs {
		st.Engines[name] = f.Engine.Stats.Set().Snapshot()
	}
	if d.cfg.NVMe != nil {
		for _, s := range d.cfg.NVMe.Namespaces {
			if f := d.nvme.funcs[s.NIC]; f != nil {
				if ns := f.Engine.Namespace(s.NSID); ns != nil {
					st.Namespaces[fmt.Sprintf("%s/%d", s.NIC, s.NSID)] = ns.Stats.Set().Snapshot()
				}
			}
		}
	}
	return st
}
