package vhostuser

import (
	"encoding/binary"
	"os"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"
)

// Ring handlers: SET_VRING_*, GET_VRING_BASE, and the start/stop of ring
// workers. A ring starts once everything it needs has arrived, in any order.

// queue returns ring idx or an error.
func (s *Session) queue(idx uint32) (*Queue, error) {
	if idx >= uint32(len(s.queues)) {
		return nil, ErrBadRingIndex
	}
	return s.queues[idx], nil
}

func (s *Session) setVringNum(m *Msg) ([]byte, []int, error) {
	st := VringState(m.Payload)
	q, err := s.queue(st.Index())
	if err != nil {
		return nil, nil, err
	}
	n := st.Num()
	if n == 0 || n > MaxQueueSize || n&(n-1) != 0 {
		return nil, nil, ErrBadRingSize
	}
	return s.reconfigure(q, func() { q.size = uint16(n) })
}

func (s *Session) setVringBase(m *Msg) ([]byte, []int, error) {
	st := VringState(m.Payload)
	q, err := s.queue(st.Index())
	if err != nil {
		return nil, nil, err
	}
	if st.Num() > 0xffff {
		return nil, nil, ErrBadPayload
	}
	return s.reconfigure(q, func() { q.lastAvail = uint16(st.Num()) })
}

func (s *Session) setVringAddr(m *Msg) ([]byte, []int, error) {
	a := VringAddr(m.Payload)
	q, err := s.queue(a.Index())
	if err != nil {
		return nil, nil, err
	}
	if a.Desc()%16 != 0 || a.Avail()%2 != 0 || a.Used()%4 != 0 {
		return nil, nil, ErrBadRingAddr
	}
	return s.reconfigure(q, func() {
		q.descUVA, q.availUVA, q.usedUVA = a.Desc(), a.Avail(), a.Used()
		q.addrValid = true
	})
}

// reconfigure applies a ring change, restarting the ring if it ran.
func (s *Session) reconfigure(q *Queue, apply func()) ([]byte, []int, error) {
	was := q.running
	s.stopQueue(q)
	apply()
	if was {
		s.tryStart(q)
	}
	return nil, nil, nil
}

func vringFile(m *Msg) (uint32, int) {
	v := U64(m.Payload)
	fd := -1
	if v&VringNoFD == 0 {
		fd = m.FDs[0]
	}
	return uint32(v & 0xff), fd
}

// pollFile wraps an eventfd so reads park in the runtime poller and Close
// is safe against concurrent Read/Write.
func pollFile(fd int, name string) *os.File {
	unix.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), name)
}

func (s *Session) setVringKick(m *Msg) ([]byte, []int, error) {
	idx, fd := vringFile(m)
	q, err := s.queue(idx)
	if err != nil {
		closeFDs(m.FDs)
		return nil, nil, err
	}
	s.stopKickReader(q)
	if fd >= 0 {
		q.kick = pollFile(fd, "kick")
		q.kickReaderDone = make(chan struct{})
		go q.readKicks(q.kick, q.kickReaderDone)
	}
	q.kickSet = true
	if !q.running {
		s.tryStart(q)
	}
	return nil, nil, nil
}

func (s *Session) stopKickReader(q *Queue) {
	if q.kick != nil {
		q.kick.Close()
		<-q.kickReaderDone
		q.kick = nil
	}
}

// readKicks turns kick eventfd reads into coalesced wakes.
func (q *Queue) readKicks(f *os.File, done chan struct{}) {
	defer close(done)
	var b [8]byte
	for {
		if _, err := f.Read(b[:]); err != nil {
			return
		}
		q.nudge() // before the count: a kick counted has its wake sent
		q.c.Kicks.Inc()
		q.kicks.Add(1)
		q.lastKick.Store(time.Now().UnixNano())
	}
}

func (s *Session) setVringCall(m *Msg) ([]byte, []int, error) {
	idx, fd := vringFile(m)
	q, err := s.queue(idx)
	if err != nil {
		closeFDs(m.FDs)
		return nil, nil, err
	}
	var f *os.File
	if fd >= 0 {
		f = pollFile(fd, "call")
	}
	// Swap while the ring may run; os.File's Close waits for a Write in progress.
	if old := q.call.Swap(f); old != nil {
		old.Close()
	}
	if q.running {
		s.c.CallFDSwaps.Inc()
		// A worker may have loaded the old fd and signalled it after the
		// front-end stopped looking at it (QEMU checks its masked
		// notifier once, right after this message), or found it closed:
		// either way that call is lost. One call on the new fd covers it;
		// a spurious interrupt is harmless, a lost one hangs the guest.
		// (libvhost-user writes the new call fd once for the same reason.)
		if f != nil {
			q.signal()
		}
	}
	return nil, nil, nil
}

func (s *Session) setVringErr(m *Msg) ([]byte, []int, error) {
	idx, fd := vringFile(m)
	q, err := s.queue(idx)
	if err != nil {
		closeFDs(m.FDs)
		return nil, nil, err
	}
	if q.errFD >= 0 {
		unix.Close(q.errFD)
	}
	q.errFD = fd
	return nil, nil, nil
}

func (s *Session) setVringEnable(m *Msg) ([]byte, []int, error) {
	st := VringState(m.Payload)
	q, err := s.queue(st.Index())
	if err != nil {
		return nil, nil, err
	}
	if st.Num() > 1 {
		return nil, nil, ErrBadPayload
	}
	q.enabled = st.Num() == 1
	if q.enabled {
		s.tryStart(q)
	} else {
		s.stopQueue(q)
	}
	return nil, nil, nil
}

// getVringBase stops the ring and answers its last avail idx.
func (s *Session) getVringBase(m *Msg) ([]byte, []int, error) {
	st := VringState(m.Payload)
	q, err := s.queue(st.Index())
	if err != nil {
		return nil, nil, err
	}
	s.stopQueue(q)
	s.stopKickReader(q)
	q.kickSet = false
	b := s.replyB[:8]
	binary.LittleEndian.PutUint32(b[0:], st.Index())
	binary.LittleEndian.PutUint32(b[4:], uint32(q.lastAvail))
	return b, nil, nil
}

// tryStart starts the ring's worker once everything it needs has arrived,
// in whatever order QEMU sent it (vhostusertest.Frontend replays the
// orders QEMU 7.2 uses).
func (s *Session) tryStart(q *Queue) {
	if q.running || !q.addrValid || !q.kickSet || q.size == 0 || s.mem.Load() == nil {
		return
	}
	if !q.enabled && s.features&FeatureProtocolFeatures != 0 {
		return
	}
	q.eventIdx = s.features&FeatureEventIdx != 0
	q.indirect = s.features&FeatureIndirectDesc != 0
	q.mem = nil
	if !q.Refresh() {
		q.release()
		return
	}
	q.usedIdx = load16(q.used, 2)
	q.inflight, q.resubmit = nil, nil
	if s.protoFeatures&ProtoInflightSHMFD != 0 {
		q.inflight = s.inflight.queue(q.index, int(q.size))
	}
	if q.inflight != nil {
		q.resubmit = q.inflight.recover(s.features, q.usedIdx)
		q.lastAvail = q.usedIdx + uint16(len(q.resubmit))
		s.c.InflightResub.Add(uint64(len(q.resubmit)))
	} else if q.lastAvail != q.usedIdx {
		// In-order devices without inflight tracking resume from the used
		// idx: what was popped but not completed is redone (libvhost-user).
		q.lastAvail = q.usedIdx
		s.c.ResumedFromUsed.Inc()
	}
	q.signalledValid = false
	q.pushed = false
	q.startUsed = q.usedIdx
	q.pubUsed.Store(uint32(q.usedIdx))
	q.callUsed.Store(0)
	q.watch = watchState{}
	store16(q.used, 4+8*int(q.size), q.lastAvail)
	q.lastAvailPublishedEv = q.lastAvail
	q.done = make(chan struct{})
	q.exited = make(chan struct{})
	q.running = true
	q.pubAvail.Store(uint32(q.lastAvail))
	go s.runWorker(q, q.exited)
	q.nudge() // process the ring once even without a new kick
}

// runWorker is the ring's goroutine. A memory fault (QEMU shrank the file
// behind a region) stops this ring, counted, instead of the daemon.
func (s *Session) runWorker(q *Queue, exited chan struct{}) {
	defer close(exited)
	defer q.release()
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(interface{ Addr() uintptr }); ok && f != nil {
				s.c.MemoryFaults.Inc()
				return
			}
			panic(r)
		}
	}()
	debug.SetPanicOnFault(true)
	s.dev.RunQueue(q)
}

// stopQueue stops the ring's worker and waits until it has let go of guest memory.
func (s *Session) stopQueue(q *Queue) {
	if !q.running {
		return
	}
	close(q.done)
	<-q.exited
	q.running = false
	q.pubAvail.Store(uint32(q.lastAvail))
}

func (s *Session) closeRingFDs(q *Queue) {
	s.stopKickReader(q)
	q.kickSet = false
	if old := q.call.Swap(nil); old != nil {
		old.Close()
	}
	if q.errFD >= 0 {
		unix.Close(q.errFD)
		q.errFD = -1
	}
}
