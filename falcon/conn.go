package falcon

import (
	"time"

	"falconnic/falcon/pdl"
	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// Window indexes of Conn.tx and Conn.rx.
const (
	reqW  = 0 // request window (Pull Requests)
	dataW = 1 // data window (Push Data, Pull Data, data Resync)
)

func windowIndex(w wire.Window) int {
	if w == wire.WindowRequest {
		return reqW
	}
	return dataW
}

// rxWindowSize is the receiver window per index [S §9].
var rxWindowSize = [2]uint32{pdl.RxRequestWindow, pdl.RxDataWindow}

// Conn is one end of a Falcon connection: both PDL directions (two TX and two
// RX windows), the initiator and target transaction tables, and the CC
// state the RUE round-trips.
type Conn struct {
	ep   *Endpoint
	cfg  ConnConfig
	dead bool

	tx        [2]pdl.TxWindow
	rx        [2]pdl.RxWindow
	co        pdl.Coalescer
	ackAR     bool // the pending ACK is due to AR or a duplicate
	lastT1    wire.Timestamp
	lastT2    wire.Timestamp
	arN       uint32
	rtt       pdl.RTT
	remote    wire.Timestamp // replay check state [S §9.2.2.2]
	remoteSet bool
	remoteAt  time.Duration // local time c.remote was last raised
	rxFlow    uint32        // flow label of the latest frame: ACKs reflect it
	rxMark    Mark          // the fabric's marks on the frame being received
	tIdx      int32         // index in the endpoint's timer heap, -1 when absent
	tAt       time.Duration // key there: ≤ the earliest deadline
	order     uint64        // setup order (timer ties)
	lastHops  uint8         // switches the latest transaction packet crossed
	ecnCount  uint16        // transaction packets received ECN-marked (wraps at 14 bits)
	gbnExp    [2]wire.PSN   // Go-Back-N: PSN last NACKed as expected
	gbnOK     [2]bool
	// ackFlows are the latest unreported transaction packet of each flow
	// (label's low 2 bits) the peer sends on: an ACK goes to each, with
	// that packet's timestamps, so every flow gets its delay samples.
	ackFlows [4]ackFlow

	// Enforcement (set by RUE responses).
	fcwnd    rue.Fixed
	ncwnd    uint32
	ipg      time.Duration
	rto      time.Duration
	nextSend time.Duration
	flows    [4]flowCC
	// The NIC window is the connection's, whichever flow's event moves
	// it: its marker, direction and the RUE's opaque word (Swift keeps
	// ncwnd's fraction there) round-trip here, not per flow.
	nicMark  uint32
	ncwndUp  bool
	ccOpaque uint32
	ev       rue.Event
	rackXmit time.Duration
	nextFlow uint8

	// Deadlines.
	rtoAt, tlpAt, rnrAt, txnAt             time.Duration
	rtoArmed, tlpArmed, rnrArmed, txnArmed bool
	paceArmed, tlpFired, xoff, inCB        bool
	tlpResumed                             bool  // tlpAt was restarted after a host stall since it was armed (Resumed)
	tlpProbes                              uint8 // probes since the last ACK

	ini     tl.Initiator
	cplNext wire.RSN
	tgt     tl.Target
	pullQ   rsnRing
	txHeld  int       // Tx request packets this connection holds (dynamic threshold)
	alpha   rue.Fixed // the RUE's dynamic-threshold alpha for it (0: the NIC's) [RM-8]

	req   Request
	cpl   Completion
	ackf  wire.AckFields
	hot   connCounts // counts not yet published (hot.go)
	Stats ConnCounters
}

// ackFlow is the receiver's view of one of the peer's flows: its latest
// transaction packet not yet reported in a standalone ACK.
type ackFlow struct {
	t1, t2  wire.Timestamp
	label   uint32
	pending bool
}

// flowCC is the per-flow congestion state that round-trips through the RUE.
type flowCC struct {
	fcwnd                  rue.Fixed
	pending                bool
	evAt                   time.Duration
	acked                  uint32
	fabricMarker           uint32
	delayState, rttState   uint32
	baseDelay              uint32
	ccMetadata, lastEvTime uint32
	plbState               uint32
	out                    uint32 // packets sent on the flow and not yet acknowledged
	credit                 int32  // weighted round robin's accumulated credit
	rerouted               bool
	rerouteAt, holdUntil   time.Duration // protective reroute's last time and PLB hold
	// An RTO episode (judgeTimeouts): the flow's first RTO resend since
	// the last episode ended, at undoAt, of packet undoPSN in window
	// undoWin, found the flow's window at undoFcwnd; undoAcked: that
	// packet has been acknowledged since.
	undoArmed, undoAcked bool
	undoWin              uint8
	undoPSN              wire.PSN
	undoFcwnd            rue.Fixed
	undoAt               time.Duration
}

type rsnRing struct {
	buf     []wire.RSN
	head, n int
}

func (r *rsnRing) push(x wire.RSN) {
	if r.n == len(r.buf) {
		nb := make([]wire.RSN, 2*len(r.buf)+8)
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = x
	r.n++
}

func (r *rsnRing) front() wire.RSN { return r.buf[r.head] }

func (r *rsnRing) pop() {
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

func newConn(e *Endpoint, cc ConnConfig) *Conn {
	c := &Conn{ep: e, cfg: cc, ncwnd: cc.InitNcwnd, rto: cc.InitRTO, tIdx: -1}
	c.initCounts()
	for i := 0; i < cc.Flows; i++ {
		c.flows[i].fcwnd = cc.InitFcwnd
	}
	c.sumFcwnd()
	c.tx[reqW].Init(cc.TxReqPSN, cc.TxWindow)
	c.tx[dataW].Init(cc.TxDataPSN, cc.TxWindow)
	c.rx[reqW].Init(cc.RxReqPSN, pdl.RxRequestWindow)
	c.rx[dataW].Init(cc.RxDataPSN, pdl.RxDataWindow)
	c.co = pdl.Coalescer{Threshold: cc.AckCoalesceCount, Timeout: cc.AckCoalesceTimeout}
	c.ini.Init(cc.TxRSN, cc.MaxTxns)
	c.cplNext = cc.TxRSN
	c.tgt.Init(cc.RxRSN, 2*cc.MaxTxns)
	c.pullQ.buf = make([]wire.RSN, 2*cc.MaxTxns)
	return c
}

// SCID returns the local CID.
func (c *Conn) SCID() uint32 { return c.cfg.SCID }

// Config returns the connection's configuration (defaults filled in).
func (c *Conn) Config() ConnConfig { return c.cfg }

// MTU is the connection's largest transaction payload (ConnConfig.MTU).
func (c *Conn) MTU() int { return c.cfg.MTU }

// Dead reports whether the connection failed.
func (c *Conn) Dead() bool { return c.dead }

// Fcwnd returns the enforced fabric window.
func (c *Conn) Fcwnd() rue.Fixed { return c.fcwnd }

// RTO returns the current base retransmission timeout.
func (c *Conn) RTO() time.Duration { return c.rto }

// SmoothedRTT returns the datapath's RTT estimate (0 before a sample).
func (c *Conn) SmoothedRTT() time.Duration { return c.rtt.Or(0) }

// Outstanding returns the transactions submitted and not yet completed.
func (c *Conn) Outstanding() int { return int(c.ini.Live()) }

// Idle reports whether nothing is in flight or pending in either direction.
func (c *Conn) Idle() bool {
	return c.ini.Live() == 0 && c.tx[reqW].Outstanding() == 0 && c.tx[dataW].Outstanding() == 0 &&
		c.pullQ.n == 0 && !c.rx[reqW].HasState() && !c.rx[dataW].HasState()
}

// flowOf maps a received flow label to one of our flows.
func (c *Conn) flowOf(label uint32) uint8 { return c.flowIndex(uint8(label & 3)) }

// flowIndex is id modulo the connection's flow count, without a division
// for an id already in range (every packet's own flow, a single flow's
// every label): it runs once per acknowledged packet.
func (c *Conn) flowIndex(id uint8) uint8 {
	if n := uint8(c.cfg.Flows); id >= n {
		return id % n
	}
	return id
}

// sumFcwnd sets the connection's fabric window to the sum of its flows'
// (digest §7), saturating at the 21-bit fixed-point maximum.
func (c *Conn) sumFcwnd() {
	var s rue.Fixed
	for i := 0; i < c.cfg.Flows; i++ {
		s += c.flows[i].fcwnd
	}
	c.fcwnd = min(max(s, 1), 1<<21-1)
	if m := c.cfg.MaxFcwnd; m > 0 {
		c.fcwnd = min(c.fcwnd, m)
	}
}

// deadline returns the earliest pending timer of the connection.
func (c *Conn) deadline() (time.Duration, bool) {
	best, ok := c.co.Deadline()
	consider := func(t time.Duration, armed bool) {
		if armed && (!ok || t < best) {
			best, ok = t, true
		}
	}
	consider(c.rtoAt, c.rtoArmed)
	consider(c.tlpAt, c.tlpArmed)
	consider(c.rnrAt, c.rnrArmed)
	consider(c.txnAt, c.txnArmed)
	consider(c.nextSend, c.paceArmed)
	return best, ok
}

func (c *Conn) armRTO(t time.Duration) {
	if !c.rtoArmed || t < c.rtoAt {
		c.rtoAt, c.rtoArmed = t, true
	}
}

func (c *Conn) armTxn(t time.Duration) {
	if !c.txnArmed || t < c.txnAt {
		c.txnAt, c.txnArmed = t, true
	}
}

func (c *Conn) armRNR(t time.Duration) {
	if !c.rnrArmed || t < c.rnrAt {
		c.rnrAt, c.rnrArmed = t, true
	}
}

// onTimer runs the connection's due deadlines.
func (c *Conn) onTimer(now time.Duration) {
	if c.dead {
		c.rtoArmed, c.tlpArmed, c.rnrArmed, c.paceArmed, c.txnArmed = false, false, false, false, false
		c.co.Sent()
		return
	}
	if c.rtoArmed && now >= c.rtoAt {
		c.rtoScan(now)
	}
	if c.tlpArmed && now >= c.tlpAt {
		c.tlpArmed = false
		c.tlpProbe(now)
	}
	if c.rnrArmed && now >= c.rnrAt {
		c.rnrScan(now)
	}
	if c.txnArmed && now >= c.txnAt {
		c.txnScan(now)
	}
	if c.paceArmed && now >= c.nextSend {
		c.paceArmed = false
	}
	c.flushTimer(now)
}

// flush sends what became sendable and a standalone ACK if one is due.
// It ends by lowering the endpoint's cached next deadline (touch).
func (c *Conn) flush(now time.Duration) {
	if !c.dead && !c.inCB {
		c.pump(now)
		if c.co.Due(now) {
			c.sendAck(now, false)
		}
	}
	c.touch()
}

func (c *Conn) flushTimer(now time.Duration) {
	if c.dead {
		return
	}
	c.pump(now)
	if c.co.Due(now) {
		c.sendAck(now, true)
	}
}

// wantAck asks for an immediate ACK (AR, duplicate, Resync).
func (c *Conn) wantAck(now time.Duration) {
	c.ackAR = true
	c.co.Request(now)
}

// fail declares the connection dead [S §9.1.5]: every live transaction
// completes with kCmplDeadConn and its resources return.
func (c *Conn) fail(now time.Duration) {
	if c.dead {
		return
	}
	c.dead = true
	c.Stats.Fatal.Inc()
	for rsn := c.ini.Base; rsn != c.ini.Next; rsn = rsn.Add(1) {
		s := c.ini.Slot(rsn)
		switch s.State {
		case tl.IQueued, tl.ISent:
			c.reportOne(rsn, s, tl.CmplDeadConn, s.ULPCode, nil)
		case tl.IDone: // finished, waiting for its turn: keep its outcome
			c.reportOne(rsn, s, s.Status, s.ULPCode, s.Data)
		}
	}
	c.ini.Advance()
	for rsn, i := c.tgt.Base, uint32(0); i < c.tgt.Cap(); rsn, i = rsn.Add(1), i+1 {
		s := c.tgt.Slot(rsn)
		if s.State != tl.TFree && s.State != tl.TFinished {
			c.releaseTarget(s)
			s.State = tl.TFinished
		}
	}
	c.rtoArmed, c.tlpArmed, c.rnrArmed, c.paceArmed, c.txnArmed = false, false, false, false, false
	c.co.Sent()
}

// releaseTarget returns a target transaction's resources.
func (c *Conn) releaseTarget(s *tl.TTxn) {
	res := c.ep.res
	if s.Cells > 0 {
		res.RxNet.Give(s.Cells)
		s.Cells = 0
	}
	if s.TxCells > 0 {
		res.TxData.Give(s.TxCells)
		s.TxCells = 0
	}
	c.ep.xonScan()
}
