package vhostuser

import (
	"encoding/binary"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"falconnic/internal/stats"
)

// Split-ring layout constants (virtio 1.2 §2.7).
const (
	descSize          = 16
	descFNext         = 1
	descFWrite        = 2
	descFIndirect     = 4
	availFNoInterrupt = 1
	// MaxQueueSize is the largest split ring (virtio 1.2 §2.7).
	MaxQueueSize = 32768
	// maxChainBytes caps the bytes of one chain (lengths are u32 in the used ring).
	maxChainBytes = 1 << 32
)

// Buf is one descriptor of a chain, already translated to our mapping of
// guest memory. Data stays valid until the owning worker's next Pop,
// Refresh or return.
type Buf struct {
	Data  []byte
	Write bool // device-writable
}

// Chain is one validated descriptor chain. Reuse a Chain across Pops: its
// Bufs slice is reused, so steady-state popping does not allocate.
type Chain struct {
	Head     uint16
	Bufs     []Buf
	ReadLen  uint64 // bytes in readable descriptors
	WriteLen uint64 // bytes in writable descriptors
}

// Queue is one virtqueue as a device sees it. Only the goroutine running
// Device.RunQueue for it may call Pop, Push, Notify and Refresh.
type Queue struct {
	index int
	sess  *Session
	c     *Counters

	// ring configuration (set by the control loop while the queue is stopped)
	size                        uint16
	descUVA, availUVA, usedUVA  uint64
	eventIdx, indirect          bool
	lastAvail, usedIdx          uint16
	kick                        *os.File
	call                        atomic.Pointer[os.File]
	errFD                       int
	enabled, running, addrValid bool
	kickSet                     bool

	// worker state
	mem                  *MemTable
	desc, avail, used    []byte
	broken               bool
	signalled            uint16
	signalledValid       bool
	pushed               bool
	inflight             *inflightQueue
	resubmit             []uint16
	wake                 chan struct{}
	done                 chan struct{}
	exited               chan struct{}
	callBuf              [8]byte
	kickReaderDone       chan struct{}
	lastAvailPublishedEv uint16
	pubAvail             atomic.Uint32 // lastAvail mirror for Status and the watchdog
	mark                 uint16
	markClean            bool

	// watchdog state (watchdog.go): mirrors the worker keeps up to date,
	// and what the watchdog saw at its last look (under the session lock)
	watched   atomic.Bool
	kicks     atomic.Uint64 // kick eventfd wake-ups of this ring
	lastKick  atomic.Int64  // when the last kick came (Unix ns)
	lastCall  atomic.Int64  // when the last call went (Unix ns)
	pubUsed   atomic.Uint32 // used idx last published
	callUsed  atomic.Uint32 // used idx at the last call, | callUsedValid
	startUsed uint16        // used idx when the ring started
	watch     watchState
	watchSame int // looks in a row that saw watch unchanged
}

func newQueue(s *Session, index int) *Queue {
	q := &Queue{index: index, sess: s, c: s.c, errFD: -1, wake: make(chan struct{}, 1)}
	binary.LittleEndian.PutUint64(q.callBuf[:], 1)
	return q
}

// Index returns the virtqueue index (net: 2k = RX of pair k, 2k+1 = TX).
func (q *Queue) Index() int { return q.index }

// Size returns the ring size.
func (q *Queue) Size() int { return int(q.size) }

// Wake delivers coalesced kicks (and nudges after control changes). After a
// wake the worker calls Pop or Refresh.
func (q *Queue) Wake() <-chan struct{} { return q.wake }

// Done is closed when the worker must return.
func (q *Queue) Done() <-chan struct{} { return q.done }

// LastAvail returns the next avail index the device will read.
func (q *Queue) LastAvail() uint16 { return q.lastAvail }

// MemTable returns the memory table the worker's rings and popped chains
// point into: valid until its next Pop or Refresh moves it to a newer
// table. A device that uses a chain's buffers after that (requests in
// flight elsewhere) takes its own reference with TryAcquire and Releases
// it when done, so that a SET_MEM_TABLE cannot unmap them under it.
func (q *Queue) MemTable() *MemTable { return q.mem }

// nudge wakes the worker without a kick.
func (q *Queue) nudge() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Refresh moves the worker to the session's current memory table if it
// changed and re-translates the rings. It reports whether the rings are usable.
func (q *Queue) Refresh() bool {
	cur := q.sess.mem.Load()
	if cur == q.mem && q.desc != nil {
		return !q.broken
	}
	for cur != nil && !cur.TryAcquire() {
		cur = q.sess.mem.Load()
	}
	if q.mem != nil {
		q.mem.Release()
	}
	q.mem = cur
	q.desc, q.avail, q.used = nil, nil, nil
	if cur == nil {
		q.broken = true
		return false
	}
	n := uint64(q.size)
	var err1, err2, err3 error
	q.desc, err1 = cur.TranslateUVA(q.descUVA, descSize*n)
	q.avail, err2 = cur.TranslateUVA(q.availUVA, 6+2*n)
	q.used, err3 = cur.TranslateUVA(q.usedUVA, 6+8*n)
	if err1 != nil || err2 != nil || err3 != nil {
		q.c.RingUnmapped.Inc()
		q.desc, q.avail, q.used = nil, nil, nil
		q.broken = true
		return false
	}
	// Ring words are accessed with 32-bit atomics: the host addresses must
	// keep the ring alignment (a region mapped at an odd file offset would not).
	if uintptr(unsafe.Pointer(&q.desc[0]))%16 != 0 || uintptr(unsafe.Pointer(&q.avail[0]))%2 != 0 || uintptr(unsafe.Pointer(&q.used[0]))%4 != 0 {
		q.c.BadRingAddr.Inc()
		q.desc, q.avail, q.used = nil, nil, nil
		q.broken = true
		return false
	}
	q.broken = false
	return true
}

// release drops the worker's memory reference (worker exit).
func (q *Queue) release() {
	if q.mem != nil {
		q.mem.Release()
		q.mem = nil
	}
	q.desc, q.avail, q.used = nil, nil, nil
}

// load16 reads a little-endian u16 that another agent may write, with an
// atomic load of the aligned 32-bit word that holds it.
func load16(b []byte, off int) uint16 {
	p := unsafe.Pointer(&b[off])
	if uintptr(p)&3 == 0 {
		return uint16(atomic.LoadUint32((*uint32)(p)))
	}
	return uint16(atomic.LoadUint32((*uint32)(unsafe.Add(p, -2))) >> 16)
}

// store16 writes a u16 atomically without touching its 32-bit neighbour.
func store16(b []byte, off int, v uint16) {
	p := unsafe.Pointer(&b[off])
	shift := 0
	if uintptr(p)&3 != 0 {
		p = unsafe.Add(p, -2)
		shift = 16
	}
	w := (*uint32)(p)
	for {
		old := atomic.LoadUint32(w)
		nw := old&^(0xffff<<shift) | uint32(v)<<shift
		if atomic.CompareAndSwapUint32(w, old, nw) {
			return
		}
	}
}

// Pop returns the next valid chain. Invalid chains are counted by cause and
// returned to the guest with length 0; a bad head or a runaway avail idx
// breaks the queue until it is restarted. When Pop reports false it has
// armed avail_event, so an EVENT_IDX guest will kick for more.
func (q *Queue) Pop(c *Chain) bool {
	if !q.Refresh() {
		return false
	}
	if len(q.resubmit) > 0 {
		head := q.resubmit[0]
		q.resubmit = q.resubmit[1:]
		if err := q.walk(head, c); err != nil {
			q.countChain(err)
			q.Push(head, 0)
			return q.Pop(c)
		}
		q.c.ChainsPopped.Inc()
		return true
	}
	for {
		availIdx := load16(q.avail, 2)
		if availIdx == q.lastAvail {
			// avail_event is written even without EVENT_IDX: the 2 bytes
			// belong to the used ring either way (virtio 1.2 §2.7, "6 +
			// 8*Queue Size"), and a guest that uses EVENT_IDX although
			// QEMU did not pass it on (a QEMU 7.2 reconnect quirk) then
			// still kicks us.
			q.setAvailEvent(q.lastAvail)
			if load16(q.avail, 2) == q.lastAvail {
				return false
			}
			continue
		}
		if availIdx-q.lastAvail > q.size {
			q.c.AvailIdxJump.Inc()
			q.broken = true
			return false
		}
		head := binary.LittleEndian.Uint16(q.avail[4+2*int(q.lastAvail%q.size):])
		q.lastAvail++
		q.pubAvail.Store(uint32(q.lastAvail))
		if head >= q.size {
			q.c.BadHead.Inc()
			q.broken = true
			return false
		}
		if err := q.walk(head, c); err != nil {
			q.countChain(err)
			q.Push(head, 0)
			q.markClean = false
			continue
		}
		if q.inflight != nil {
			q.inflight.popped(head)
		}
		q.c.ChainsPopped.Inc()
		return true
	}
}

// HoldKicks asks an EVENT_IDX guest not to kick for the chains it adds
// next (avail_event one behind what was taken: the guest's new avail idx
// never crosses it): the caller looks at the ring again on its own, e.g.
// when completions of requests it has in flight wake it. The next Pop
// that finds the ring empty arms avail_event again. Without EVENT_IDX it
// does nothing.
func (q *Queue) HoldKicks() {
	if q.eventIdx && q.avail != nil {
		q.setAvailEvent(q.lastAvail - 1)
	}
}

func (q *Queue) setAvailEvent(v uint16) {
	if q.lastAvailPublishedEv == v {
		return
	}
	store16(q.used, 4+8*int(q.size), v)
	q.lastAvailPublishedEv = v
}

type chainErr uint8

const (
	chainOK chainErr = iota
	errLoop
	errTooLong
	errBadGPA
	errCrossing
	errBadNext
	errDirection
	errBadIndirect
	errIndirectNotNegotiated
)

func (e chainErr) Error() string {
	return [...]string{"ok", "loop", "too long", "bad gpa", "crosses region", "bad next", "direction", "bad indirect", "indirect not negotiated"}[e]
}

// chainCounters maps each chain error to its counter.
var chainCounters = [...]func(*Counters) *stats.Counter{
	errLoop:                  func(c *Counters) *stats.Counter { return &c.ChainLoop },
	errTooLong:               func(c *Counters) *stats.Counter { return &c.ChainTooLong },
	errBadGPA:                func(c *Counters) *stats.Counter { return &c.ChainBadGPA },
	errCrossing:              func(c *Counters) *stats.Counter { return &c.ChainCrossing },
	errBadNext:               func(c *Counters) *stats.Counter { return &c.ChainBadNext },
	errDirection:             func(c *Counters) *stats.Counter { return &c.ChainDirection },
	errBadIndirect:           func(c *Counters) *stats.Counter { return &c.ChainBadIndir },
	errIndirectNotNegotiated: func(c *Counters) *stats.Counter { return &c.ChainIndirNoNeg },
}

func (q *Queue) countChain(err error) {
	if ce, ok := err.(chainErr); ok && int(ce) < len(chainCounters) && chainCounters[ce] != nil {
		chainCounters[ce](q.c).Inc()
	}
}

// walk validates and translates the chain starting at head.
func (q *Queue) walk(head uint16, c *Chain) error {
	c.Head = head
	c.Bufs = c.Bufs[:0]
	c.ReadLen, c.WriteLen = 0, 0
	return walkChain(q.mem, q.desc, head, q.indirect, c)
}

// walkChain is the descriptor-chain walker over a descriptor table. It is
// a pure function of guest memory so it can be fuzzed on its own.
func walkChain(mem *MemTable, table []byte, head uint16, indirectOK bool, c *Chain) error {
	n := len(table) / descSize
	i := int(head)
	limit := n
	count := 0
	inIndirect := false
	for {
		if count >= limit {
			return errLoop
		}
		if i >= n {
			return errBadNext
		}
		d := table[i*descSize : (i+1)*descSize]
		addr := binary.LittleEndian.Uint64(d[0:])
		length := binary.LittleEndian.Uint32(d[8:])
		flags := binary.LittleEndian.Uint16(d[12:])
		next := binary.LittleEndian.Uint16(d[14:])
		if flags&descFIndirect != 0 {
			if !indirectOK {
				return errIndirectNotNegotiated
			}
			if inIndirect || count != 0 || flags&descFNext != 0 || length == 0 || length%descSize != 0 || length/descSize > MaxQueueSize {
				return errBadIndirect
			}
			t, err := mem.Translate(addr, uint64(length))
			if err != nil {
				return memErr(err)
			}
			table = t
			n = len(t) / descSize
			limit = n
			i = 0
			inIndirect = true
			continue
		}
		count++
		buf, err := mem.Translate(addr, uint64(length))
		if err != nil {
			return memErr(err)
		}
		w := flags&descFWrite != 0
		if w {
			c.WriteLen += uint64(length)
		} else {
			if c.WriteLen != 0 {
				return errDirection
			}
			c.ReadLen += uint64(length)
		}
		if c.ReadLen+c.WriteLen >= maxChainBytes {
			return errTooLong
		}
		c.Bufs = append(c.Bufs, Buf{Data: buf, Write: w})
		if flags&descFNext == 0 {
			return nil
		}
		i = int(next)
	}
}

func memErr(err error) error {
	if err == ErrCrossesRegion {
		return errCrossing
	}
	return errBadGPA
}

// Push returns a chain to the guest with written bytes and publishes the
// new used idx (release order: element first, then idx).
func (q *Queue) Push(head uint16, written uint32) {
	q.Fill(head, written)
	q.Flush()
}

// Fill writes a used element without publishing it; Flush publishes every
// filled element at once (virtio-net MRG_RXBUF: a packet's buffers must
// appear together).
func (q *Queue) Fill(head uint16, written uint32) {
	if q.used == nil {
		return
	}
	if q.inflight != nil {
		q.inflight.prePush(head)
	}
	e := q.used[4+8*int(q.usedIdx%q.size):]
	binary.LittleEndian.PutUint32(e[0:], uint32(head))
	binary.LittleEndian.PutUint32(e[4:], written)
	q.usedIdx++
	q.pushed = true
	if q.inflight != nil {
		// Inflight order (libvhost-user): publish, then clear the
		// descriptor and record used_idx, so a crash never loses a request.
		q.Flush()
		q.inflight.pushed(head, q.usedIdx)
	}
}

// Flush publishes the used idx. used->flags is device-owned (we never set
// NO_NOTIFY), so the whole {flags, idx} word is ours: one atomic store.
func (q *Queue) Flush() {
	if q.used == nil {
		return
	}
	q.pubAvail.Store(uint32(q.lastAvail))
	q.pubUsed.Store(uint32(q.usedIdx))
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&q.used[0])), uint32(q.usedIdx)<<16)
}

// Mark remembers the avail position for RewindToMark.
func (q *Queue) Mark() {
	q.mark = q.lastAvail
	q.markClean = true
}

// RewindToMark gives back every chain popped since Mark (none may have been
// filled) so the next Pop returns them again: a device that cannot use
// them yet (RX without enough buffers for a whole packet) leaves them in
// the ring. It reports false, and rewinds nothing, if Pop returned a bad
// chain to the guest since Mark (that slot cannot be popped twice); the
// caller then gives its chains back with length 0. Not for queues with
// inflight tracking.
func (q *Queue) RewindToMark() bool {
	if !q.markClean {
		return false
	}
	q.lastAvail = q.mark
	return true
}

// Notify signals the call eventfd if the guest wants an interrupt for what
// was pushed since the last Notify (NO_INTERRUPT, or EVENT_IDX used_event).
func (q *Queue) Notify() {
	if !q.pushed || q.avail == nil {
		return
	}
	q.pushed = false
	if q.eventIdx {
		ev := load16(q.avail, 4+2*int(q.size))
		newIdx, old := q.usedIdx, q.signalled
		valid := q.signalledValid
		q.signalled, q.signalledValid = newIdx, true
		if valid && uint16(newIdx-ev-1) >= uint16(newIdx-old) {
			return
		}
	} else if load16(q.avail, 0)&availFNoInterrupt != 0 {
		return
	}
	if !q.signal() {
		// No call went out (no call fd, or it was closed under us): the
		// next Notify must not take the guest for told.
		q.signalledValid = false
		return
	}
	q.callUsed.Store(uint32(q.usedIdx) | callUsedValid)
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// signal writes the call eventfd and reports whether a call went out.
func (q *Queue) signal() bool {
	f := q.call.Load()
	if f == nil {
		q.c.CallNoFD.Inc()
		return false
	}
	if _, err := f.Write(q.callBuf[:]); err != nil {
		q.c.CallFailed.Inc()
		return false
	}
	q.c.Calls.Inc()
	q.lastCall.Store(time.Now().UnixNano())
	return true
}
