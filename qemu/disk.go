package qemu

import (
	"errors"
	"fmt"
	"strconv"
)

// MaxDiskQueues bounds a vhost-user-blk disk's virtqueues.
const MaxDiskQueues = 16

// args returns the QEMU arguments of disk d with QEMU ids derived from id.
func (d Disk) args(id string) ([]string, error) {
	switch {
	case d.VhostUserBlk != "" && d.File != "":
		return nil, errors.New("both a vhost-user-blk socket and a file")
	case d.VhostUserBlk != "":
		if unsafeOpt(d.VhostUserBlk) {
			return nil, fmt.Errorf("bad vhost-user-blk socket path %q", d.VhostUserBlk)
		}
		if d.Queues < 0 || d.Queues > MaxDiskQueues {
			return nil, fmt.Errorf("%d queues out of range 1..%d", d.Queues, MaxDiskQueues)
		}
		if d.Serial != "" {
			return nil, errors.New("a vhost-user-blk disk's serial is the daemon's")
		}
		dev := "vhost-user-blk-pci,chardev=c" + id
		if d.Queues > 1 {
			dev += ",num-queues=" + strconv.Itoa(d.Queues)
		}
		if d.INTx {
			dev += ",vectors=0"
		}
		return []string{
			"-chardev", "socket,id=c" + id + ",path=" + d.VhostUserBlk + ",reconnect=1",
			"-device", dev,
		}, nil
	case d.File != "":
		if unsafeOpt(d.File) {
			return nil, fmt.Errorf("file path %q has a comma or space", d.File)
		}
		if d.Queues != 0 {
			return nil, errors.New("queues apply to vhost-user-blk disks only")
		}
		if len(d.Serial) > 20 || unsafeOpt(d.Serial) {
			return nil, fmt.Errorf("serial %q: at most 20 bytes, no comma or space", d.Serial)
		}
		dev := "virtio-blk-pci,drive=" + id
		if d.Serial != "" {
			dev += ",serial=" + d.Serial
		}
		if d.INTx {
			dev += ",vectors=0"
		}
		return []string{
			"-drive", "file=" + d.File + ",if=none,id=" + id + ",format=raw,cache=none,aio=native",
			"-device", dev,
		}, nil
	}
	return nil, errors.New("neither a vhost-user-blk socket nor a file")
}
