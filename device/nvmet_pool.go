package device

import (
	"cmp"
	"slices"
	"sync"

	"falconnic/internal/stats"
	"falconnic/nvme"
)

// Namespace IO pool sizes. A queue-depth-32 stream of 128 KiB commands is
// 1024 nCMDs of 4 KiB: 32 workers keep 32 of them in the kernel at once
// (what the local disk's aio=native has in flight per 128 KiB command),
// and the queue bounds what waits for a worker; beyond it the engine
// holds IOs in its own table-bounded queue (nvme.Counters.BackendBusy).
const (
	nsPoolWorkers = 32
	nsPoolQueue   = 256
	nsPoolBatch   = 32 // IOs one worker takes at once (coalesced where adjacent)
)

// nsPool is a namespace backend (a file or block device) run on a bounded
// pool of worker goroutines instead of the port's: the target engine
// submits each nCMD's IO (nvme.AsyncBackend) and gets it back through the
// port's work queue (Do), many completions per wake-up. The workers start
// with the first IO and end with the port.
type nsPool struct {
	be    nvme.Backend
	port  *FalconPort
	eng   *nvme.Engine
	queue chan *nvme.IO
	once  sync.Once

	mu    sync.Mutex
	done  []*nvme.IO // finished, waiting for the port
	spare []*nvme.IO

	Stats NSPoolCounters
}

// NSPoolCounters count a namespace pool's IOs.
type NSPoolCounters struct {
	Submitted, QueueFull, Completed, Coalesced, Deliveries, PortStopped stats.Counter
}

// Set lists the counters with help text.
func (c *NSPoolCounters) Set() stats.Set {
	return stats.Set{
		{Name: "pool_submitted", Help: "backend IOs queued for the namespace's workers", Counter: &c.Submitted},
		{Name: "pool_queue_full", Help: "backend IOs refused: the workers' queue was full (the engine retries)", Counter: &c.QueueFull},
		{Name: "pool_completed", Help: "backend IOs the workers finished", Counter: &c.Completed},
		{Name: "pool_coalesced", Help: "backend IOs done as part of a vectored read or write of adjacent IOs", Counter: &c.Coalesced},
		{Name: "pool_deliveries", Help: "batches of finished IOs handed to the port", Counter: &c.Deliveries},
		{Name: "pool_port_stopped", Help: "finished IOs dropped: the port had stopped", Counter: &c.PortStopped},
	}
}

func newNSPool(be nvme.Backend, port *FalconPort, eng *nvme.Engine) *nsPool {
	return &nsPool{be: be, port: port, eng: eng, queue: make(chan *nvme.IO, nsPoolQueue)}
}

// Submit implements nvme.AsyncBackend (on the port's goroutine).
func (p *nsPool) Submit(io *nvme.IO) bool {
	p.once.Do(func() {
		for i := 0; i < nsPoolWorkers; i++ {
			go p.work()
		}
	})
	select {
	case p.queue <- io:
		p.Stats.Submitted.Inc()
		return true
	default:
		p.Stats.QueueFull.Inc()
		return false
	}
}

// work is one worker: it takes an IO and whatever else is queued (up to
// nsPoolBatch), runs them — contiguous reads or writes as one vectored
// call (coalesce) — and hands them back together.
func (p *nsPool) work() {
	batch := make([]*nvme.IO, 0, nsPoolBatch)
	var iov [][]byte
	for {
		select {
		case io := <-p.queue:
			batch = append(batch[:0], io)
		drain:
			for len(batch) < nsPoolBatch {
				select {
				case io := <-p.queue:
					batch = append(batch, io)
				default:
					break drain
				}
			}
			iov = p.run(batch, iov)
			p.Stats.Completed.Add(uint64(len(batch)))
			p.finish(batch)
			clear(batch)
		case <-p.port.dead:
			return
		}
	}
}

// vectorBackend is a backend with vectored reads and writes (FileBackend).
type vectorBackend interface {
	ReadvAt(bufs [][]byte, off int64) error
	WritevAt(bufs [][]byte, off int64) error
	vectorOK(bufs [][]byte, off int64) bool
}

// run executes a batch: sorted by operation and offset, each run of
// adjacent reads (or writes) becomes one preadv (pwritev) of at most
// nvme.MaxTransfer bytes; a run with a FUA write is flushed once after.
// Everything else runs one by one. iov is scratch, returned for reuse.
func (p *nsPool) run(batch []*nvme.IO, iov [][]byte) [][]byte {
	vb, ok := p.be.(vectorBackend)
	if !ok || len(batch) == 1 {
		for _, io := range batch {
			io.Run(p.be)
		}
		return iov
	}
	slices.SortFunc(batch, func(a, b *nvme.IO) int {
		if a.Op != b.Op {
			return int(a.Op) - int(b.Op)
		}
		return cmp.Compare(a.Off, b.Off)
	})
	for i := 0; i < len(batch); {
		first := batch[i]
		j := i + 1
		if first.Op == nvme.OpRead || first.Op == nvme.OpWrite {
			end := first.Off + first.Len
			for j < len(batch) && batch[j].Op == first.Op && batch[j].Off == end && end+batch[j].Len-first.Off <= nvme.MaxTransfer {
				end += batch[j].Len
				j++
			}
		}
		run := batch[i:j]
		iov = iov[:0]
		fua := false
		for _, io := range run {
			iov = append(iov, io.Buf)
			fua = fua || io.FUA
		}
		if len(run) == 1 || !vb.vectorOK(iov, first.Off) {
			for _, io := range run {
				io.Run(p.be)
			}
			i = j
			continue
		}
		p.Stats.Coalesced.Add(uint64(len(run)))
		var err error
		if first.Op == nvme.OpRead {
			err = vb.ReadvAt(iov, first.Off)
		} else if err = vb.WritevAt(iov, first.Off); err == nil && fua {
			err = p.be.Flush()
		}
		for _, io := range run {
			io.Err = err
		}
		i = j
	}
	clear(iov)
	return iov
}

// finish queues a batch for the port; the first IOs of a delivery
// schedule it.
func (p *nsPool) finish(batch []*nvme.IO) {
	p.mu.Lock()
	first := len(p.done) == 0
	p.done = append(p.done, batch...)
	p.mu.Unlock()
	if first && !p.port.Do(p.deliver) {
		p.Stats.PortStopped.Inc()
	}
}

// deliver hands every finished IO to the engine (on the port's goroutine).
func (p *nsPool) deliver(*falconEndpoint) {
	p.mu.Lock()
	batch := p.done
	p.done, p.spare = p.spare[:0], nil
	p.mu.Unlock()
	p.Stats.Deliveries.Inc()
	for _, io := range batch {
		p.eng.IODone(io)
	}
	clear(batch)
	p.mu.Lock()
	if p.spare == nil {
		p.spare = batch[:0]
	}
	p.mu.Unlock()
}

// The synchronous operations, for callers off the IO path.

func (p *nsPool) ReadAt(b []byte, off int64) (int, error)  { return p.be.ReadAt(b, off) }
func (p *nsPool) WriteAt(b []byte, off int64) (int, error) { return p.be.WriteAt(b, off) }
func (p *nsPool) Flush() error                             { return p.be.Flush() }
func (p *nsPool) Discard(off, n int64) error               { return p.be.Discard(off, n) }
func (p *nsPool) WriteZeroes(off, n int64, dealloc bool) error {
	return p.be.WriteZeroes(off, n, dealloc)
}

var _ nvme.AsyncBackend = (*nsPool)(nil)
