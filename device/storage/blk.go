package storage

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/internal/stats"
	"falconnic/nvme"
	"falconnic/vhostuser"
)

// virtio-blk feature bits (virtio 1.2 §5.2.3).
const (
	blkFSizeMax     = 1 << 1
	blkFSegMax      = 1 << 2
	blkFRO          = 1 << 5
	blkFBlkSize     = 1 << 6
	blkFFlush       = 1 << 9
	blkFTopology    = 1 << 10
	blkFConfigWCE   = 1 << 11
	blkFMQ          = 1 << 12
	blkFDiscard     = 1 << 13
	blkFWriteZeroes = 1 << 14
)

// virtio_blk_config offsets (virtio 1.2 §5.2.4) and its size up to
// write_zeroes_may_unmap and padding (QEMU 7.2 asks for 57 bytes).
const (
	blkCfgCapacity      = 0
	blkCfgSizeMax       = 8
	blkCfgSegMax        = 12
	blkCfgBlkSize       = 20
	blkCfgMinIO         = 26
	blkCfgWriteback     = 32
	blkCfgNumQueues     = 34
	blkCfgMaxDiscard    = 36
	blkCfgMaxDiscardSeg = 40
	blkCfgDiscardAlign  = 44
	blkCfgMaxWZ         = 48
	blkCfgMaxWZSeg      = 52
	blkCfgWZMayUnmap    = 56
	blkConfigLen        = 60
	blkSegMaxValue      = 126 // QEMU's default: queue size - 2
	blkMaxSubcommands   = 4096
	blkDefaultSerial    = "falconnic-nvme"
	blkDrainTimeout     = 10 * time.Second // a stopping queue's wait for requests in flight
)

// MaxBlkQueues bounds a disk's virtqueues (BlkConfig.Queues).
const MaxBlkQueues = 16

// BlkConfig describes one block function: a virtio-blk disk whose blocks
// are namespace NSID on the far side of Path.
type BlkConfig struct {
	Port   *port.Port
	Path   *nvme.Path         // use only on Port's goroutine
	NSID   uint16             // the remote namespace
	Info   nvme.NamespaceInfo // from Identify (IdentifyRemote)
	Serial string             // GET_ID answer (≤ 20 bytes)
	Queues int                // 1..16
	// Paths, if set, replaces a broken path: commands its path fails are
	// resubmitted (blk_path.go), waiting at most RetryWindow (default 30 s)
	// for a path.
	Paths       BlkPaths
	RetryWindow time.Duration
}

// Blk is the NIC's block function served over vhost-user-blk: virtio-blk
// requests become NVMe commands on the initiator side of an nvme.Path.
// Inflight tracking (INFLIGHT_SHMFD) is offered, so requests popped but not
// completed when the daemon dies are resubmitted by the next one.
type Blk struct {
	cfg   BlkConfig
	drain time.Duration // blkDrainTimeout; tests shorten it before serving

	// on the port's goroutine: the path commands go on, its generation
	// (each command's Cookie: the path it went on), the path retired
	// after a command failed on it while up (path.go), and the commands
	// waiting for a path
	path    *nvme.Path
	pathGen uint64
	retired *nvme.Path
	parked  []blkParked
	// the workers with requests completed in the port's current burst
	// (blkWorker.completed), handed over at its end (flushDone)
	ready []*blkWorker

	mu     sync.Mutex
	config [blkConfigLen]byte
	acked  uint64
	// writeThrough: the guest has no volatile cache (writeThroughFor);
	// every write goes out with FUA.
	writeThrough atomic.Bool

	Stats BlkCounters
}

// BlkCounters count the block function's requests and every refusal.
type BlkCounters struct {
	Requests, Reads, Writes, Flushes, Discards, WriteZeroes, GetIDs stats.Counter
	ReadBytes, WriteBytes                                           stats.Counter
	Unsupported, BadHeader, NoStatus, BadLayout                     stats.Counter
	Misaligned, TooLarge, BadSegments, IOErrors, Cancelled          stats.Counter
	Retries, Parked, RetryExpired, PathsRetired                     stats.Counter
}

// Set lists the counters with help text.
func (c *BlkCounters) Set() stats.Set {
	return stats.Set{
		{Name: "blk_requests", Help: "virtio-blk requests popped", Counter: &c.Requests},
		{Name: "blk_reads", Help: "IN requests", Counter: &c.Reads},
		{Name: "blk_writes", Help: "OUT requests", Counter: &c.Writes},
		{Name: "blk_flushes", Help: "FLUSH requests", Counter: &c.Flushes},
		{Name: "blk_discards", Help: "DISCARD requests", Counter: &c.Discards},
		{Name: "blk_write_zeroes", Help: "WRITE_ZEROES requests", Counter: &c.WriteZeroes},
		{Name: "blk_get_ids", Help: "GET_ID requests", Counter: &c.GetIDs},
		{Name: "blk_read_bytes", Help: "bytes read for the guest", Counter: &c.ReadBytes},
		{Name: "blk_write_bytes", Help: "bytes written for the guest", Counter: &c.WriteBytes},
		{Name: "blk_unsupported", Help: "requests of an unsupported type (UNSUPP)", Counter: &c.Unsupported},
		{Name: "blk_bad_header", Help: "chains without a 16-byte header (IOERR or dropped)", Counter: &c.BadHeader},
		{Name: "blk_no_status", Help: "chains without a writable status byte (returned unanswered)", Counter: &c.NoStatus},
		{Name: "blk_bad_layout", Help: "chains with readable after writable buffers", Counter: &c.BadLayout},
		{Name: "blk_misaligned", Help: "requests not aligned to the block size (IOERR)", Counter: &c.Misaligned},
		{Name: "blk_too_large", Help: "requests needing too many NVMe commands (IOERR)", Counter: &c.TooLarge},
		{Name: "blk_bad_segments", Help: "malformed discard/write-zeroes segment lists (IOERR)", Counter: &c.BadSegments},
		{Name: "blk_io_errors", Help: "requests completed with IOERR by the NVMe side", Counter: &c.IOErrors},
		{Name: "blk_retries", Help: "NVMe commands resubmitted after their path failed them", Counter: &c.Retries},
		{Name: "blk_parked", Help: "NVMe commands that waited for a new path", Counter: &c.Parked},
		{Name: "blk_paths_retired", Help: "paths the disk stopped using because a command failed on them while they were up (timed out): what the target still does with that path's writes is unknown, so nothing more goes on it and the commands wait for the replacement, whose set-up fences them", Counter: &c.PathsRetired},
		{Name: "blk_retry_expired", Help: "NVMe commands failed after waiting the retry window for a path", Counter: &c.RetryExpired},
		{Name: "blk_cancelled", Help: "requests abandoned at queue stop (inflight resubmits them)", Counter: &c.Cancelled},
	}
}

// Blk errors.
var (
	ErrBlkConfig = errors.New("blk: invalid block function config")
)

// NewBlk builds a block function.
func NewBlk(cfg BlkConfig) (*Blk, error) {
	if cfg.Queues == 0 {
		cfg.Queues = 1
	}
	if cfg.Port == nil || cfg.Path == nil || cfg.Queues < 1 || cfg.Queues > MaxBlkQueues || len(cfg.Serial) > blkIDLen ||
		cfg.Info.BlockSize < 512 || cfg.Info.BlockSize > 4096 || cfg.Info.Blocks == 0 {
		return nil, ErrBlkConfig
	}
	if cfg.Serial == "" {
		cfg.Serial = blkDefaultSerial
	}
	b := &Blk{cfg: cfg, drain: blkDrainTimeout, path: cfg.Path}
	// Ahead of any request: the queues' Do comes after this one.
	cfg.Port.Do(func(*falcon.Endpoint) { cfg.Port.OnIdle(b.flushDone) })
	c := b.config[:]
	bs := uint32(cfg.Info.BlockSize)
	perBS := bs / blkSector
	le := binary.LittleEndian
	le.PutUint64(c[blkCfgCapacity:], cfg.Info.Blocks*uint64(perBS))
	le.PutUint32(c[blkCfgSizeMax:], nvme.MaxTransfer)
	le.PutUint32(c[blkCfgSegMax:], blkSegMaxValue)
	le.PutUint32(c[blkCfgBlkSize:], bs)
	le.PutUint16(c[blkCfgMinIO:], 1)
	c[blkCfgWriteback] = 1
	le.PutUint16(c[blkCfgNumQueues:], uint16(cfg.Queues))
	maxSectors := uint32(min(uint64(nvme.MaxBlocks)*uint64(perBS), 1<<31))
	le.PutUint32(c[blkCfgMaxDiscard:], maxSectors)
	le.PutUint32(c[blkCfgMaxDiscardSeg:], 1)
	le.PutUint32(c[blkCfgDiscardAlign:], perBS)
	le.PutUint32(c[blkCfgMaxWZ:], maxSectors)
	le.PutUint32(c[blkCfgMaxWZSeg:], 1)
	c[blkCfgWZMayUnmap] = 1
	return b, nil
}

// Features implements vhostuser.Device.
func (b *Blk) Features() uint64 {
	f := vhostuser.FeatureVersion1 | vhostuser.FeatureIndirectDesc | vhostuser.FeatureEventIdx |
		blkFSizeMax | blkFSegMax | blkFBlkSize | blkFFlush | blkFTopology | blkFConfigWCE
	if b.cfg.Queues > 1 {
		f |= blkFMQ
	}
	if b.cfg.Info.ReadOnly {
		f |= blkFRO
	} else {
		f |= blkFDiscard | blkFWriteZeroes
	}
	return f
}

// ProtocolFeatures implements vhostuser.Device: config space and inflight.
func (b *Blk) ProtocolFeatures() uint64 { return vhostuser.ProtoConfig | vhostuser.ProtoInflightSHMFD }

// Blocks returns the size of the disk's namespace in logical blocks.
func (b *Blk) Blocks() uint64 { return b.cfg.Info.Blocks }

// NumQueues implements vhostuser.Device.
func (b *Blk) NumQueues() int { return b.cfg.Queues }

// QueueNum implements vhostuser.Device.
func (b *Blk) QueueNum() uint64 { return uint64(b.cfg.Queues) }

// GetConfig implements vhostuser.Device; bytes past the structure read 0.
func (b *Blk) GetConfig(offset, size uint32) ([]byte, error) {
	if uint64(offset)+uint64(size) > vhostuser.MaxConfigSize {
		return nil, ErrBlkConfig
	}
	out := make([]byte, size)
	b.mu.Lock()
	if offset < blkConfigLen {
		copy(out, b.config[offset:])
	}
	b.mu.Unlock()
	return out, nil
}

// SetConfig implements vhostuser.Device: only the writeback byte is
// writable (CONFIG_WCE).
func (b *Blk) SetConfig(offset uint32, data []byte) error {
	if offset != blkCfgWriteback || len(data) != 1 || data[0] > 1 {
		return ErrBlkConfig
	}
	b.mu.Lock()
	b.config[blkCfgWriteback] = data[0]
	b.writeThrough.Store(writeThroughFor(b.acked, data[0]))
	b.mu.Unlock()
	return nil
}

// SetFeatures implements vhostuser.Device.
func (b *Blk) SetFeatures(acked uint64) {
	b.mu.Lock()
	b.acked = acked
	b.writeThrough.Store(writeThroughFor(acked, b.config[blkCfgWriteback]))
	b.mu.Unlock()
}

// RunQueue implements vhostuser.Device: the queue's owning goroutine.
func (b *Blk) RunQueue(q *vhostuser.Queue) {
	q.Watch() // a request ring: every chain is taken as it comes
	w := newBlkWorker(b, q)
	for {
		w.pop()
		select {
		case <-q.Done():
			w.drain()
			return
		case <-q.Wake():
		case r := <-w.cpl:
			w.finishAll(r)
			w.reap(true)
			continue
		}
		w.reap(false)
	}
}

// flushDone hands each worker the requests completed during the port's
// burst of work (end-of-burst work, on the port's goroutine).
func (b *Blk) flushDone() {
	for i, w := range b.ready {
		w.ready = false
		w.handOver()
		b.ready[i] = nil
	}
	b.ready = b.ready[:0]
}

// IdentifyRemote asks the target for namespace nsid's geometry over path
// (used before serving a disk: GET_CONFIG needs the capacity).
func IdentifyRemote(fp *port.Port, path *nvme.Path, nsid uint16, timeout time.Duration) (nvme.NamespaceInfo, error) {
	done := make(chan nvme.Status, 1)
	buf := make([]byte, nvme.IdentifyLen)
	cmd := &nvme.Command{Op: nvme.OpIdentify, NSID: nsid, Data: [][]byte{buf},
		Done: func(c *nvme.Command) { done <- c.Status }}
	var err error
	if !fp.Call(func(*falcon.Endpoint) { err = path.Submit(cmd) }) {
		return nvme.NamespaceInfo{}, port.ErrStopped
	}
	if err != nil {
		return nvme.NamespaceInfo{}, err
	}
	expired := make(chan struct{})
	t := fp.Clock().AfterFunc(timeout, func() { close(expired) })
	defer t.Stop()
	select {
	case st := <-done:
		if !st.OK() {
			return nvme.NamespaceInfo{}, errors.New("blk: identify namespace: " + st.String())
		}
		return nvme.ParseIdentify(buf)
	case <-expired:
		fp.Call(func(*falcon.Endpoint) { path.Cancel(cmd) })
		return nvme.NamespaceInfo{}, errors.New("blk: identify namespace timed out")
	}
}
