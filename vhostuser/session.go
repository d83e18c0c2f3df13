package vhostuser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"falconnic/internal/stats"
)

// Session-level errors.
var (
	ErrBadRingIndex = errors.New("vhostuser: ring index out of range")
	ErrBadRingSize  = errors.New("vhostuser: bad ring size")
	ErrBadRingAddr  = errors.New("vhostuser: bad ring address")
	ErrBadFeatures  = errors.New("vhostuser: features not offered")
	ErrUnsupported  = errors.New("vhostuser: request not supported")
)

// Session is one front-end connection. Its control loop (Run) is the only
// goroutine that changes session state; queue workers own their rings.
type Session struct {
	dev  Device
	c    *Counters
	conn *Conn

	mu            sync.Mutex // guards the fields below against Status readers
	features      uint64
	protoFeatures uint64
	owner         bool
	status        uint64
	queues        []*Queue
	inflight      *inflightRegion
	ended         bool

	mem     atomic.Pointer[MemTable]
	replyB  [MaxPayload]byte
	trace   func(string)
	handled uint64
}

// newSession prepares a session for dev on conn.
func newSession(dev Device, c *Counters, conn *Conn) *Session {
	s := &Session{dev: dev, c: c, conn: conn}
	s.queues = make([]*Queue, dev.NumQueues())
	for i := range s.queues {
		s.queues[i] = newQueue(s, i)
	}
	return s
}

// handler handles one validated message. It owns m.FDs (closes what it
// does not keep). reply is sent for requests whose rule says so.
type handler func(s *Session, m *Msg) (reply []byte, fds []int, err error)

var handlers map[Request]handler

func init() {
	handlers = map[Request]handler{
		ReqGetFeatures:         (*Session).getFeatures,
		ReqSetFeatures:         (*Session).setFeatures,
		ReqSetOwner:            (*Session).setOwner,
		ReqResetOwner:          (*Session).resetDevice,
		ReqResetDevice:         (*Session).resetDevice,
		ReqSetMemTable:         (*Session).setMemTable,
		ReqSetVringNum:         (*Session).setVringNum,
		ReqSetVringAddr:        (*Session).setVringAddr,
		ReqSetVringBase:        (*Session).setVringBase,
		ReqGetVringBase:        (*Session).getVringBase,
		ReqSetVringKick:        (*Session).setVringKick,
		ReqSetVringCall:        (*Session).setVringCall,
		ReqSetVringErr:         (*Session).setVringErr,
		ReqGetProtocolFeatures: (*Session).getProtocolFeatures,
		ReqSetProtocolFeatures: (*Session).setProtocolFeatures,
		ReqGetQueueNum:         (*Session).getQueueNum,
		ReqSetVringEnable:      (*Session).setVringEnable,
		ReqGetConfig:           (*Session).getConfig,
		ReqSetConfig:           (*Session).setConfig,
		ReqGetInflightFD:       (*Session).getInflightFD,
		ReqSetInflightFD:       (*Session).setInflightFD,
		ReqGetMaxMemSlots:      (*Session).getMaxMemSlots,
		ReqAddMemReg:           (*Session).addMemReg,
		ReqRemMemReg:           (*Session).remMemReg,
		ReqSetStatus:           (*Session).setStatus,
		ReqGetStatus:           (*Session).getStatus,
		ReqNetSetMTU:           (*Session).noop,
		ReqSendRARP:            (*Session).noop,
	}
}

// codecCounters maps codec errors to counters.
func (c *Counters) codecCounter(err error) *stats.Counter {
	switch {
	case errors.Is(err, ErrBadVersion):
		return &c.BadVersion
	case errors.Is(err, ErrReplyFlag):
		return &c.ReplyFlag
	case errors.Is(err, ErrPayloadTooBig):
		return &c.PayloadTooBig
	case errors.Is(err, ErrFDTruncated):
		return &c.FDTruncated
	case errors.Is(err, ErrBadSize):
		return &c.BadSize
	case errors.Is(err, ErrBadFDCount):
		return &c.BadFDCount
	case errors.Is(err, ErrBadPayload):
		return &c.BadPayload
	case errors.Is(err, ErrUnknownRequest), errors.Is(err, ErrUnsupported):
		return &c.UnknownRequest
	case errors.Is(err, ErrBadRingIndex):
		return &c.BadRingIndex
	case errors.Is(err, ErrBadRingSize):
		return &c.BadRingSize
	case errors.Is(err, ErrBadRingAddr):
		return &c.BadRingAddr
	case errors.Is(err, ErrBadRegion), errors.Is(err, ErrRegionOverlap), errors.Is(err, ErrTooManyRegions), errors.Is(err, ErrNoRegion):
		return &c.BadMemRegion
	case errors.Is(err, ErrBadInflight):
		return &c.BadInflight
	}
	return nil
}

// Run serves messages until the connection ends or a message breaks the
// stream. It always tears the session down (rings stopped, memory released).
func (s *Session) Run() error {
	defer s.teardown()
	for {
		m, err := s.conn.ReadMsg()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if ctr := s.c.codecCounter(err); ctr != nil {
				ctr.Inc()
			}
			return err
		}
		if err := s.dispatch(&m); err != nil {
			return err
		}
	}
}

// dispatch handles one message; an error return resets the session.
func (s *Session) dispatch(m *Msg) error {
	s.c.Messages.Inc()
	if s.trace != nil {
		s.trace(fmt.Sprintf("%v flags=%#x fds=%d payload=%x", m.Request, m.Flags, len(m.FDs), m.Payload[:min(len(m.Payload), 48)]))
	}
	rule := requests[m.Request]
	if err := Validate(m); err != nil {
		closeFDs(m.FDs)
		if ctr := s.c.codecCounter(err); ctr != nil {
			ctr.Inc()
		}
		if rule.reply {
			return fmt.Errorf("%v: %w", m.Request, err)
		}
		return s.ack(m, err)
	}
	h := handlers[m.Request]
	if h == nil {
		closeFDs(m.FDs)
		s.c.UnknownRequest.Inc()
		if rule.reply {
			return fmt.Errorf("%v: %w", m.Request, ErrUnsupported)
		}
		return s.ack(m, ErrUnsupported)
	}
	s.mu.Lock()
	reply, fds, err := h(s, m)
	s.mu.Unlock()
	if err != nil {
		if ctr := s.c.codecCounter(err); ctr != nil {
			ctr.Inc()
		}
	}
	if rule.reply {
		if err != nil && reply == nil {
			return fmt.Errorf("%v: %w", m.Request, err)
		}
		werr := s.conn.WriteReply(m.Request, reply, fds...)
		closeFDs(fds)
		return werr
	}
	return s.ack(m, err)
}

// ack answers NEED_REPLY (REPLY_ACK negotiated) with a u64: 0 ok, 1 failed.
func (s *Session) ack(m *Msg, err error) error {
	if err != nil {
		s.c.RequestFailed.Inc()
	}
	if !m.NeedReply() || s.protoFeatures&ProtoReplyAck == 0 {
		return nil
	}
	var v uint64
	if err != nil {
		v = 1
	}
	return s.conn.WriteReply(m.Request, putU64(s.replyB[:], v))
}

func (s *Session) u64(v uint64) []byte { return putU64(s.replyB[:], v) }

func (s *Session) noop(m *Msg) ([]byte, []int, error) { return nil, nil, nil }

func (s *Session) getFeatures(m *Msg) ([]byte, []int, error) {
	return s.u64(s.dev.Features() | FeatureProtocolFeatures), nil, nil
}

func (s *Session) setFeatures(m *Msg) ([]byte, []int, error) {
	v := U64(m.Payload)
	offered := s.dev.Features() | FeatureProtocolFeatures
	if v&^offered != 0 {
		return nil, nil, ErrBadFeatures
	}
	// Latest wins. QEMU repeats the same value (no-op); a different value
	// restarts running rings so ring and device layouts follow it.
	old := s.features
	s.features = v
	s.dev.SetFeatures(v)
	if old != v {
		for _, q := range s.queues {
			if q.running {
				s.stopQueue(q)
				s.tryStart(q)
			}
		}
	}
	return nil, nil, nil
}

func (s *Session) setOwner(m *Msg) ([]byte, []int, error) {
	s.owner = true
	return nil, nil, nil
}

// resetDevice (RESET_OWNER, RESET_DEVICE) stops every ring and forgets
// negotiated state; the memory table stays (CONFIGURE_MEM_SLOTS keeps it).
func (s *Session) resetDevice(m *Msg) ([]byte, []int, error) {
	for _, q := range s.queues {
		s.stopQueue(q)
		s.closeRingFDs(q)
		q.addrValid, q.enabled, q.lastAvail = false, false, 0
	}
	s.features, s.status = 0, 0
	return nil, nil, nil
}

func (s *Session) getProtocolFeatures(m *Msg) ([]byte, []int, error) {
	return s.u64(s.offeredProto()), nil, nil
}

func (s *Session) offeredProto() uint64 { return genericProtocolFeatures | s.dev.ProtocolFeatures() }

func (s *Session) setProtocolFeatures(m *Msg) ([]byte, []int, error) {
	v := U64(m.Payload)
	if v&^s.offeredProto() != 0 {
		s.protoFeatures = v & s.offeredProto()
		return nil, nil, ErrBadFeatures
	}
	s.protoFeatures = v
	return nil, nil, nil
}

func (s *Session) getQueueNum(m *Msg) ([]byte, []int, error) {
	return s.u64(s.dev.QueueNum()), nil, nil
}

func (s *Session) getMaxMemSlots(m *Msg) ([]byte, []int, error) {
	return s.u64(MaxMemSlots), nil, nil
}

func (s *Session) setStatus(m *Msg) ([]byte, []int, error) {
	s.status = U64(m.Payload) & 0xff
	return nil, nil, nil
}

func (s *Session) getStatus(m *Msg) ([]byte, []int, error) {
	return s.u64(s.status), nil, nil
}

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
		q.c.Kicks.Inc()
		q.nudge()
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
// in whatever order QEMU sent it (notes §7.2, §7.3).
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

// setMem installs a new memory table and nudges workers onto it; the old
// table is unmapped once the last worker lets go.
func (s *Session) setMem(t *MemTable) {
	s.c.MemTables.Inc()
	t.onFree = s.c.MemTablesFreed.Inc
	if old := s.mem.Swap(t); old != nil {
		old.Release()
	}
	for _, q := range s.queues {
		if q.running {
			q.nudge()
		} else {
			s.tryStart(q)
		}
	}
}

func (s *Session) setMemTable(m *Msg) ([]byte, []int, error) {
	defer closeFDs(m.FDs)
	var regions []*Region
	fail := func(err error) ([]byte, []int, error) {
		for _, r := range regions {
			r.m.release()
		}
		return nil, nil, err
	}
	for i, r := range MemTableRegions(m.Payload) {
		reg, err := MapRegion(m.FDs[i], r.GPA(), r.Size(), r.UVA(), r.MmapOffset())
		if err != nil {
			return fail(err)
		}
		regions = append(regions, reg)
	}
	t, err := NewMemTable(regions)
	if err != nil {
		return fail(err)
	}
	s.setMem(t)
	return nil, nil, nil
}

func (s *Session) addMemReg(m *Msg) ([]byte, []int, error) {
	defer closeFDs(m.FDs)
	r := MemRegion(m.Payload[8:])
	if t := s.mem.Load(); t != nil {
		for _, old := range t.regions {
			if old.same(r.GPA(), r.Size(), r.UVA(), r.MmapOffset()) {
				old.dups++ // another vhost_dev (queue pair) adds it too
				s.c.DupMemRegions.Inc()
				return nil, nil, nil
			}
		}
	}
	reg, err := MapRegion(m.FDs[0], r.GPA(), r.Size(), r.UVA(), r.MmapOffset())
	if err != nil {
		return nil, nil, err
	}
	t, err := s.mem.Load().With(reg)
	if err != nil {
		reg.m.release()
		return nil, nil, err
	}
	s.setMem(t)
	return nil, nil, nil
}

func (s *Session) remMemReg(m *Msg) ([]byte, []int, error) {
	closeFDs(m.FDs)
	r := MemRegion(m.Payload[8:])
	if t := s.mem.Load(); t != nil {
		for _, old := range t.regions {
			if old.same(r.GPA(), r.Size(), r.UVA(), r.MmapOffset()) && old.dups > 0 {
				old.dups--
				return nil, nil, nil
			}
		}
	}
	t, err := s.mem.Load().Without(r.GPA(), r.Size())
	if err != nil {
		return nil, nil, err
	}
	s.setMem(t)
	return nil, nil, nil
}

func (s *Session) getConfig(m *Msg) ([]byte, []int, error) {
	c := ConfigMsg(m.Payload)
	out := s.replyB[:12]
	copy(out, m.Payload[:12])
	data, err := s.dev.GetConfig(c.Offset(), c.Size())
	if err != nil || uint32(len(data)) != c.Size() {
		// An empty config answer tells QEMU the read failed.
		binary.LittleEndian.PutUint32(out[4:], 0)
		if err == nil {
			err = ErrBadPayload
		}
		return out, nil, err
	}
	out = s.replyB[:12+len(data)]
	copy(out[12:], data)
	return out, nil, nil
}

func (s *Session) setConfig(m *Msg) ([]byte, []int, error) {
	c := ConfigMsg(m.Payload)
	return nil, nil, s.dev.SetConfig(c.Offset(), c.Data())
}

func (s *Session) getInflightFD(m *Msg) ([]byte, []int, error) {
	in := InflightMsg(m.Payload)
	fd, size, err := allocInflight(int(in.NumQueues()), int(in.QueueSize()))
	if err != nil {
		return nil, nil, err
	}
	out := s.replyB[:24]
	PutInflight(out, size, 0, in.NumQueues(), in.QueueSize())
	return out, []int{fd}, nil
}

func (s *Session) setInflightFD(m *Msg) ([]byte, []int, error) {
	defer closeFDs(m.FDs)
	r, err := mapInflight(m.FDs[0], InflightMsg(m.Payload))
	if err != nil {
		return nil, nil, err
	}
	var restart []*Queue
	for _, q := range s.queues {
		if q.running {
			s.stopQueue(q)
			restart = append(restart, q)
		}
	}
	s.inflight.unmap()
	s.inflight = r
	for _, q := range restart {
		s.tryStart(q)
	}
	return nil, nil, nil
}

// teardown stops every ring and releases fds and memory.
func (s *Session) teardown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queues {
		s.stopQueue(q)
		s.closeRingFDs(q)
	}
	if t := s.mem.Swap(nil); t != nil {
		t.Release()
	}
	s.inflight.unmap()
	s.inflight = nil
	s.ended = true
}

// Session states as Status reports them: "connected" (no ring runs),
// "running" (at least one ring runs), "disconnected" (the session ended);
// Server.Status says "idle" before the first session.

// QueueStatus is a JSON-friendly snapshot of one ring.
type QueueStatus struct {
	Index     int    `json:"index"`
	Size      int    `json:"size"`
	LastAvail uint16 `json:"last_avail"`
	Enabled   bool   `json:"enabled"`
	Running   bool   `json:"running"`
}

// SessionStatus is a JSON-friendly snapshot of the session.
type SessionStatus struct {
	State            string        `json:"state"`
	Features         uint64        `json:"features"`
	ProtocolFeatures uint64        `json:"protocol_features"`
	Status           uint64        `json:"status"`
	MemRegions       int           `json:"mem_regions"`
	Queues           []QueueStatus `json:"queues"`
}

// Status returns a snapshot; safe from any goroutine.
func (s *Session) Status() SessionStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SessionStatus{State: "disconnected", Features: s.features, ProtocolFeatures: s.protoFeatures, Status: s.status}
	if !s.ended {
		st.State = "connected"
		for _, q := range s.queues {
			if q.running {
				st.State = "running"
			}
		}
	}
	if t := s.mem.Load(); t != nil {
		st.MemRegions = len(t.regions)
	}
	for _, q := range s.queues {
		st.Queues = append(st.Queues, QueueStatus{
			Index: q.index, Size: int(q.size), LastAvail: uint16(q.pubAvail.Load()),
			Enabled: q.enabled, Running: q.running,
		})
	}
	return st
}
