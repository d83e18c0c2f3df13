package vhostuser

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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

	mem    atomic.Pointer[MemTable]
	replyB [MaxPayload]byte
	trace  func(string)
	log    *slog.Logger // nil: no warnings
	// watchObserve: the watchdog counts and logs, and does not act
	watchObserve bool
	handled      uint64
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
	stopWatchdog := make(chan struct{})
	defer close(stopWatchdog)
	go s.runWatchdog(WatchdogInterval, stopWatchdog)
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
	if r, ok := s.dev.(DeviceResetter); ok {
		r.ResetDevice()
	}
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

// teardown stops every ring and releases fds and memory.
func (s *Session) teardown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queues {
		s.stopQueue(q)
		s.closeRingFDs(q)
	}
	t := s.mem.Swap(nil)
	if u, ok := s.dev.(MemTableUser); ok {
		u.SetMemTable(nil)
	}
	if t != nil {
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
	// What the watchdog saw at its last look at a running ring: the
	// guest's avail idx and used_event (EVENT_IDX) in guest memory, the
	// used idx we published, the used idx at our last call, and the
	// ring's kicks.
	Ring *RingStatus `json:"ring,omitempty"`
}

// RingStatus is a running ring's indices as the watchdog last saw them.
type RingStatus struct {
	GuestAvail  uint16 `json:"guest_avail"`
	Taken       uint16 `json:"taken"`
	Used        uint16 `json:"used"`
	UsedEvent   uint16 `json:"used_event"`
	CallUsed    uint16 `json:"call_used"`
	Called      bool   `json:"called"`
	NoInterrupt bool   `json:"no_interrupt"`
	AvailEvent  uint16 `json:"avail_event"`
	Kicks       uint64 `json:"kicks"`
	Watched     bool   `json:"watched"`
	// Milliseconds since the ring's last kick and last call (-1: none).
	KickAgeMs int64 `json:"kick_age_ms"`
	CallAgeMs int64 `json:"call_age_ms"`
}

// ageMs is the milliseconds since a Unix-ns time stamp, -1 for none.
func ageMs(ns int64) int64 {
	if ns == 0 {
		return -1
	}
	return time.Since(time.Unix(0, ns)).Milliseconds()
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
		qs := QueueStatus{
			Index: q.index, Size: int(q.size), LastAvail: uint16(q.pubAvail.Load()),
			Enabled: q.enabled, Running: q.running,
		}
		if w := q.watch; q.running && w.valid {
			qs.Ring = &RingStatus{GuestAvail: w.guestAvail, Taken: w.taken, Used: w.used, UsedEvent: w.usedEvent,
				CallUsed: w.callUsed, Called: w.callUsedValid, NoInterrupt: w.noInterruptSet, AvailEvent: w.availEvent,
				Kicks: w.kicks, Watched: q.watched.Load(), KickAgeMs: ageMs(q.lastKick.Load()), CallAgeMs: ageMs(q.lastCall.Load())}
		}
		st.Queues = append(st.Queues, qs)
	}
	return st
}
