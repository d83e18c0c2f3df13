package device

import (
	"cmp"
	"slices"
	"sync"

	"falconnic/internal/stats"
	"falconnic/nvme"
)

// Namespace IO pool sizes. A queue-depth-32 stream of 128 KiB commands is
// 1024 nCMDs of 4 KiB; the pool takes that many at once (beyond it the
// engine holds IOs in its own table-bounded queue, counted as
// nvme.Counters.BackendBusy). 32 workers keep 32 independent IOs in the
// kernel at once, what a local disk's aio=native has for queue depth 32.
const (
	nsPoolWorkers = 32
	nsPoolMax     = 1024 // IOs submitted and not yet handed back
	nsPoolQueue   = 256  // batches waiting for a worker
	// nsPoolCachedBatch: through the page cache (no O_DIRECT) an IO is a
	// copy, cheaper than waking a worker for it, so one batch takes up to
	// this many IOs; with O_DIRECT each run is its own batch, so that
	// independent IOs are in the device at once.
	nsPoolCachedBatch = 64
)

// nsPool is a namespace backend (a file or block device) run on a bounded
// pool of worker goroutines instead of the port's (nvme.AsyncBackend).
// The engine submits each nCMD's IO; at the end of each burst of port
// work (FalconPort.OnIdle) the IOs submitted in it are sorted and cut into
// runs of adjacent reads or writes — one 128 KiB command's 32 nCMDs are
// one run, done by one worker as one preadv/pwritev — and each run goes
// to the workers as one batch. Finished IOs come back through the port's
// work queue (Do), many per wake-up. The workers start with the first IO
// and end with the port.
type nsPool struct {
	be    nvme.Backend
	port  *FalconPort
	eng   *nvme.Engine
	queue chan []*nvme.IO
	once  sync.Once
	// parallel: one batch per run of adjacent IOs (O_DIRECT), instead of
	// up to nsPoolCachedBatch IOs per batch.
	parallel bool

	// on the port's goroutine
	pending []*nvme.IO // submitted in this burst
	out     int        // submitted and not yet handed back

	mu    sync.Mutex
	done  []*nvme.IO // finished, waiting for the port
	spare []*nvme.IO

	Stats NSPoolCounters
}

// NSPoolCounters count a namespace pool's IOs.
type NSPoolCounters struct {
	Submitted, Full, Batches, QueueFull, Completed, Coalesced, Deliveries, PortStopped stats.Counter
}

// Set lists the counters with help text.
func (c *NSPoolCounters) Set() stats.Set {
	return stats.Set{
		{Name: "pool_submitted", Help: "backend IOs taken by the namespace's worker pool", Counter: &c.Submitted},
		{Name: "pool_full", Help: "backend IOs refused: the pool had its maximum in flight (the engine retries)", Counter: &c.Full},
		{Name: "pool_batches", Help: "batches (runs of adjacent IOs, or single IOs) handed to the workers", Counter: &c.Batches},
		{Name: "pool_queue_full", Help: "times the workers' queue was full at the end of a burst (the rest waits for the next)", Counter: &c.QueueFull},
		{Name: "pool_completed", Help: "backend IOs the workers finished", Counter: &c.Completed},
		{Name: "pool_coalesced", Help: "backend IOs done as part of a vectored read or write of adjacent IOs", Counter: &c.Coalesced},
		{Name: "pool_deliveries", Help: "batches of finished IOs handed to the port", Counter: &c.Deliveries},
		{Name: "pool_port_stopped", Help: "finished IOs dropped: the port had stopped", Counter: &c.PortStopped},
	}
}

// newNSPool returns a pool for be whose IOs complete to eng on port; with
// a port it hooks the port's bursts (before Run, or on its goroutine).
func newNSPool(be nvme.Backend, port *FalconPort, eng *nvme.Engine) *nsPool {
	p := &nsPool{be: be, port: port, eng: eng, queue: make(chan []*nvme.IO, nsPoolQueue)}
	if f, ok := be.(*FileBackend); ok {
		p.parallel = f.Direct()
	}
	if port != nil {
		port.OnIdle(p.flush)
	}
	return p
}

// Submit implements nvme.AsyncBackend (on the port's goroutine).
func (p *nsPool) Submit(io *nvme.IO) bool {
	if p.out >= nsPoolMax {
		p.Stats.Full.Inc()
		return false
	}
	p.out++
	p.pending = append(p.pending, io)
	p.Stats.Submitted.Inc()
	return true
}

// flush hands the burst's IOs to the workers, a run of adjacent reads or
// writes per batch (on the port's goroutine, at the end of a burst). What
// does not fit the queue waits for the next burst; a worker's delivery
// makes one.
func (p *nsPool) flush() {
	if len(p.pending) == 0 {
		return
	}
	p.once.Do(func() {
		for i := 0; i < nsPoolWorkers; i++ {
			go p.work()
		}
	})
	sortIOs(p.pending)
	rest := p.pending
	for len(rest) > 0 {
		n := adjacentRun(rest)
		if !p.parallel { // page cache: a few workers' worth of runs together
			for n < len(rest) && n < nsPoolCachedBatch {
				n += adjacentRun(rest[n:])
			}
		}
		select {
		case p.queue <- slices.Clone(rest[:n]):
			p.Stats.Batches.Inc()
			rest = rest[n:]
		default:
			p.Stats.QueueFull.Inc()
			k := copy(p.pending, rest)
			clear(p.pending[k:])
			p.pending = p.pending[:k]
			return
		}
	}
	clear(p.pending)
	p.pending = p.pending[:0]
}

// sortIOs orders IOs by operation, then offset.
func sortIOs(ios []*nvme.IO) {
	slices.SortFunc(ios, func(a, b *nvme.IO) int {
		if a.Op != b.Op {
			return int(a.Op) - int(b.Op)
		}
		return cmp.Compare(a.Off, b.Off)
	})
}

// adjacentRun returns how many of the sorted ios, from the first, are
// reads (or writes) each starting where the one before ends, within one
// nvme.MaxTransfer; 1 for any other operation.
func adjacentRun(ios []*nvme.IO) int {
	first := ios[0]
	if first.Op != nvme.OpRead && first.Op != nvme.OpWrite {
		return 1
	}
	end, n := first.Off+first.Len, 1
	for n < len(ios) && ios[n].Op == first.Op && ios[n].Off == end && end+ios[n].Len-first.Off <= nvme.MaxTransfer {
		end += ios[n].Len
		n++
	}
	return n
}

// work is one worker: a batch at a time, handed back whole.
func (p *nsPool) work() {
	var iov [][]byte
	for {
		select {
		case batch := <-p.queue:
			iov = p.run(batch, iov)
			p.Stats.Completed.Add(uint64(len(batch)))
			p.finish(batch)
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
// adjacent reads (or writes) becomes one preadv (pwritev); a run with a
// FUA write is flushed once after. Everything else runs one by one. iov
// is scratch, returned for reuse.
func (p *nsPool) run(batch []*nvme.IO, iov [][]byte) [][]byte {
	vb, ok := p.be.(vectorBackend)
	if !ok || len(batch) == 1 {
		for _, io := range batch {
			io.Run(p.be)
		}
		return iov
	}
	sortIOs(batch)
	for len(batch) > 0 {
		n := adjacentRun(batch)
		run := batch[:n]
		batch = batch[n:]
		iov = iov[:0]
		fua := false
		for _, io := range run {
			iov = append(iov, io.Buf)
			fua = fua || io.FUA
		}
		if n == 1 || !vb.vectorOK(iov, run[0].Off) {
			for _, io := range run {
				io.Run(p.be)
			}
			continue
		}
		p.Stats.Coalesced.Add(uint64(n))
		var err error
		if run[0].Op == nvme.OpRead {
			err = vb.ReadvAt(iov, run[0].Off)
		} else if err = vb.WritevAt(iov, run[0].Off); err == nil && fua {
			err = p.be.Flush()
		}
		for _, io := range run {
			io.Err = err
		}
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
	p.out -= len(batch)
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
