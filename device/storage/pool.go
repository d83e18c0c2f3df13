package storage

import (
	"cmp"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/internal/stats"
	"falconnic/internal/uring"
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
	// nsPoolRing is the io_uring's submission queue: runs of IOs in the
	// kernel at once (a run is up to nvme.MaxTransfer of adjacent IOs).
	nsPoolRing = 128
)

// nsPool is a namespace backend (a file or block device) run on a bounded
// pool of worker goroutines instead of the port's (nvme.AsyncBackend).
// The engine submits each nCMD's IO; at the end of each burst of port
// work (Port.OnIdle) the IOs submitted in it are sorted and cut into
// runs of adjacent reads or writes — one 128 KiB command's 32 nCMDs are
// one run, done as one preadv/pwritev. With an io_uring (useRing) each
// run is one vectored read or write entry, and the burst's runs go to the
// kernel in one io_uring_enter from the port's goroutine; the ring's
// eventfd wakes a goroutine that has the port reap the completions.
// Without one (or for flushes, discards and write-zeroes) each run goes
// to the workers as one batch. Finished IOs come back through the port's
// work queue (Do), many per wake-up. The workers start with the first
// batch and end with the port.
type nsPool struct {
	be    nvme.Backend
	port  *port.Port
	eng   *nvme.Engine
	queue chan []*nvme.IO
	once  sync.Once
	// direct: the backend bypasses the page cache (O_DIRECT), so a
	// worker batch is one run of adjacent IOs (else up to
	// nsPoolCachedBatch IOs) and the ring takes only aligned buffers.
	direct bool

	// on the port's goroutine
	pending []*nvme.IO // submitted in this burst
	out     int        // submitted and not yet handed back

	mu    sync.Mutex
	done  []*nvme.IO // finished, waiting for the port
	spare []*nvme.IO

	// The io_uring (nil: the workers do every IO). Submission and
	// reaping run on the port's goroutine; once the port stopped, the
	// waiting goroutine drains the runs still in the kernel.
	ring       *uring.Ring
	efd        *os.File // signalled by the ring on completions
	fd         int      // the backend's descriptor
	runs       []ringRun
	freeRuns   []int32
	inRing     int  // runs submitted and not reaped
	retryArmed bool // a failed io_uring_enter is retried
	ringWaited bool // waitRing runs (from the first run on)

	Stats NSPoolCounters
}

// ringRun is a run of adjacent IOs in the io_uring: the CQE's user data
// is its index in nsPool.runs. Its IOs' buffers and its iovecs stay
// referenced here until the completion is reaped.
type ringRun struct {
	ios  []*nvme.IO
	iov  []unix.Iovec
	want int64 // bytes the run moves
}

// NSPoolCounters count a namespace pool's IOs.
type NSPoolCounters struct {
	Submitted, Full, Batches, QueueFull, Completed, Coalesced, Deliveries, PortStopped stats.Counter
	RingUnavailable, RingRuns, RingFull, RingEnterErrors, RingRedone                   stats.Counter
	RingEnters, RingReaps, OutMax                                                      stats.Counter
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
		{Name: "pool_out_max", Help: "the most IOs the pool held at once (submitted, not yet handed back; it takes at most 1024)", Counter: &c.OutMax},
		{Name: "pool_ring_unavailable", Help: "io_uring asked for but refused by the kernel: the workers do the IO", Counter: &c.RingUnavailable},
		{Name: "pool_ring_runs", Help: "runs of adjacent reads or writes submitted through io_uring", Counter: &c.RingRuns},
		{Name: "pool_ring_full", Help: "runs that found the io_uring full and went to the workers", Counter: &c.RingFull},
		{Name: "pool_ring_enter_errors", Help: "io_uring_enter calls that failed (the entries are submitted again)", Counter: &c.RingEnterErrors},
		{Name: "pool_ring_enters", Help: "io_uring_enter calls that handed runs to the kernel (runs per call: pool_ring_runs / this)", Counter: &c.RingEnters},
		{Name: "pool_ring_reaps", Help: "wake-ups of the port by the ring's completion eventfd", Counter: &c.RingReaps},
		{Name: "pool_ring_redone", Help: "io_uring runs that came back short or with EAGAIN and were redone synchronously", Counter: &c.RingRedone},
	}
}

// newNSPool returns a pool for be whose IOs complete to eng on port; with
// a port it hooks the port's bursts (before Run, or on its goroutine).
func newNSPool(be nvme.Backend, port *port.Port, eng *nvme.Engine) *nsPool {
	p := &nsPool{be: be, port: port, eng: eng, queue: make(chan []*nvme.IO, nsPoolQueue)}
	if f, ok := be.(*FileBackend); ok {
		p.direct = f.Direct()
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
	p.Stats.OutMax.Max(uint64(p.out))
	p.pending = append(p.pending, io)
	p.Stats.Submitted.Inc()
	return true
}

// flush hands the burst's IOs on, a run of adjacent reads or writes at a
// time (on the port's goroutine, at the end of a burst): to the ring, or
// to the workers as one batch. What does not fit the workers' queue waits
// for the next burst; a worker's delivery makes one.
func (p *nsPool) flush() {
	if len(p.pending) == 0 {
		return
	}
	sortIOs(p.pending)
	rest := p.pending
	defer p.submitRing()
	for len(rest) > 0 {
		n := adjacentRun(rest)
		if p.ring != nil && p.toRing(rest[:n]) {
			rest = rest[n:]
			continue
		}
		p.once.Do(func() {
			for i := 0; i < nsPoolWorkers; i++ {
				go p.work()
			}
		})
		if !p.direct && p.ring == nil { // page cache: a few workers' worth of runs together
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

// useRing has the pool submit reads and writes through an io_uring, if
// the backend is a file or block device and the kernel allows it (else
// the counter RingUnavailable tells, and the workers do them). Call
// before the pool takes IOs.
func (p *nsPool) useRing() {
	f, ok := p.be.(*FileBackend)
	if !ok || p.port == nil {
		return
	}
	r, err := uring.New(nsPoolRing)
	if err != nil {
		p.Stats.RingUnavailable.Inc()
		return
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err == nil {
		if err = r.RegisterEventFD(efd); err != nil {
			unix.Close(efd)
		}
	}
	if err != nil {
		r.Close()
		p.Stats.RingUnavailable.Inc()
		return
	}
	p.ring, p.efd, p.fd = r, os.NewFile(uintptr(efd), "nvme-namespace-uring"), int(f.f.Fd())
	p.runs = make([]ringRun, nsPoolRing)
	for i := nsPoolRing - 1; i >= 0; i-- {
		p.freeRuns = append(p.freeRuns, int32(i))
	}
}

// toRing queues a run of adjacent reads or writes in the ring; false
// leaves it to the workers (another operation, buffers O_DIRECT would
// refuse, or a full ring).
func (p *nsPool) toRing(run []*nvme.IO) bool {
	op := run[0].Op
	if op != nvme.OpRead && op != nvme.OpWrite {
		return false
	}
	if len(p.freeRuns) == 0 || p.ring.Space() == 0 {
		p.Stats.RingFull.Inc()
		return false
	}
	for _, io := range run {
		if p.direct && !directOK(io.Buf, io.Off) {
			return false
		}
	}
	id := p.freeRuns[len(p.freeRuns)-1]
	r := &p.runs[id]
	r.ios, r.iov, r.want = append(r.ios[:0], run...), r.iov[:0], 0
	opcode, flags := uint8(uring.OpReadv), uint32(0)
	if op == nvme.OpWrite {
		opcode = uring.OpWritev
	}
	for _, io := range run {
		v := unix.Iovec{Base: unsafe.SliceData(io.Buf)}
		v.SetLen(len(io.Buf))
		r.iov = append(r.iov, v)
		r.want += int64(len(io.Buf))
		if io.FUA && op == nvme.OpWrite {
			flags = uring.RWFDSync // durable before it completes, as write + fdatasync
		}
	}
	if p.ring.Prep(opcode, p.fd, r.iov, run[0].Off, flags, uint64(id)) != nil {
		p.Stats.RingFull.Inc()
		return false
	}
	p.freeRuns = p.freeRuns[:len(p.freeRuns)-1]
	if !p.ringWaited { // the first run: from now on the port reaps
		p.ringWaited = true
		go p.waitRing()
	}
	p.inRing++
	p.Stats.RingRuns.Inc()
	p.Stats.Coalesced.Add(uint64(len(run)))
	return true
}

// submitRing hands the prepared runs to the kernel. A failed
// io_uring_enter (EAGAIN, EBUSY) leaves them queued and tries again in a
// millisecond.
func (p *nsPool) submitRing() {
	if p.ring == nil {
		return
	}
	n, err := p.ring.Submit()
	if err == nil {
		if n > 0 {
			p.Stats.RingEnters.Inc()
		}
		return
	}
	p.Stats.RingEnterErrors.Inc()
	if p.retryArmed {
		return
	}
	p.retryArmed = true
	p.port.Clock().AfterFunc(time.Millisecond, func() {
		p.port.Do(func(*falcon.Endpoint) {
			p.retryArmed = false
			p.submitRing()
		})
	})
}

// reapRing finishes the runs the kernel completed (on the port's
// goroutine). A run that came back short, or with EAGAIN, is redone
// synchronously (rare: a file changed under the namespace, or a device
// that refused a non-blocking attempt).
func (p *nsPool) reapRing(*falcon.Endpoint) {
	p.Stats.RingReaps.Inc()
	p.ring.Reap(func(c uring.CQE) {
		if c.UserData >= uint64(len(p.runs)) {
			return // not one of ours: cannot happen
		}
		r := &p.runs[c.UserData]
		p.inRing--
		switch {
		case int64(c.Res) == r.want:
			settle(r.ios, r.want, nil)
		case c.Res < 0 && c.Res != -int32(unix.EAGAIN) && c.Res != -int32(unix.EINTR):
			settle(r.ios, 0, unix.Errno(-c.Res))
		default: // the IOs wholly done stand; the rest is done again
			p.Stats.RingRedone.Inc()
			rest, done := r.ios, int64(max(c.Res, 0))
			for len(rest) > 0 && done >= rest[0].Len {
				rest[0].Err, done = nil, done-rest[0].Len
				rest = rest[1:]
			}
			p.run(rest, nil)
		}
		p.Stats.Completed.Add(uint64(len(r.ios)))
		p.out -= len(r.ios)
		for _, io := range r.ios {
			p.eng.IODone(io)
		}
		clear(r.ios)
		p.freeRuns = append(p.freeRuns, int32(c.UserData))
	})
}

// waitRing has the port reap completions whenever the ring signals its
// eventfd. When the port stops, nothing submits or reaps any more: it
// waits for the runs still in the kernel (their buffers stay referenced
// until then) and closes the ring.
func (p *nsPool) waitRing() {
	go func() {
		<-p.port.Stopped()
		p.efd.SetReadDeadline(time.Unix(1, 0))
	}()
	var b [8]byte
	for {
		if _, err := p.efd.Read(b[:]); err != nil {
			break
		}
		if !p.port.Do(p.reapRing) {
			break
		}
	}
	<-p.port.Stopped()
	for p.inRing > 0 {
		if p.ring.Wait(1) != nil {
			return // leave the ring open: the kernel may still write the buffers
		}
		p.inRing -= p.ring.Reap(func(uring.CQE) {})
	}
	p.ring.Close()
	p.efd.Close()
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
		case <-p.port.Stopped():
			return
		}
	}
}

// vectorBackend is a backend with vectored reads and writes (FileBackend).
type vectorBackend interface {
	ReadvAt(bufs [][]byte, off int64) (int64, error)
	WritevAt(bufs [][]byte, off int64) (int64, error)
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
		var done int64
		var err error
		if run[0].Op == nvme.OpRead {
			done, err = vb.ReadvAt(iov, run[0].Off)
		} else if done, err = vb.WritevAt(iov, run[0].Off); err == nil && fua {
			if err = p.be.Flush(); err != nil {
				done = 0 // none of the run is known durable
			}
		}
		settle(run, done, err)
	}
	clear(iov)
	return iov
}

// settle gives a run's IOs their outcome when the first done bytes of the
// run were transferred before err: the IOs wholly within them succeed.
func settle(run []*nvme.IO, done int64, err error) {
	for _, io := range run {
		io.Err = nil
		if done -= io.Len; done < 0 {
			io.Err = err
		}
	}
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
func (p *nsPool) deliver(*falcon.Endpoint) {
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
