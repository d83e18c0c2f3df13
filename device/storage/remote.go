package storage

import (
	"falconnic/nvme"
)

// DiskPaths is a remote disk's view of its NIC's NVMe paths to the
// target NIC (it implements BlkPaths): the connection manager hands it
// each new path (Use), the first one goes to whoever waits on First, and
// once a disk is attached every later one goes to the disk. It is used on
// the port's goroutine.
type DiskPaths struct {
	f      *NVMeFunc
	peer   [6]byte
	blk    *Blk
	latest *nvme.Path
	first  chan *nvme.Path
}

// NewDiskPaths returns the paths of f to NIC peer; f.Dial(peer, p.Use)
// asks for them.
func NewDiskPaths(f *NVMeFunc, peer [6]byte) *DiskPaths {
	return &DiskPaths{f: f, peer: peer, first: make(chan *nvme.Path, 1)}
}

// Use takes a new path from the connection manager.
func (p *DiskPaths) Use(path *nvme.Path) {
	p.latest = path
	if p.blk != nil {
		p.blk.SetPath(path)
		return
	}
	select {
	case p.first <- path:
	default:
	}
}

// First delivers the first path while no disk is attached.
func (p *DiskPaths) First() <-chan *nvme.Path { return p.first }

// Attach hands the path to b from now on (and any newer one it missed),
// and has the port drive b's timers.
func (p *DiskPaths) Attach(b *Blk) {
	p.blk = b
	b.cfg.Port.AddTimers(b)
	if p.latest != nil && p.latest != b.path {
		b.SetPath(p.latest)
	}
}

// Broken implements BlkPaths.
func (p *DiskPaths) Broken(path *nvme.Path) { p.f.Broken(p.peer, path) }

// BrokenLatest reports the latest path broken (a target that does not answer).
func (p *DiskPaths) BrokenLatest() { p.Broken(p.latest) }
