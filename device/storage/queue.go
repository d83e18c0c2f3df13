package storage

import (
	"sync"

	"falconnic/falcon"
	"falconnic/nvme"
	"falconnic/vhostuser"
)

// blkReq is one virtio-blk request in flight: its chain head, status byte
// and the NVMe commands it became. The worker owns it until it is handed
// to the port; the port's goroutine owns it until its last command
// completes and it is sent back on cpl.
type blkReq struct {
	w       *blkWorker
	next    *blkReq // the next request of a completed batch (blkWorker.done, cpl)
	head    uint16
	status  []byte
	written uint32
	result  byte
	pending int
	retries int
	cmds    []nvme.Command
	segs    [][]byte
	doneFn  func(*nvme.Command)
	// mem is the guest memory table the request's buffers are in, held
	// (a reference) until it is answered or abandoned: a SET_MEM_TABLE
	// meanwhile moves the queue to a new table but cannot unmap this one.
	mem *vhostuser.MemTable
}

// blkWorker is one queue's state on its owning goroutine.
type blkWorker struct {
	b      *Blk
	q      *vhostuser.Queue
	chain  vhostuser.Chain
	req    blkRequest
	ranges []blkSegment
	reqs   []*blkReq
	free   []*blkReq
	live   int // requests handed to the port
	sub    *blkSubmit
	// cpl delivers completed requests a batch at a time: each element
	// heads a list linked through blkReq.next. It holds a slot per
	// request, so the port never blocks on it.
	cpl chan *blkReq
	// On the port's goroutine: the requests completed during its
	// current burst of work (a list through blkReq.next, handed over
	// on cpl at the end of the burst: Blk.flushDone), and whether the
	// worker is in Blk.ready.
	done, doneTail *blkReq
	doneN          int
	ready          bool
}

// blkHandOverMax is how many completed requests a worker gets at once
// without waiting for the end of the port's burst: a long burst does not
// hold its first completions back.
const blkHandOverMax = 32

// blkHoldKicksLive is how many requests in flight let the worker tell the
// guest not to kick for new ones: the next completion wakes the worker,
// which then takes whatever the guest added meanwhile.
const blkHoldKicksLive = 4

// blkSubmit is a batch of requests handed to the port in one work item;
// pooled, with its function bound once, so a batch costs no allocation.
type blkSubmit struct {
	b    *Blk
	reqs []*blkReq
	fn   func(*falcon.Endpoint)
}

var blkSubmits sync.Pool

func init() {
	blkSubmits.New = func() any {
		s := &blkSubmit{}
		s.fn = s.run
		return s
	}
}

// run submits the batch's commands on the port's goroutine, then
// returns the batch to the pool.
func (s *blkSubmit) run(*falcon.Endpoint) {
	for _, r := range s.reqs {
		for i := range r.cmds {
			s.b.submit(r, &r.cmds[i])
		}
	}
	clear(s.reqs)
	s.reqs, s.b = s.reqs[:0], nil
	blkSubmits.Put(s)
}

func newBlkWorker(b *Blk, q *vhostuser.Queue) *blkWorker {
	n := max(q.Size(), 1)
	w := &blkWorker{b: b, q: q, cpl: make(chan *blkReq, n)}
	for i := 0; i < n; i++ {
		r := &blkReq{w: w}
		r.doneFn = r.done
		w.free = append(w.free, r)
	}
	w.reqs = append(w.reqs, w.free...)
	return w
}

// pop takes every available chain, answers what needs no NVMe command
// and submits the rest to the port in one batch.
func (w *blkWorker) pop() {
	pushed := false
	for len(w.free) > 0 && w.q.Pop(&w.chain) {
		if w.start(&w.chain) {
			continue
		}
		pushed = true
	}
	if s := w.sub; s != nil {
		w.sub = nil
		w.b.cfg.Port.Do(s.fn)
	}
	if w.live >= blkHoldKicksLive {
		w.q.HoldKicks()
	}
	if pushed {
		w.q.Notify()
	}
}

// start decodes one chain. It returns true when the request went to the
// batch, false when it was answered (or dropped) at once.
func (w *blkWorker) start(c *vhostuser.Chain) bool {
	s := &w.b.Stats
	s.Requests.Inc()
	r := &w.req
	if err := parseBlkRequest(c.Bufs, r); err != nil {
		switch err {
		case errBlkNoStatus:
			s.NoStatus.Inc()
		case errBlkLayout:
			s.BadLayout.Inc()
		default:
			s.BadHeader.Inc()
		}
		if r.status != nil {
			r.status[0] = blkStatusIOErr
			w.q.Push(c.Head, 1)
		} else {
			w.q.Push(c.Head, 0)
		}
		return false
	}
	q := w.free[len(w.free)-1]
	q.head, q.status, q.result, q.written = c.Head, r.status, blkStatusOK, 1
	q.cmds, q.segs = q.cmds[:0], q.segs[:0]
	st := w.build(q, r)
	if st != blkStatusOK || len(q.cmds) == 0 {
		r.status[0] = st
		w.q.Push(c.Head, q.written)
		return false
	}
	if t := w.q.MemTable(); t != nil && t.TryAcquire() {
		q.mem = t
	}
	w.free = w.free[:len(w.free)-1]
	q.pending = len(q.cmds)
	w.live++
	if w.sub == nil {
		w.sub = blkSubmits.Get().(*blkSubmit)
		w.sub.b = w.b
	}
	w.sub.reqs = append(w.sub.reqs, q)
	return true
}

// build turns a decoded request into NVMe commands in q.cmds; a status
// other than OK (or no commands) answers the request at once.
func (w *blkWorker) build(q *blkReq, r *blkRequest) byte {
	s := &w.b.Stats
	info := w.b.cfg.Info
	bs := uint64(info.BlockSize)
	nsid := w.b.cfg.NSID
	switch r.typ {
	case blkTypeIn, blkTypeOut:
		op, data, n := nvme.OpRead, r.in, r.inLen
		if r.typ == blkTypeOut {
			op, data, n = nvme.OpWrite, r.out, r.outLen
			s.Writes.Inc()
			s.WriteBytes.Add(uint64(n))
		} else {
			q.written = uint32(r.inLen) + 1
			s.Reads.Inc()
			s.ReadBytes.Add(uint64(n))
		}
		if n == 0 || uint64(n)%bs != 0 || r.sector >= 1<<54 || r.sector*blkSector%bs != 0 {
			s.Misaligned.Inc()
			return blkStatusIOErr
		}
		if n/nvme.MaxTransfer >= blkMaxSubcommands {
			s.TooLarge.Inc()
			return blkStatusIOErr
		}
		lba := r.sector * blkSector / bs
		var bounds [][2]int
		for off := 0; off < n; off += nvme.MaxTransfer {
			k := min(n-off, nvme.MaxTransfer)
			start := len(q.segs)
			q.segs = slice(q.segs, data, off, k)
			bounds = append(bounds, [2]int{start, len(q.segs)})
			q.cmds = append(q.cmds, nvme.Command{Op: op, NSID: nsid, SLBA: lba + uint64(off)/bs, Blocks: uint32(uint64(k) / bs),
				FUA: op == nvme.OpWrite && w.b.writeThrough.Load()})
		}
		for i := range q.cmds {
			q.cmds[i].Data = q.segs[bounds[i][0]:bounds[i][1]:bounds[i][1]]
		}
	case blkTypeFlush:
		s.Flushes.Inc()
		q.cmds = append(q.cmds, nvme.Command{Op: nvme.OpFlush, NSID: nsid})
	case blkTypeGetID:
		s.GetIDs.Inc()
		var id [blkIDLen]byte
		copy(id[:], w.b.cfg.Serial)
		n := min(r.inLen, blkIDLen)
		off := 0
		for _, d := range r.in {
			off += copy(d, id[off:n])
		}
		q.written = uint32(n) + 1
		return blkStatusOK
	case blkTypeDiscard, blkTypeWriteZeroes:
		op := nvme.OpDSM
		if r.typ == blkTypeWriteZeroes {
			op = nvme.OpWriteZeroes
			s.WriteZeroes.Inc()
		} else {
			s.Discards.Inc()
		}
		var ok bool
		w.ranges, ok = r.segments(w.ranges)
		if !ok {
			s.BadSegments.Inc()
			return blkStatusIOErr
		}
		for _, g := range w.ranges {
			if g.sector >= 1<<54 || (g.sector*blkSector)%bs != 0 || (uint64(g.sectors)*blkSector)%bs != 0 {
				s.Misaligned.Inc()
				return blkStatusIOErr
			}
			lba, blocks := g.sector*blkSector/bs, uint64(g.sectors)*blkSector/bs
			if blocks/nvme.MaxBlocks+uint64(len(q.cmds)) >= blkMaxSubcommands {
				s.TooLarge.Inc()
				return blkStatusIOErr
			}
			for blocks > 0 {
				k := min(blocks, nvme.MaxBlocks)
				q.cmds = append(q.cmds, nvme.Command{Op: op, NSID: nsid, SLBA: lba, Blocks: uint32(k),
					Deallocate: g.unmap})
				lba += k
				blocks -= k
			}
		}
	default:
		s.Unsupported.Inc()
		return blkStatusUnsupp
	}
	for i := range q.cmds {
		q.cmds[i].Done = q.doneFn
	}
	return blkStatusOK
}

// done runs on the port's goroutine for each completed command.
func (r *blkReq) done(c *nvme.Command) {
	if !c.Status.OK() && r.w.b.retry(r, c) {
		return
	}
	if !c.Status.OK() && r.result == blkStatusOK {
		r.result = blkStatusIOErr
		if c.Status == nvme.StatusInvalidOpcode {
			r.result = blkStatusUnsupp
		}
	}
	r.pending--
	if r.pending == 0 {
		r.w.completed(r)
	}
}

// completed queues r, answered by the NVMe side, for its worker (on the
// port's goroutine): the requests a burst of port work completes go to
// the worker together at its end (Blk.flushDone), one channel operation
// and at most one wake-up for the lot.
func (w *blkWorker) completed(r *blkReq) {
	r.next = nil
	if w.doneTail == nil {
		w.done = r
	} else {
		w.doneTail.next = r
	}
	w.doneTail = r
	w.doneN++
	if w.doneN >= blkHandOverMax {
		w.handOver()
		return
	}
	if !w.ready {
		w.ready = true
		w.b.ready = append(w.b.ready, w)
	}
}

// handOver sends the worker the requests completed since the last
// hand-over (on the port's goroutine).
func (w *blkWorker) handOver() {
	r := w.done
	w.done, w.doneTail, w.doneN = nil, nil, 0
	if r != nil {
		w.cpl <- r // never blocks: cpl holds a slot per request
	}
}

// finishAll answers a list of completed requests (linked through next)
// and publishes the used ring once for them all.
func (w *blkWorker) finishAll(r *blkReq) {
	for r != nil {
		next := r.next
		r.next = nil
		w.finish(r)
		r = next
	}
	w.q.Flush()
}

// finish answers a completed request: its used element is filled, the
// caller publishes it (Flush).
func (w *blkWorker) finish(r *blkReq) {
	if r.result == blkStatusIOErr {
		w.b.Stats.IOErrors.Inc()
	}
	r.status[0] = r.result
	w.q.Fill(r.head, r.written)
	r.status, r.cmds = nil, r.cmds[:0]
	clear(r.segs)
	r.releaseMem()
	w.live--
	w.free = append(w.free, r)
}

// reap answers every completed request waiting, then interrupts once if
// it answered any (or pushed says the caller already did).
func (w *blkWorker) reap(pushed bool) {
	n := 0
	for {
		select {
		case r := <-w.cpl:
			w.finishAll(r)
			n++
			continue
		default:
		}
		break
	}
	if n > 0 || pushed {
		w.q.Notify()
	}
}

// drain waits for the requests in flight (their data lands in guest
// memory) before the worker returns; after blkDrainTimeout it detaches the
// rest from guest memory and leaves them unanswered: with inflight
// tracking the next session resubmits them.
func (w *blkWorker) drain() {
	expired := make(chan struct{})
	t := w.b.cfg.Port.Clock().AfterFunc(w.b.drain, func() { close(expired) })
	defer t.Stop()
	for w.live > 0 {
		select {
		case r := <-w.cpl:
			w.finishAll(r)
		case <-expired:
			w.cancelAll()
			return
		}
	}
	w.q.Notify()
}

func (w *blkWorker) cancelAll() {
	b := w.b
	b.cfg.Port.Call(func(*falcon.Endpoint) {
		for _, r := range w.allLive() {
			for i := range r.cmds {
				b.unpark(&r.cmds[i])
				switch {
				case b.path != nil:
					b.path.Cancel(&r.cmds[i])
				case b.retired != nil: // commands may still be on it
					b.retired.Cancel(&r.cmds[i])
				default:
					r.cmds[i].Data, r.cmds[i].Done = nil, func(*nvme.Command) {}
				}
			}
			r.releaseMem() // detached: the NVMe side no longer touches its buffers
			w.b.Stats.Cancelled.Inc()
		}
	})
}

// releaseMem drops the request's memory table reference.
func (r *blkReq) releaseMem() {
	if r.mem != nil {
		r.mem.Release()
		r.mem = nil
	}
}

// allLive returns the requests handed to the port and not yet back (run
// on the port's goroutine, which owns them).
func (w *blkWorker) allLive() []*blkReq {
	var out []*blkReq
	free := make(map[*blkReq]bool, len(w.free))
	for _, r := range w.free {
		free[r] = true
	}
	// Completed, not yet answered: still the worker's to answer, or,
	// if it gives up now, the next session's to resubmit (inflight).
	for len(w.cpl) > 0 {
		for r := <-w.cpl; r != nil; r = r.next {
			free[r] = true
		}
	}
	for r := w.done; r != nil; r = r.next {
		free[r] = true
	}
	for _, r := range w.reqs {
		if !free[r] {
			out = append(out, r)
		}
	}
	return out
}
