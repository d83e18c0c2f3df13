package vsock

import (
	"fmt"
	"time"

	"falconnic/internal/clock"
	"falconnic/vhostuser"
)

// Engine limits and policies.
const (
	// vsockBufAlloc is our receive buffer per connection (the buf_alloc we
	// advertise): guest-to-host bytes not yet written to the host socket.
	vsockBufAlloc = 256 << 10
	// vsockHostBuf bounds host-to-guest bytes waiting for guest credit.
	vsockHostBuf = 256 << 10
	// vsockMaxConns bounds connections; more REQUESTs get RST. With two
	// 256 KiB rings and two 64 KiB pump buffers each, the worst case is
	// ~160 MiB.
	vsockMaxConns = 256
	// vsockMaxCtrl bounds queued control packets (RSTs to a flooding guest).
	vsockMaxCtrl = 4096
	// vsockConnectTimeout is how long a host-initiated REQUEST waits for
	// the guest's RESPONSE (Firecracker uses 2 s too).
	vsockConnectTimeout = 2 * time.Second
	// vsockEphemeralBase is the first host port of host-initiated connections.
	vsockEphemeralBase = 1 << 30
)

// vsockState is a connection's state.
type vsockState uint8

const (
	vsockConnecting  vsockState = iota // host-initiated: REQUEST sent, waiting for RESPONSE
	vsockDialing                       // guest-initiated: dialing UDS_P
	vsockEstablished                   // bytes flow (possibly half-closed)
)

var vsockStateNames = [...]string{
	vsockConnecting:  "connecting",
	vsockDialing:     "dialing",
	vsockEstablished: "established",
}

func (s vsockState) String() string {
	if int(s) < len(vsockStateNames) {
		return vsockStateNames[s]
	}
	return "state?"
}

// vsockKey names a connection: the guest's port and the host's port (the
// CIDs are fixed: the configured guest CID and 2).
type vsockKey struct{ guestPort, hostPort uint32 }

// vsockConn is one connection's state. Counters are the u32 wrapping
// counts of virtio 1.2 §5.10.6.3.
type vsockConn struct {
	key   vsockKey
	id    uint64 // host socket id (vsockActs refer to it)
	state vsockState
	// guest → host
	toHost      vsockRing
	rxCnt       uint32 // payload bytes received from the guest
	fwdCnt      uint32 // bytes written to the host socket
	lastFwdSent uint32 // fwd_cnt in the last header we sent
	creditDue   bool   // a CREDIT_UPDATE is queued
	// host → guest
	toGuest      vsockRing
	txCnt        uint32 // payload bytes sent to the guest
	peerBufAlloc uint32
	peerFwdCnt   uint32
	creditAsked  bool // CREDIT_REQUEST sent, no answer yet
	// shutdown
	guestShut  uint32 // SHUTDOWN flags the guest sent
	hostEOF    bool   // the host socket's read side ended
	shutSent   bool   // we sent SHUTDOWN(SEND)
	hostWClose bool   // we half-closed the host socket
	ready      bool   // listed in e.ready
	deadline   clock.Time
}

// peerCredit is how many more bytes the guest can take (§5.10.6.3).
func (c *vsockConn) peerCredit() uint32 {
	inflight := c.txCnt - c.peerFwdCnt
	if inflight >= c.peerBufAlloc {
		return 0
	}
	return c.peerBufAlloc - inflight
}

// vsockActKind is what the I/O layer must do for a connection's host socket.
type vsockActKind uint8

const (
	actDial       vsockActKind = iota // connect UDS_<port> for conn id
	actAccept                         // host-initiated conn is up: write "OK <port>\n", start the pumps
	actClose                          // close the host socket
	actCloseWrite                     // half-close the host socket (guest sent SHUTDOWN SEND)
	actWakeWriter                     // guest bytes are waiting for the host socket
	actWakeReader                     // room for host bytes again
)

var vsockActNames = [...]string{"dial", "accept", "close", "close-write", "wake-writer", "wake-reader"}

func (k vsockActKind) String() string { return vsockActNames[k] }

// vsockAct is one host-side action.
type vsockAct struct {
	kind vsockActKind
	id   uint64
	port uint32 // actDial: the host port P; actAccept: our host port
}

// vsockCtrl is a queued header-only packet to the guest.
type vsockCtrl struct {
	key   vsockKey
	op    Op
	flags uint32
}

// vsockEngine is the sans-I/O virtio-vsock connection state machine: guest
// packets, host socket events and the clock go in; packets for the guest
// (fillRx) and host-socket actions (acts) come out. The caller serializes
// calls and drains acts after each one.
type vsockEngine struct {
	guestCID uint64
	c        *Counters
	conns    map[vsockKey]*vsockConn
	byID     map[uint64]*vsockConn
	ctrl     vsockFIFO[vsockCtrl]
	ready    vsockFIFO[*vsockConn] // conns that may have data for the guest
	acts     []vsockAct
	nextPort uint32
	nextID   uint64
	// trace, if set, gets one line per packet and state change (tests,
	// debugging); off, it costs a nil check.
	trace func(string)
	hdr   [VsockHdrLen]byte
}

func newVsockEngine(guestCID uint64, c *Counters) *vsockEngine {
	return &vsockEngine{
		guestCID: guestCID, c: c,
		conns:    map[vsockKey]*vsockConn{},
		byID:     map[uint64]*vsockConn{},
		nextPort: vsockEphemeralBase,
	}
}

// tracef reports an event to the trace hook, if any.
func (e *vsockEngine) tracef(format string, args ...any) {
	if e.trace != nil {
		e.trace(fmt.Sprintf(format, args...))
	}
}

// tracePkt traces one packet: direction, op, ports, flags, len.
func (e *vsockEngine) tracePkt(dir string, h Hdr) {
	if e.trace != nil {
		e.tracef("%s %v %d:%d flags=%d len=%d buf_alloc=%d fwd_cnt=%d", dir, h.Op(), h.SrcPort(), h.DstPort(), h.Flags(), h.Len(), h.BufAlloc(), h.FwdCnt())
	}
}

// newID returns a fresh host socket id.
func (e *vsockEngine) newID() uint64 {
	e.nextID++
	return e.nextID
}

func (e *vsockEngine) act(k vsockActKind, id uint64, port uint32) {
	e.acts = append(e.acts, vsockAct{kind: k, id: id, port: port})
}

// takeActs returns and clears the pending actions.
func (e *vsockEngine) takeActs(dst []vsockAct) []vsockAct {
	dst = append(dst[:0], e.acts...)
	e.acts = e.acts[:0]
	return dst
}

// sendCtrl queues a header-only packet.
func (e *vsockEngine) sendCtrl(k vsockKey, op Op, flags uint32) {
	if e.ctrl.Len() >= vsockMaxCtrl {
		e.c.CtrlQueueFull.Inc()
		return
	}
	e.ctrl.Push(vsockCtrl{key: k, op: op, flags: flags})
}

func (e *vsockEngine) newConn(k vsockKey, id uint64, st vsockState) *vsockConn {
	c := &vsockConn{key: k, id: id, state: st}
	c.toHost.max = vsockBufAlloc
	c.toGuest.max = vsockHostBuf
	e.conns[k] = c
	e.byID[id] = c
	e.c.Conns.Inc()
	return c
}

// drop forgets a connection and closes its host socket.
func (e *vsockEngine) drop(c *vsockConn) {
	if e.conns[c.key] != c {
		return
	}
	e.tracef("conn %d:%d %v -> gone", c.key.guestPort, c.key.hostPort, c.state)
	delete(e.conns, c.key)
	delete(e.byID, c.id)
	c.toHost.Reset()
	c.toGuest.Reset()
	e.act(actClose, c.id, 0)
}

// reset sends RST to the guest and drops the connection.
func (e *vsockEngine) reset(c *vsockConn) {
	e.sendCtrl(c.key, VsockOpRst, 0)
	e.c.RstSent.Inc()
	e.drop(c)
}

// markReady lists c for the RX path if it has something to send.
func (e *vsockEngine) markReady(c *vsockConn) {
	if !c.ready {
		c.ready = true
		e.ready.Push(c)
	}
}

// guestPacket handles one packet from the TX queue (already gathered).
func (e *vsockEngine) guestPacket(b []byte, now clock.Time) {
	h, payload, err := ParseHdr(b, e.guestCID)
	if err != nil {
		e.c.parseCounter(err).Inc()
		e.tracef("guest> dropped %d bytes: %v", len(b), err)
		// A well-formed stream header from our guest that only breaks a
		// rule still names a connection: reset it, as Linux does.
		if len(b) >= VsockHdrLen && err != ErrVsockShort && err != ErrVsockSrcCID && err != ErrVsockDstCID {
			hv := Hdr(b[:VsockHdrLen])
			k := vsockKey{guestPort: hv.SrcPort(), hostPort: hv.DstPort()}
			if hv.Op() != VsockOpRst {
				if c := e.conns[k]; c != nil {
					e.reset(c)
				} else {
					e.sendCtrl(k, VsockOpRst, 0)
					e.c.RstSent.Inc()
				}
			}
		}
		return
	}
	e.c.PktsFromGuest.Inc()
	e.tracePkt("guest>", h)
	k := vsockKey{guestPort: h.SrcPort(), hostPort: h.DstPort()}
	c := e.conns[k]
	op := h.Op()
	if c == nil {
		switch op {
		case VsockOpRequest:
			e.guestRequest(k, h)
		case VsockOpRst:
			e.c.RstUnknown.Inc()
		default:
			e.c.UnknownConn.Inc()
			e.sendCtrl(k, VsockOpRst, 0)
			e.c.RstSent.Inc()
		}
		return
	}
	// Every header carries the guest's credit (§5.10.6.3).
	if c.peerBufAlloc != h.BufAlloc() || c.peerFwdCnt != h.FwdCnt() {
		c.peerBufAlloc, c.peerFwdCnt = h.BufAlloc(), h.FwdCnt()
		c.creditAsked = false
	}
	if handler := vsockGuestOps[op]; handler != nil {
		handler(e, c, h, payload)
	}
	if e.conns[k] == c {
		e.settle(c)
	}
	if c.toGuest.Len() > 0 && e.conns[k] == c {
		e.markReady(c)
	}
}

// vsockGuestOps handles an op for a known connection.
var vsockGuestOps = [...]func(e *vsockEngine, c *vsockConn, h Hdr, payload []byte){
	VsockOpRequest:       (*vsockEngine).guestDupRequest,
	VsockOpResponse:      (*vsockEngine).guestResponse,
	VsockOpRst:           (*vsockEngine).guestRst,
	VsockOpShutdown:      (*vsockEngine).guestShutdown,
	VsockOpRW:            (*vsockEngine).guestRW,
	VsockOpCreditUpdate:  (*vsockEngine).guestCreditUpdate,
	VsockOpCreditRequest: (*vsockEngine).guestCreditRequest,
}

// guestRequest: the guest connects to host port P; bridge to UDS_P.
func (e *vsockEngine) guestRequest(k vsockKey, h Hdr) {
	if len(e.conns) >= vsockMaxConns {
		e.c.ConnLimit.Inc()
		e.sendCtrl(k, VsockOpRst, 0)
		e.c.RstSent.Inc()
		return
	}
	c := e.newConn(k, e.newID(), vsockDialing)
	c.peerBufAlloc, c.peerFwdCnt = h.BufAlloc(), h.FwdCnt()
	e.c.GuestConnects.Inc()
	e.act(actDial, c.id, k.hostPort)
}

func (e *vsockEngine) guestDupRequest(c *vsockConn, h Hdr, _ []byte) {
	e.c.DupRequest.Inc()
	e.reset(c)
}

// dialDone reports the result of dialing UDS_P for a guest REQUEST.
func (e *vsockEngine) dialDone(id uint64, ok bool) {
	c := e.byID[id]
	if c == nil || c.state != vsockDialing {
		return
	}
	if !ok {
		e.c.DialFailed.Inc()
		e.reset(c)
		return
	}
	c.state = vsockEstablished
	e.tracef("conn %d:%d -> established", c.key.guestPort, c.key.hostPort)
	e.sendCtrl(c.key, VsockOpResponse, 0)
	e.act(actWakeReader, c.id, 0)
}

// hostConnect starts a host-initiated connection to the guest's port
// ("CONNECT <port>" on UDS). It returns our host port.
func (e *vsockEngine) hostConnect(id uint64, guestPort uint32, now clock.Time) (uint32, bool) {
	if len(e.conns) >= vsockMaxConns {
		e.c.ConnLimit.Inc()
		return 0, false
	}
	var k vsockKey
	for {
		p := e.nextPort
		e.nextPort++
		if e.nextPort == 0 {
			e.nextPort = vsockEphemeralBase
		}
		k = vsockKey{guestPort: guestPort, hostPort: p}
		if e.conns[k] == nil {
			break
		}
	}
	c := e.newConn(k, id, vsockConnecting)
	c.deadline = now + vsockConnectTimeout
	e.c.HostConnects.Inc()
	e.sendCtrl(k, VsockOpRequest, 0)
	return k.hostPort, true
}

func (e *vsockEngine) guestResponse(c *vsockConn, h Hdr, _ []byte) {
	if c.state != vsockConnecting {
		e.c.UnexpectedOp.Inc()
		e.reset(c)
		return
	}
	c.state = vsockEstablished
	e.tracef("conn %d:%d -> established", c.key.guestPort, c.key.hostPort)
	e.c.Established.Inc()
	e.act(actAccept, c.id, c.key.hostPort)
}

func (e *vsockEngine) guestRst(c *vsockConn, h Hdr, _ []byte) {
	e.c.RstReceived.Inc()
	e.drop(c)
}

func (e *vsockEngine) guestShutdown(c *vsockConn, h Hdr, _ []byte) {
	if c.state != vsockEstablished {
		e.c.UnexpectedOp.Inc()
		e.reset(c)
		return
	}
	c.guestShut |= h.Flags()
	if c.guestShut&VsockShutdownRcv != 0 && c.toGuest.Len() > 0 {
		e.c.HostBytesDiscarded.Add(uint64(c.toGuest.Len()))
		c.toGuest.Reset()
	}
	e.settle(c)
}

// settle applies the half-closes that are due (virtio 1.2 §5.10.6.5):
//   - the host socket's write side closes once the guest stopped sending
//     and every byte reached the host;
//   - our SHUTDOWN(SEND) goes out once the host stopped and every byte
//     reached the guest (with RCV too if the guest already stopped
//     sending: nothing can flow any more, and Linux then answers RST);
//   - the final RST goes out once the guest shut both directions (it
//     waits for it), or once both sides stopped sending and the guest has
//     consumed everything we sent (its fwd_cnt): an earlier RST would
//     discard bytes still queued in the guest socket.
func (e *vsockEngine) settle(c *vsockConn) {
	if c.state != vsockEstablished {
		return
	}
	guestSendDone := c.guestShut&VsockShutdownSend != 0
	guestRcvDone := c.guestShut&VsockShutdownRcv != 0
	if guestSendDone && c.toHost.Len() == 0 && !c.hostWClose {
		c.hostWClose = true
		e.act(actCloseWrite, c.id, 0)
	}
	if c.hostEOF && c.toGuest.Len() == 0 && !c.shutSent && !guestRcvDone {
		c.shutSent = true
		flags := VsockShutdownSend
		if guestSendDone {
			flags |= VsockShutdownRcv
		}
		e.sendCtrl(c.key, VsockOpShutdown, flags)
	}
	if c.toHost.Len() != 0 {
		return
	}
	guestClosed := guestSendDone && guestRcvDone
	bothStopped := guestSendDone && c.hostEOF && (c.shutSent || guestRcvDone) && c.peerFwdCnt == c.txCnt
	if guestClosed || bothStopped {
		e.c.Closed.Inc()
		e.reset(c)
	}
}

func (e *vsockEngine) guestRW(c *vsockConn, h Hdr, payload []byte) {
	switch {
	case c.state != vsockEstablished:
		e.c.UnexpectedOp.Inc()
		e.reset(c)
		return
	case c.guestShut&VsockShutdownSend != 0:
		e.c.DataAfterShutdown.Inc()
		e.reset(c)
		return
	case len(payload) > c.toHost.Room():
		// The guest sent beyond the credit we gave: the stream can no
		// longer be trusted.
		e.c.GuestOverCredit.Inc()
		e.reset(c)
		return
	}
	c.toHost.Write(payload)
	c.rxCnt += uint32(len(payload))
	e.c.BytesToHost.Add(uint64(len(payload)))
	e.act(actWakeWriter, c.id, 0)
}

func (e *vsockEngine) guestCreditUpdate(c *vsockConn, h Hdr, _ []byte) {
	c.creditAsked = false
}

func (e *vsockEngine) guestCreditRequest(c *vsockConn, h Hdr, _ []byte) {
	e.queueCreditUpdate(c)
}

func (e *vsockEngine) queueCreditUpdate(c *vsockConn) {
	if c.creditDue {
		return
	}
	c.creditDue = true
	e.sendCtrl(c.key, VsockOpCreditUpdate, 0)
}

// hostRoom is how many host bytes conn id can take now (0: wait).
func (e *vsockEngine) hostRoom(id uint64) int {
	c := e.byID[id]
	if c == nil || c.state != vsockEstablished {
		return 0
	}
	if c.guestShut&VsockShutdownRcv != 0 {
		return 64 << 10 // read and discard
	}
	return c.toGuest.Room()
}

// hostRead queues bytes read from the host socket for the guest.
func (e *vsockEngine) hostRead(id uint64, p []byte) {
	c := e.byID[id]
	if c == nil || c.state != vsockEstablished {
		e.c.HostBytesDiscarded.Add(uint64(len(p)))
		return
	}
	if c.guestShut&VsockShutdownRcv != 0 {
		e.c.HostBytesDiscarded.Add(uint64(len(p)))
		return
	}
	n := c.toGuest.Write(p)
	if n < len(p) {
		e.c.HostBytesDiscarded.Add(uint64(len(p) - n))
	}
	e.markReady(c)
}

// hostEOF: the host socket's read side ended (the client half-closed or closed).
func (e *vsockEngine) hostEOF(id uint64) {
	c := e.byID[id]
	if c == nil {
		return
	}
	c.hostEOF = true
	e.settle(c)
}

// hostError: the host socket failed; the guest gets RST.
func (e *vsockEngine) hostError(id uint64) {
	c := e.byID[id]
	if c == nil {
		return
	}
	e.c.HostIOError.Inc()
	e.reset(c)
}

// hostGone: a host-initiated client went away before the guest answered.
func (e *vsockEngine) hostGone(id uint64) {
	if c := e.byID[id]; c != nil {
		e.reset(c)
	}
}

// peekToHost copies guest bytes waiting for the host socket into p.
func (e *vsockEngine) peekToHost(id uint64, p []byte) int {
	c := e.byID[id]
	if c == nil {
		return 0
	}
	return c.toHost.Peek(p)
}

// hostWrote consumes n bytes the host socket took; it sends a
// CREDIT_UPDATE when the guest's view of our free space runs low.
func (e *vsockEngine) hostWrote(id uint64, n int) {
	c := e.byID[id]
	if c == nil {
		return
	}
	c.toHost.Discard(n)
	c.fwdCnt += uint32(n)
	// The guest's view of our free space is buf_alloc minus what it sent
	// since the fwd_cnt we last told it. Tell it more once that view is
	// below half and the news is worth a packet (a quarter of the buffer,
	// or everything forwarded).
	guestViewFree := vsockBufAlloc - int(c.rxCnt-c.lastFwdSent)
	freed := int(c.fwdCnt - c.lastFwdSent)
	if freed > 0 && guestViewFree < vsockBufAlloc/2 && (freed >= vsockBufAlloc/4 || c.toHost.Len() == 0) {
		e.queueCreditUpdate(c)
	}
	e.settle(c)
}

// onTimer resets host-initiated connections the guest did not answer.
func (e *vsockEngine) onTimer(now clock.Time) {
	for _, c := range e.conns {
		if c.state == vsockConnecting && now >= c.deadline {
			e.c.ConnectTimeout.Inc()
			e.reset(c)
		}
	}
}

// resetAll forgets every connection (session loss): host sockets close,
// nothing is sent (the rings are gone).
func (e *vsockEngine) resetAll() {
	for _, c := range e.conns {
		e.c.SessionResets.Inc()
		e.drop(c)
	}
	e.ctrl.Reset()
	e.ready.Reset()
}

// hasRx reports whether a packet is waiting for an RX buffer.
func (e *vsockEngine) hasRx() bool {
	// Drop queued control packets of connections that went away (only
	// their RST still matters), so a popped RX buffer is never wasted.
	for e.ctrl.Len() > 0 && e.ctrl.Front().op != VsockOpRst && e.conns[e.ctrl.Front().key] == nil {
		e.ctrl.Pop()
	}
	if e.ctrl.Len() > 0 {
		return true
	}
	for _, c := range e.ready.Items() {
		if e.conns[c.key] == c && c.toGuest.Len() > 0 && c.guestShut&VsockShutdownRcv == 0 && (c.peerCredit() > 0 || !c.creditAsked) {
			return true
		}
	}
	return false
}

// fillRx writes the next packet for the guest into an RX chain's writable
// buffers and returns the bytes written (0: nothing to send or the chain
// is too small, counted).
func (e *vsockEngine) fillRx(bufs []vhostuser.Buf, room uint64) uint32 {
	if room < VsockHdrLen {
		e.c.RxBufTooSmall.Inc()
		return 0
	}
	h := Hdr(e.hdr[:])
	for e.ctrl.Len() > 0 {
		p := e.ctrl.Front()
		e.ctrl.Pop()
		var bufAlloc, fwd uint32
		if c := e.conns[p.key]; c != nil {
			bufAlloc, fwd = vsockBufAlloc, c.fwdCnt
			c.lastFwdSent = fwd
			if p.op == VsockOpCreditUpdate {
				c.creditDue = false
			}
		} else if p.op != VsockOpRst {
			continue // the connection went away; only its RST still matters
		}
		putVsockHdr(h, e.guestCID, p.key.hostPort, p.key.guestPort, p.op, p.flags, 0, bufAlloc, fwd)
		scatter(bufs, 0, e.hdr[:])
		e.c.PktsToGuest.Inc()
		e.tracePkt("<guest", h)
		return VsockHdrLen
	}
	for e.ready.Len() > 0 {
		c := e.ready.Front()
		if e.conns[c.key] != c || c.toGuest.Len() == 0 || c.guestShut&VsockShutdownRcv != 0 {
			c.ready = false
			e.ready.Pop()
			continue
		}
		credit := c.peerCredit()
		if credit == 0 {
			// Stalled on guest credit: ask once; CREDIT_UPDATE re-lists it.
			c.ready = false
			e.ready.Pop()
			e.c.TxNoCredit.Inc()
			if !c.creditAsked {
				c.creditAsked = true
				e.sendCtrl(c.key, VsockOpCreditRequest, 0)
				return e.fillRx(bufs, room)
			}
			continue
		}
		n := uint64(c.toGuest.Len())
		n = min(n, uint64(credit), room-VsockHdrLen, vsockMaxPayload)
		if n == 0 {
			e.c.RxBufTooSmall.Inc()
			return 0
		}
		putVsockHdr(h, e.guestCID, c.key.hostPort, c.key.guestPort, VsockOpRW, 0, uint32(n), vsockBufAlloc, c.fwdCnt)
		c.lastFwdSent = c.fwdCnt
		scatter(bufs, 0, e.hdr[:])
		scatterRing(bufs, VsockHdrLen, &c.toGuest, int(n))
		c.toGuest.Discard(int(n))
		c.txCnt += uint32(n)
		e.c.PktsToGuest.Inc()
		e.tracePkt("<guest", h)
		e.c.BytesToGuest.Add(n)
		// Round robin: move c to the back if it still has data.
		e.ready.Pop()
		c.ready = false
		if c.toGuest.Len() > 0 {
			e.markReady(c)
		}
		e.act(actWakeReader, c.id, 0)
		e.settle(c)
		return uint32(VsockHdrLen + n)
	}
	return 0
}

// scatter copies p into the writable buffers starting at byte off.
func scatter(bufs []vhostuser.Buf, off int, p []byte) {
	for _, b := range bufs {
		if !b.Write || len(p) == 0 {
			continue
		}
		if off >= len(b.Data) {
			off -= len(b.Data)
			continue
		}
		c := copy(b.Data[off:], p)
		p = p[c:]
		off = 0
	}
}

// scatterRing copies n bytes from the head of r into the writable buffers at off.
func scatterRing(bufs []vhostuser.Buf, off int, r *vsockRing, n int) {
	skip := 0
	for _, b := range bufs {
		if !b.Write || n == 0 {
			continue
		}
		if off >= len(b.Data) {
			off -= len(b.Data)
			continue
		}
		dst := b.Data[off:]
		if len(dst) > n {
			dst = dst[:n]
		}
		c := r.peekAt(skip, dst)
		skip += c
		n -= c
		off = 0
	}
}
