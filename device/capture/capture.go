package capture

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// Dir is the direction of a packet as its NIC sees it (the pcapng EPB
// flags' direction values).
type Dir uint8

// Directions.
const (
	In  Dir = 1
	Out Dir = 2
)

// Iface is where a packet was seen.
type Iface uint8

// Interfaces.
const (
	// Fabric: a UDP datagram between daemons (fabric header and payload).
	Fabric Iface = 0
	// PortLink: a Falcon frame between two ports of this daemon.
	PortLink  Iface = 1
	NumIfaces       = 2
)

// IfaceNames names the interfaces (pcapng interface names).
var IfaceNames = [NumIfaces]string{Fabric: "fabric", PortLink: "portlink"}

// AllNICs selects every NIC, and packets the daemon could not tie to one.
const AllNICs = -1

// NICSet is the NICs a packet belongs to, one bit per NIC index (the
// first MaxNICs NICs of the daemon), plus Wire.
type NICSet uint64

// MaxNICs is how many NICs a NICSet tells apart.
const MaxNICs = 62

const (
	// Wire marks the record that captures of every NIC take: a packet
	// between two NICs of the daemon is reported twice, out on the
	// sender's and in on the receiver's, and only the first carries Wire.
	Wire NICSet = 1 << 63
	// EveryNIC is every NIC's bit (a broadcast).
	EveryNIC NICSet = 1<<MaxNICs - 1
)

// NIC returns the set of NIC index i alone (empty past MaxNICs).
func NIC(i int) NICSet {
	if i < 0 || i >= MaxNICs {
		return 0
	}
	return 1 << i
}

// FalconUDPPort is the UDP port captures give Falcon frames between two
// ports of the daemon, as falcon/link's capture does (PSP's port).
const FalconUDPPort = 1000

// Limits.
const (
	MaxSessions   = 8
	MaxBuffer     = 64 << 20
	DefaultBuffer = 8 << 20
	MaxSnap       = 65535
	IdleTimeout   = 30 * time.Second
)

// Record is one captured packet.
type Record struct {
	Time  int64 `json:"t"` // Unix ns
	Iface Iface `json:"if"`
	Dir   Dir   `json:"dir"`
	// Src and Dst are the UDP addresses of a fabric datagram; for a port
	// link, addresses the daemon makes up for the two NICs.
	Src  netip.AddrPort `json:"src"`
	Dst  netip.AddrPort `json:"dst"`
	Flow uint32         `json:"flow"`
	Len  int            `json:"len"`  // length on the wire
	Data []byte         `json:"data"` // the first snap bytes
}

// Options start a session.
type Options struct {
	NIC    int // the NIC's index in the daemon, or AllNICs
	Count  int // stop after this many packets (0: until stopped)
	Snap   int // bytes kept of each packet (0: MaxSnap)
	Buffer int // bytes of packets buffered for the reader (0: DefaultBuffer)
	// KeyLog: the session also takes the key-log lines (keylog.go) of the
	// keys its NICs use while it runs.
	KeyLog bool
}

// Counters count the hub's sessions and every packet a session could not
// keep.
type Counters struct {
	Sessions, Abandoned, Refused     stats.Counter
	Captured, DroppedFull, Truncated stats.Counter
	KeysLogged, KeysDropped          stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "sessions", Help: "capture sessions started", Counter: &c.Sessions},
		{Name: "sessions_abandoned", Help: "capture sessions ended because their client stopped reading", Counter: &c.Abandoned},
		{Name: "sessions_refused", Help: "capture sessions refused: the most that may run at once were running", Counter: &c.Refused},
		{Name: "captured", Help: "packets buffered for a capture client", Counter: &c.Captured},
		{Name: "dropped_buffer_full", Help: "packets not captured: the session's buffer was full (the client reads too slowly)", Counter: &c.DroppedFull},
		{Name: "truncated", Help: "packets captured cut to the session's snap length", Counter: &c.Truncated},
		{Name: "keys_logged", Help: "key-log lines buffered for a capture client that asked for a key log", Counter: &c.KeysLogged},
		{Name: "keys_dropped", Help: "key-log lines not kept: the session's key buffer was full (MaxKeyLines)", Counter: &c.KeysDropped},
	}
}

// Errors.
var (
	ErrTooMany   = errors.New("capture: too many sessions")
	ErrNoSession = errors.New("capture: no such session")
)

// Hub is the daemon's capture point: sessions start and stop here, and
// the daemon's hooks report packets to it.
type Hub struct {
	clk   clock.Clock
	epoch time.Time // wall time of the clock's zero

	mu       sync.Mutex // serialises session changes
	byID     map[uint64]*Session
	nextID   uint64
	sessions atomic.Pointer[[]*Session] // copy-on-write, read by Report
	keyLogs  atomic.Int32               // running sessions with KeyLog

	Stats Counters
}

// NewHub returns a hub stamping packets with clk (nil: the real clock)
// as wall time.
func NewHub(clk clock.Clock) *Hub {
	if clk == nil {
		clk = clock.Real
	}
	return &Hub{clk: clk, epoch: time.Now().Add(-time.Duration(clk.Now())), byID: map[uint64]*Session{}}
}

// Active reports whether any session runs.
func (h *Hub) Active() bool { return h.sessions.Load() != nil }

// KeyLogActive reports whether any running session asked for a key log:
// the one atomic load the daemon's key hook makes while none does.
func (h *Hub) KeyLogActive() bool { return h.keyLogs.Load() > 0 }

// Session is one capture: a NIC filter and a bounded buffer of packets.
type Session struct {
	id   uint64
	opts Options
	hub  *Hub

	mu       sync.Mutex
	recs     []Record
	bytes    int
	taken    int      // packets accepted (for Count)
	keys     []string // key-log lines not yet read
	keySeen  map[string]bool
	dropped  uint64
	trunc    uint64
	done     bool
	lastRead time.Duration
	wake     chan struct{} // closed and replaced when a packet arrives
}

// Start starts a session.
func (h *Hub) Start(o Options) (*Session, error) {
	if o.Snap <= 0 || o.Snap > MaxSnap {
		o.Snap = MaxSnap
	}
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	o.Buffer = min(o.Buffer, MaxBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.byID) >= MaxSessions {
		h.Stats.Refused.Inc()
		return nil, ErrTooMany
	}
	h.nextID++
	s := &Session{id: h.nextID, opts: o, hub: h, lastRead: time.Duration(h.clk.Now()), wake: make(chan struct{})}
	h.byID[s.id] = s
	if o.KeyLog {
		h.keyLogs.Add(1)
		s.keySeen = map[string]bool{}
	}
	h.publish()
	h.Stats.Sessions.Inc()
	return s, nil
}

// publish stores the running sessions for Report (h.mu held).
func (h *Hub) publish() {
	if len(h.byID) == 0 {
		h.sessions.Store(nil)
		return
	}
	list := make([]*Session, 0, len(h.byID))
	for _, s := range h.byID {
		list = append(list, s)
	}
	h.sessions.Store(&list)
}

// remove takes s out of the running sessions (h.mu held).
func (h *Hub) remove(s *Session) {
	delete(h.byID, s.id)
	if s.opts.KeyLog {
		h.keyLogs.Add(-1)
	}
	h.publish()
}

// ReportKey offers one key-log line of a key of the NICs in set to every
// session with a key log that selects it: a session of one NIC when its
// bit is set, every session of every NIC.
func (h *Hub) ReportKey(set NICSet, line string) {
	if !h.KeyLogActive() {
		return
	}
	list := h.sessions.Load()
	if list == nil {
		return
	}
	for _, s := range *list {
		if s.opts.KeyLog && (s.opts.NIC == AllNICs || set&NIC(s.opts.NIC) != 0) {
			s.AddKey(line)
		}
	}
}

// AddKey buffers a key-log line for the session's reader (once per
// session: a key reported again is not repeated). A session without
// KeyLog takes none.
func (s *Session) AddKey(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || !s.opts.KeyLog || s.keySeen[line] {
		return
	}
	if len(s.keySeen) >= MaxKeyLines {
		s.hub.Stats.KeysDropped.Inc()
		return
	}
	s.keySeen[line] = true
	s.keys = append(s.keys, line)
	s.hub.Stats.KeysLogged.Inc()
	close(s.wake)
	s.wake = make(chan struct{})
}

// Session returns the running session id.
func (h *Hub) Session(id uint64) (*Session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.byID[id]; s != nil {
		return s, nil
	}
	return nil, ErrNoSession
}

// Stop ends session id; what it buffered is gone.
func (h *Hub) Stop(id uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.byID[id]
	if s == nil {
		return ErrNoSession
	}
	h.remove(s)
	s.finish()
	return nil
}

// ID returns the session's id.
func (s *Session) ID() uint64 { return s.id }

// Report offers one packet of the NICs in set to every session that
// selects it: a session of one NIC when its bit is set, a session of every
// NIC when Wire is. data is copied.
func (h *Hub) Report(set NICSet, iface Iface, dir Dir, src, dst netip.AddrPort, flow uint32, data []byte) {
	list := h.sessions.Load()
	if list == nil {
		return
	}
	now := time.Duration(h.clk.Now())
	var idle []*Session
	for _, s := range *list {
		if s.opts.NIC == AllNICs && set&Wire == 0 || s.opts.NIC != AllNICs && set&NIC(s.opts.NIC) == 0 {
			continue
		}
		if !s.add(now, h.epoch.Add(now).UnixNano(), iface, dir, src, dst, flow, data) {
			idle = append(idle, s)
		}
	}
	for _, s := range idle {
		h.mu.Lock()
		if h.byID[s.id] == s {
			h.remove(s)
			h.Stats.Abandoned.Inc()
		}
		h.mu.Unlock()
		s.finish()
	}
}

// add buffers one packet; false when the session's reader is gone
// (IdleTimeout without a read).
func (s *Session) add(now time.Duration, wall int64, iface Iface, dir Dir, src, dst netip.AddrPort, flow uint32, data []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return true
	}
	if now-s.lastRead > IdleTimeout {
		return false
	}
	if s.opts.Count > 0 && s.taken >= s.opts.Count {
		return true
	}
	keep := data
	if len(keep) > s.opts.Snap {
		keep = keep[:s.opts.Snap]
		s.trunc++
		s.hub.Stats.Truncated.Inc()
	}
	if s.bytes+len(keep) > s.opts.Buffer {
		s.dropped++
		s.hub.Stats.DroppedFull.Inc()
		return true
	}
	s.recs = append(s.recs, Record{Time: wall, Iface: iface, Dir: dir, Src: src, Dst: dst, Flow: flow, Len: len(data),
		Data: append([]byte(nil), keep...)})
	s.bytes += len(keep)
	s.taken++
	s.hub.Stats.Captured.Inc()
	close(s.wake)
	s.wake = make(chan struct{})
	return true
}

func (s *Session) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		close(s.wake)
	}
}

// Batch is what one Read returns.
type Batch struct {
	Records []Record `json:"records"`
	// Keys are key-log lines (keylog.go) of sessions with KeyLog.
	Keys []string `json:"keys,omitempty"`
	// Dropped and Truncated are the session's totals so far.
	Dropped   uint64 `json:"dropped"`
	Truncated uint64 `json:"truncated"`
	// Done: the session took its Count of packets and the buffer is
	// drained, or it was stopped.
	Done bool `json:"done"`
}

// Read takes up to maxBytes of buffered packets (at least one when any),
// waiting until wait has passed for the first to arrive.
func (s *Session) Read(maxBytes int, wait <-chan time.Time) Batch {
	for {
		s.mu.Lock()
		s.lastRead = time.Duration(s.hub.clk.Now())
		if len(s.recs) > 0 || len(s.keys) > 0 || s.done || s.opts.Count > 0 && s.taken >= s.opts.Count {
			break
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-wait:
			s.mu.Lock()
			b := Batch{Keys: s.takeKeys(), Dropped: s.dropped, Truncated: s.trunc, Done: s.done}
			s.mu.Unlock()
			return b
		}
	}
	defer s.mu.Unlock()
	n, size := 0, 0
	for n < len(s.recs) && (n == 0 || size+len(s.recs[n].Data) <= maxBytes) {
		size += len(s.recs[n].Data)
		n++
	}
	b := Batch{Records: append([]Record(nil), s.recs[:n]...), Keys: s.takeKeys(), Dropped: s.dropped, Truncated: s.trunc}
	clear(s.recs[:n])
	s.recs = s.recs[n:]
	s.bytes -= size
	b.Done = s.done || s.opts.Count > 0 && s.taken >= s.opts.Count && len(s.recs) == 0
	return b
}

// takeKeys returns the key-log lines not yet read (s.mu held).
func (s *Session) takeKeys() []string {
	k := s.keys
	s.keys = nil
	return k
}
