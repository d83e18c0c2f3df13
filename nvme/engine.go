package nvme

import (
	"errors"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/framebuf"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// Sizes and limits.
const (
	// ChunkSize is the size of one nCMD: one Falcon transaction [N].
	ChunkSize = 4096
	// MaxChunks is the number of nCMDs of one iCMD (NCNT Total is 8 bits).
	MaxChunks = 256
	// MaxTransfer is the largest data command.
	MaxTransfer = MaxChunks * ChunkSize
	// MaxBlocks is the largest block count of one command (NLB is 16 bits).
	MaxBlocks = 1 << 16

	maxICMDs   = 1024 // per path; tags: 10 bits index + 14 bits generation
	maxNCMDs   = 4096 // per path; tags: 12 bits index + 12 bits generation
	maxTargets = 8192 // per engine: target nCMD state (target tags)
	rnrRetry   = 1    // RNR code when the target table is full (short wait)
)

// Config configures an Engine.
type Config struct {
	// Function is the Initiator Function this NIC puts in its NBTHs.
	Function uint32
	// OnComplete is called (on the endpoint's goroutine) when a submitted
	// Command finishes; cmd.Status holds the result.
	OnComplete func(cmd *Command)
	// Clock, if set, enables command timeouts (OnTimer, NextDeadline).
	Clock clock.Clock
	// CommandTimeout fails a started command that has not completed
	// (default 30 s, Linux's NVMe I/O timeout) with a transient transport
	// error: a response lost with a connection that died on the far side
	// only would otherwise hang it forever.
	CommandTimeout time.Duration
	// Frames, if set, lets the target keep a received Write Data
	// Response's frame for the write's IO instead of copying its data to
	// the slot's aligned buffer, when the data lies aligned in it (an
	// AsyncBackend may need that: O_DIRECT).
	Frames FrameKeeper
}

// FrameKeeper is the receive side of the link under the engine's
// endpoint (device.FalconPort): during a ULP callback, KeepFrame takes
// ownership of the received frame's buffer if data lies in it (nil: it
// does not, or cannot be kept), and ReleaseFrame gives it back once data
// is no longer used.
type FrameKeeper interface {
	KeepFrame(data []byte) *framebuf.Buf
	ReleaseFrame(*framebuf.Buf)
}

// Engine is one NIC's NVMe-over-Falcon function: the target for the
// namespaces it exports and the initiator towards remote NICs. It is the
// falcon.ULP of those connections and, like the endpoint, is driven by the
// one goroutine that owns the endpoint.
type Engine struct {
	cfg     Config
	ns      map[uint16]*Namespace
	paths   map[*falcon.Conn]*Path
	byMAC   map[[6]byte]*Path // the newest identified path of each initiator MAC
	orphans map[[6]byte]int   // IOs of failed paths still in a backend, by initiator MAC (zero: unidentified paths)
	tslots  []tslot
	tfree   []int32
	ioWait  []int32 // target slots whose IO an AsyncBackend refused (full), in order
	slab    []byte  // where the next nCMD buffer is carved from (carveChunk)
	chunks  [][]byte
	free    []int32 // indices of chunks no slot holds (nil ones are carved again)
	scratch []byte
	list    []*Path
	scanAt  time.Duration // next timeout scan
	// lastConn/lastPath and lastNS remember the latest lookups of
	// paths and ns: the callbacks of a burst are mostly for one
	// connection and namespace, and a hit spares a hashed lookup.
	lastConn *falcon.Conn
	lastPath *Path
	lastNS   *Namespace
	Stats    Counters
}

// NewEngine returns an engine with no namespaces and no paths.
func NewEngine(cfg Config) *Engine {
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = 30 * time.Second
	}
	e := &Engine{cfg: cfg, ns: make(map[uint16]*Namespace), paths: make(map[*falcon.Conn]*Path), byMAC: make(map[[6]byte]*Path), orphans: make(map[[6]byte]int),
		tslots: make([]tslot, maxTargets), scratch: make([]byte, 0, wire.NBTHLen+wire.NVMeCmdLen+IdentifyLen)}
	e.tfree = make([]int32, maxTargets)
	for i := range e.tfree {
		e.tfree[i] = int32(maxTargets - 1 - i)
	}
	return e
}

// SetCommandTimeout sets Config.CommandTimeout (before commands run).
func (e *Engine) SetCommandTimeout(d time.Duration) {
	if d > 0 {
		e.cfg.CommandTimeout = d
	}
}

// SetOnComplete sets the completion callback.
func (e *Engine) SetOnComplete(f func(*Command)) { e.cfg.OnComplete = f }

// AddNamespace exports ns.
func (e *Engine) AddNamespace(ns *Namespace) error {
	if _, ok := e.ns[ns.cfg.NSID]; ok {
		return ErrNSExists
	}
	e.ns[ns.cfg.NSID] = ns
	return nil
}

// Namespace returns the exported namespace nsid.
func (e *Engine) Namespace(nsid uint16) *Namespace { return e.ns[nsid] }

// Path errors.
var (
	ErrPathConns = errors.New("nvme: a path needs an NVMe connection no other path uses")
	ErrInvalid   = errors.New("nvme: invalid command")
	ErrPathDown  = errors.New("nvme: path is down")
)

// AddPath binds an unordered Falcon connection to one peer NIC [N]. Both
// ends may initiate and serve commands on it.
func (e *Engine) AddPath(c *falcon.Conn) (*Path, error) {
	if c == nil || e.paths[c] != nil {
		return nil, ErrPathConns
	}
	p := newPath(e, c)
	e.paths[c] = p
	e.list = append(e.list, p)
	return p, nil
}

// RemovePath forgets the path of conn (its connection died or is replaced);
// its commands complete with an internal path error.
func (e *Engine) RemovePath(p *Path) {
	p.fail()
	delete(e.paths, p.conn)
	if e.lastPath == p {
		e.lastConn, e.lastPath = nil, nil
	}
	if p.identified && e.byMAC[p.ini.MAC] == p {
		delete(e.byMAC, p.ini.MAC)
	}
	for i, x := range e.list {
		if x == p {
			e.list = append(e.list[:i], e.list[i+1:]...)
			break
		}
	}
}

// pathOf returns the path of connection c (nil: none).
func (e *Engine) pathOf(c *falcon.Conn) *Path {
	if c == e.lastConn && c != nil {
		return e.lastPath
	}
	p := e.paths[c]
	if p != nil {
		e.lastConn, e.lastPath = c, p
	}
	return p
}

// namespace returns exported namespace nsid (nil: none). Namespaces are
// never removed, so a remembered one stays valid.
func (e *Engine) namespace(nsid uint16) *Namespace {
	if ns := e.lastNS; ns != nil && ns.cfg.NSID == nsid {
		return ns
	}
	ns := e.ns[nsid]
	if ns != nil {
		e.lastNS = ns
	}
	return ns
}

// now returns the engine clock's reading (0 without a clock).
func (e *Engine) now() time.Duration {
	if e.cfg.Clock == nil {
		return 0
	}
	return e.cfg.Clock.Now()
}

// scanEvery is how often started commands are checked for timeouts.
func (e *Engine) scanEvery() time.Duration { return min(e.cfg.CommandTimeout/4, time.Second) }

// NextDeadline returns when OnTimer has work: the next timeout scan while
// commands are in flight.
func (e *Engine) NextDeadline() (time.Duration, bool) {
	if e.cfg.Clock == nil {
		return 0, false
	}
	for _, p := range e.list {
		if len(p.icmdFree) < len(p.icmds) {
			if e.scanAt == 0 {
				e.scanAt = e.now() + e.scanEvery()
			}
			return e.scanAt, true
		}
	}
	e.scanAt = 0
	return 0, false
}

// OnTimer fails the started commands whose deadline passed.
func (e *Engine) OnTimer(now time.Duration) {
	if e.cfg.Clock == nil || e.scanAt == 0 || now < e.scanAt {
		return
	}
	e.scanAt = now + e.scanEvery()
	for _, p := range e.list {
		for i := range p.icmds {
			if ic := &p.icmds[i]; ic.cmd != nil && ic.deadline <= now {
				p.timeout(int32(i))
			}
		}
	}
}

// Cookie layout of this engine's Falcon transactions.
const (
	ckIniPush uint64 = 1 << 56 // initiator Read/Write Request; low bits: nCMD tag
	ckTgtPush uint64 = 2 << 56 // target Read Response / Write Completion
	ckTgtPull uint64 = 3 << 56 // target Write Data Request; low bits: target slot
	ckTgtLent uint64 = 4 << 56 // target Read Response pushed from its chunk; low bits: chunk index
	ckKind    uint64 = 0xff << 56
)

// OnRequest implements falcon.ULP: a request from the peer.
func (e *Engine) OnRequest(c *falcon.Conn, r *falcon.Request) {
	p := e.pathOf(c)
	if p == nil {
		e.Stats.RxUnknownConn.Inc()
		e.refuse(c, r)
		return
	}
	if r.Kind == tl.Pull {
		p.onWriteDataRequest(r.RSN, int(r.Length), r.Payload)
		return
	}
	n, err := wire.ParseNVMe(r.Payload, wire.TypePushData)
	if err != nil {
		e.Stats.RxBadHeader.Inc()
		e.refuse(c, r)
		return
	}
	switch n.Type {
	case wire.NVMeReadRequest, wire.NVMeWriteRequest:
		e.onCommand(p, r.RSN, &n)
	case wire.NVMeReadResponse, wire.NVMeWriteCompletion:
		p.onResponse(&n)
		_ = c.AckPush(r.RSN)
	default:
		e.Stats.RxBadHeader.Inc()
		e.refuse(c, r)
	}
}

// refuse answers a request this engine cannot use (counted by the
// caller); an answer Falcon cannot take is counted as RefuseLost.
func (e *Engine) refuse(c *falcon.Conn, r *falcon.Request) {
	if refuse(c, r) != nil {
		e.Stats.RefuseLost.Inc()
	}
}

// refuse answers a request: a push is acknowledged and dropped, a pull
// gets empty data. The error is Falcon's: a pull answer refused for want
// of Tx room (ErrXoff) is not held, as the engine holds nothing for a
// request it cannot use, so the peer's pull times out.
func refuse(c *falcon.Conn, r *falcon.Request) error {
	if r.Kind == tl.Pull {
		return c.PullData(r.RSN, nil)
	}
	return c.AckPush(r.RSN)
}

// OnCompletion implements falcon.ULP: one of our transactions ended.
func (e *Engine) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	if cpl.Cookie&ckKind == ckTgtLent {
		e.chunkBack(int32(uint32(cpl.Cookie)), cpl.Frame)
	}
	p := e.pathOf(c)
	if p == nil {
		e.Stats.RxUnknownConn.Inc()
		return
	}
	if cpl.Status != tl.CmplAck {
		e.Stats.TxnFailed.Inc()
	}
	switch cpl.Cookie & ckKind {
	case ckIniPush:
		if cpl.Status != tl.CmplAck {
			p.onPushFailed(uint32(cpl.Cookie))
		}
	case ckTgtPush, ckTgtLent:
		// The response is delivered (or lost with its connection); the
		// target state was freed when it was handed to Falcon.
	case ckTgtPull:
		e.onWriteData(p, int32(uint32(cpl.Cookie)), cpl)
	}
	if c.Dead() {
		p.fail()
	}
}

// OnXon implements falcon.ULP: the connection takes submissions again.
func (e *Engine) OnXon(c *falcon.Conn) {
	if p := e.pathOf(c); p != nil {
		p.resume()
	}
}
