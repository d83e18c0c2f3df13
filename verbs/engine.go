package verbs

import (
	"falconnic/falcon"
	"falconnic/internal/clock"
)

// Access flags, the IB_ACCESS_* values.
const (
	AccessLocalWrite   = 1 << 0
	AccessRemoteWrite  = 1 << 1
	AccessRemoteRead   = 1 << 2
	AccessRemoteAtomic = 1 << 3
	AccessMWBind       = 1 << 4
	accessAll          = 0x1f
)

// QP types, the IB_QPT_* values. A GSI QP is a UD QP with handle GSIQPN
// and Q_Key GSIQKey, created by the guest kernel's ib_mad.
const (
	QPTypeGSI = 1
	QPTypeRC  = 2
	QPTypeUC  = 3
	QPTypeUD  = 4
)

// The GSI QP (QP1) and the kernel's DMA key (FALCONNIC_GSI_QPN,
// FALCONNIC_GSI_QKEY, FALCONNIC_DMA_LKEY).
const (
	GSIQPN  = 1
	GSIQKey = 0x80010000
	// DMALKey is the local key of "this guest's physical memory": an SGE
	// of a kernel QP with this lkey names guest-physical addresses,
	// checked against guest RAM. Never an rkey, never valid on a user QP.
	DMALKey = 0
)

// MAC is an Ethernet address: how the RDMA function names a peer NIC (the
// address vector's dmac).
type MAC [6]byte

// Conns is the connection manager as the verbs engine sees it: the Falcon
// connection to the NIC with a given MAC. Lookup must not block; when a
// connection is still being set up it returns nil and the manager calls
// Engine.KickAll once it is up.
type Conns interface {
	Lookup(peer MAC) *falcon.Conn
}

// EventKind is an asynchronous event to the driver (the EV_* opcodes).
type EventKind uint16

// Events.
const (
	EvCQComp      EventKind = 0x80
	EvCQErr       EventKind = 0x81
	EvQPFatal     EventKind = 0x82
	EvQPReqErr    EventKind = 0x83
	EvQPAccessErr EventKind = 0x84
	EvQPLastWQE   EventKind = 0x85
	EvSRQLimit    EventKind = 0x86
)

// Event is one asynchronous event.
type Event struct {
	Kind   EventKind
	Handle uint32
	Code   uint32
}

// Limits are the engine's object limits (reported by PROBE).
type Limits struct {
	MaxPD, MaxMR, MaxCQ, MaxQP, MaxSRQ, MaxAH uint32
	MaxHandle                                 uint32 // largest handle value
	MaxSGE                                    uint32
	MaxInline                                 uint32
	MaxMRSize                                 uint64
	// MaxMTTPages bounds the page-list entries the NIC keeps for all MRs
	// and rings together (its MTT): a guest may list the same page many
	// times, so guest RAM does not bound it.
	MaxMTTPages uint32
	// MaxFastRegPages bounds the page list of one fast-registration MR
	// (max_fast_reg_page_list_len; 0 disables AllocMR).
	MaxFastRegPages uint32
}

// DefaultLimits returns the limits of a default NIC.
func DefaultLimits() Limits {
	return Limits{MaxPD: 1024, MaxMR: 4096, MaxCQ: 1024, MaxQP: 1024, MaxSRQ: 256, MaxAH: 4096,
		MaxHandle: 1 << 20, MaxSGE: 32, MaxInline: 512, MaxMRSize: 1 << 40, MaxMTTPages: 1 << 22,
		MaxFastRegPages: pblEntries}
}

// Config configures an Engine.
type Config struct {
	Mem    Memory      // this NIC's guest memory (nil until a guest attaches)
	Conns  Conns       // required for traffic
	Events func(Event) // asynchronous events; may be nil
	Limits Limits      // zero value: DefaultLimits
	// PMTUCap caps the path MTU (the Falcon connection's MTU minus headers
	// must hold it; default 4096).
	PMTUCap int
	// Clock is the time doorbell polling runs on (poll.go); nil: no
	// polling.
	Clock clock.Clock
}

// Engine is one NIC's RDMA verbs engine: its object tables, the requester
// (SQ → Falcon transactions) and the responder (Falcon requests → guest
// memory, RQ, CQ). It is the falcon.ULP of the NIC's endpoint. Not safe
// for concurrent use: the goroutine that owns the endpoint owns it.
type Engine struct {
	cfg   Config
	pds   map[uint32]*pd
	mrs   map[uint32]*MR
	lkeys map[uint32]*MR
	rkeys map[uint32]*MR
	cqs   map[uint32]*CQ
	qps   map[uint32]*QP
	srqs  map[uint32]*SRQ
	ahs   map[uint32]*AH
	conns map[*falcon.Conn]*connState
	gids  [][16]byte // the NIC's own GIDs (SetGIDs); nil: not enforced
	// connSweepAt is the table size at which connOf next sweeps dead entries.
	connSweepAt int
	mtt         uint32 // page-list entries held
	qpGen       map[uint32]uint8
	dma         *MR // the DMALKey region of kernel QPs

	pkt     []byte     // transmit scratch: headers + data
	held    []heldPull // responses waiting for Tx data room, in order
	scratch []byte     // receive scratch
	wqe     [SendWQESize]byte
	rwqe    [RecvWQESize]byte
	sge     [SGESize]byte
	word    [8]byte
	pbl     pblScratch // fast registrations' page-list reads
	poll    pollState
	Stats   Counters
}

type pd struct {
	h    uint32
	refs int
}

// MR is a registered memory region: the NIC's MTT entry. A user MR
// (RegMR) is valid from registration to deregistration; a fast-registration
// MR (AllocMR) moves between MRFree and MRValid by work requests (frwr.go).
type MR struct {
	H, PD      uint32
	LKey, RKey uint32
	IOVA, Len  uint64
	Access     uint32
	reg        region
	state      MRState
	mttPages   uint32 // MTT entries reserved for it
	fast       *fastMR
}

// AH is an address handle.
type AH struct {
	H, PD uint32
	AV    AV
}

// AV is the part of an address vector the NIC uses: DMAC names the peer
// NIC; the rest travels with UD messages so that the receiver can build the
// GRH (see ud.go).
type AV struct {
	DMAC     MAC
	SGID     [16]byte
	DGID     [16]byte
	Flow     uint32
	Net      uint8 // NetIPv4, NetIPv6, or NetNone when the GIDs are unknown
	HopLimit uint8
	TClass   uint8
	Valid    bool
}

// New returns an engine.
func New(cfg Config) *Engine {
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits()
	}
	if cfg.PMTUCap == 0 {
		cfg.PMTUCap = 4096
	}
	e := &Engine{cfg: cfg, pkt: make([]byte, 0, 64<<10), scratch: make([]byte, 64<<10)}
	e.dma = &MR{LKey: DMALKey, Len: ^uint64(0), Access: AccessLocalWrite, reg: region{dma: true, size: ^uint64(0)},
		state: MRValid}
	e.poll.cfg = PollConfig{}.withDefaults()
	e.poll.backoff = pollBackoffMin
	e.init()
	return e
}

func (e *Engine) init() {
	e.pds = map[uint32]*pd{}
	e.mrs = map[uint32]*MR{}
	e.lkeys = map[uint32]*MR{}
	e.rkeys = map[uint32]*MR{}
	e.cqs = map[uint32]*CQ{}
	e.qps = map[uint32]*QP{}
	e.srqs = map[uint32]*SRQ{}
	e.ahs = map[uint32]*AH{}
	if e.qpGen == nil {
		e.qpGen = map[uint32]uint8{}
	}
	if e.conns == nil {
		e.conns = map[*falcon.Conn]*connState{}
	}
}

// Limits returns the engine's limits.
func (e *Engine) Limits() Limits { return e.cfg.Limits }

// SetMemory attaches (or, with nil, detaches) the guest memory.
func (e *Engine) SetMemory(m Memory) { e.cfg.Mem = m }

// SetConns sets the connection manager.
func (e *Engine) SetConns(c Conns) { e.cfg.Conns = c }

// SetGIDs sets the NIC's own GIDs [issue 18, finding 7]: a UD send whose
// address vector carries any other source GID completes with
// LOC_QP_OP_ERR and sends nothing, so a guest cannot put another VM's GID
// into the receiver's GRH. The device passes the GIDs it knows the NIC
// owns (from its MAC and the addresses it assigned); nil (the default)
// does not check.
func (e *Engine) SetGIDs(gids [][16]byte) { e.gids = gids }

// ownGID reports whether g is one of the NIC's GIDs (true when none are set).
func (e *Engine) ownGID(g *[16]byte) bool {
	if e.gids == nil {
		return true
	}
	for i := range e.gids {
		if e.gids[i] == *g {
			return true
		}
	}
	return false
}

// LinkLocalGID returns the RoCE link-local GID of a NIC's MAC
// (fe80::/64 with the modified EUI-64 interface ID) [RFC 4291 App. A].
func LinkLocalGID(mac MAC) [16]byte {
	return [16]byte{0: 0xfe, 1: 0x80, 8: mac[0] ^ 0x02, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]}
}

// SetEvents sets the event sink.
func (e *Engine) SetEvents(f func(Event)) { e.cfg.Events = f }

func (e *Engine) event(k EventKind, h, code uint32) {
	if e.cfg.Events != nil {
		e.cfg.Events(Event{Kind: k, Handle: h, Code: code})
	}
}

// Objects returns the number of live objects (PD, MR, CQ, QP, SRQ, AH).
func (e *Engine) Objects() int {
	return len(e.pds) + len(e.mrs) + len(e.cqs) + len(e.qps) + len(e.srqs) + len(e.ahs)
}

// Reset destroys every object (the driver instance changed, or the guest
// is gone) and counts them as reclaimed. In-flight transport completions
// for destroyed QPs are ignored when they arrive.
func (e *Engine) Reset() int {
	n := e.Objects()
	e.Stats.Reclaimed.Add(uint64(n))
	e.mtt = 0
	// The QPs go without a store to their flag words: the guest memory
	// may no longer be the driver's.
	clear(e.poll.polled)
	e.poll.polled = e.poll.polled[:0]
	e.forgetHeld(nil)
	e.init()
	return n
}

func (e *Engine) checkNew(h uint32, exists bool, count int, limit uint32) error {
	if h == 0 || h > e.cfg.Limits.MaxHandle {
		return ErrBadHandle
	}
	if exists {
		return ErrHandleInUse
	}
	if uint32(count) >= limit {
		return ErrNoResources
	}
	return nil
}

// CreatePD creates protection domain h.
func (e *Engine) CreatePD(h uint32) error {
	_, ok := e.pds[h]
	if err := e.checkNew(h, ok, len(e.pds), e.cfg.Limits.MaxPD); err != nil {
		return err
	}
	e.pds[h] = &pd{h: h}
	return nil
}

// DestroyPD destroys protection domain h (busy while objects use it).
func (e *Engine) DestroyPD(h uint32) error {
	p, ok := e.pds[h]
	if !ok {
		return ErrBadHandle
	}
	if p.refs > 0 {
		return ErrBusy
	}
	delete(e.pds, h)
	return nil
}

// MRSpec is a REG_MR request.
type MRSpec struct {
	H, PD, LKey, RKey uint32
	IOVA, Len         uint64
	Access            uint32
	FirstOffset       uint32
	PBL               PBL
}

// RegMR registers a memory region: its page list is read and validated
// against guest RAM now and kept by the engine.
func (e *Engine) RegMR(s MRSpec) error {
	_, ok := e.mrs[s.H]
	if err := e.checkNew(s.H, ok, len(e.mrs), e.cfg.Limits.MaxMR); err != nil {
		return err
	}
	p, ok := e.pds[s.PD]
	if !ok {
		return ErrBadHandle
	}
	if s.Access&^accessAll != 0 {
		return ErrBadAccess
	}
	// Remote write or atomic requires local write [IB 10.6.3.1].
	if s.Access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && s.Access&AccessLocalWrite == 0 {
		return ErrBadAccess
	}
	if s.LKey == 0 || e.lkeys[s.LKey] != nil {
		return ErrBadParam
	}
	remote := s.Access&(AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic) != 0
	if remote && (s.RKey == 0 || e.rkeys[s.RKey] != nil) {
		return ErrBadParam
	}
	if s.Len == 0 || s.Len > e.cfg.Limits.MaxMRSize || s.FirstOffset >= PageSize || s.IOVA+s.Len < s.IOVA {
		return ErrBadParam
	}
	if err := e.reserve(s.PBL.NPages); err != nil {
		return err
	}
	pages, err := LoadPBL(e.cfg.Mem, s.PBL)
	if err != nil {
		e.mtt -= s.PBL.NPages
		return err
	}
	reg, err := newRegion(pages, uint64(s.FirstOffset), s.Len)
	if err != nil {
		e.mtt -= s.PBL.NPages
		return ErrBadParam
	}
	mr := &MR{H: s.H, PD: s.PD, LKey: s.LKey, IOVA: s.IOVA, Len: s.Len, Access: s.Access, reg: reg,
		state: MRValid, mttPages: s.PBL.NPages}
	if remote {
		mr.RKey = s.RKey
		e.rkeys[s.RKey] = mr
	}
	e.mrs[s.H] = mr
	e.lkeys[s.LKey] = mr
	p.refs++
	return nil
}

// DeregMR deregisters memory region h.
func (e *Engine) DeregMR(h uint32) error {
	mr, ok := e.mrs[h]
	if !ok {
		return ErrBadHandle
	}
	delete(e.mrs, h)
	e.mtt -= mr.mttPages
	mr.state = MRInvalid
	if e.lkeys[mr.LKey] == mr {
		delete(e.lkeys, mr.LKey)
	}
	if mr.RKey != 0 && e.rkeys[mr.RKey] == mr {
		delete(e.rkeys, mr.RKey)
	}
	if p := e.pds[mr.PD]; p != nil {
		p.refs--
	}
	return nil
}

// reserve accounts n page-list entries against MaxMTTPages.
func (e *Engine) reserve(n uint32) error {
	if uint64(e.mtt)+uint64(n) > uint64(e.cfg.Limits.MaxMTTPages) {
		return ErrNoResources
	}
	e.mtt += n
	return nil
}

// loadRing reserves MTT room for a ring's page list and loads it.
func (e *Engine) loadRing(s RingSpec, minElem int) (*Ring, error) {
	if err := e.reserve(s.PBL.NPages); err != nil {
		return nil, err
	}
	r, err := NewRing(e.cfg.Mem, s, minElem)
	if err != nil {
		e.mtt -= s.PBL.NPages
		return nil, err
	}
	return r, nil
}

// dropRing returns a ring's page-list entries.
func (e *Engine) dropRing(r *Ring) {
	if r != nil {
		e.mtt -= uint32(len(r.reg.pages))
	}
}

// span returns the MR-relative offset of [va, va+n) if it lies inside mr.
func (mr *MR) span(va uint64, n uint64) (uint64, bool) {
	if va < mr.IOVA || n > mr.Len || va-mr.IOVA > mr.Len-n {
		return 0, false
	}
	return va - mr.IOVA, true
}

// CreateAH creates address handle h.
func (e *Engine) CreateAH(h, pdh uint32, av AV) error {
	_, ok := e.ahs[h]
	if err := e.checkNew(h, ok, len(e.ahs), e.cfg.Limits.MaxAH); err != nil {
		return err
	}
	p, ok := e.pds[pdh]
	if !ok {
		return ErrBadHandle
	}
	av.Valid = true
	e.ahs[h] = &AH{H: h, PD: pdh, AV: av}
	p.refs++
	return nil
}

// DestroyAH destroys address handle h.
func (e *Engine) DestroyAH(h uint32) error {
	ah, ok := e.ahs[h]
	if !ok {
		return ErrBadHandle
	}
	delete(e.ahs, h)
	if p := e.pds[ah.PD]; p != nil {
		p.refs--
	}
	return nil
}
