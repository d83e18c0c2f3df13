package falcon

import (
	"falconnic/falcon/framebuf"
	"falconnic/falcon/pdl"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// Push submits a push transaction (≤ MTU bytes, copied). It returns the RSN,
// or ErrXoff when the connection's table or the NIC's Tx request pool is
// full (OnXon follows when there is room).
func (c *Conn) Push(cookie uint64, payload []byte) (wire.RSN, error) {
	return c.PushGather(cookie, payload, nil, 0, 0)
}

// PushGather is Push of hdr followed by n bytes of the scatter list segs
// from byte offset off (fewer if segs end sooner): a ULP header and data
// from several buffers go into the packet with one copy.
func (c *Conn) PushGather(cookie uint64, hdr []byte, segs [][]byte, off, n int) (wire.RSN, error) {
	return c.push(cookie, hdr, n, segs, off, nil)
}

// PushFill is Push of hdr followed by n bytes that fill writes into the
// packet itself: the ULP reads its data (guest memory) straight into the
// frame, which is the payload's only copy on the sending side. fill runs
// before anything is submitted; its error comes back as it is, and the
// push is then not made.
func (c *Conn) PushFill(cookie uint64, hdr []byte, n int, fill func(payload []byte) error) (wire.RSN, error) {
	return c.push(cookie, hdr, n, nil, 0, fill)
}

// push is PushGather (fill nil) and PushFill. Over a RefLink a payload of
// sharedMin bytes or more goes into a shared frame buffer, which the
// receiver takes over (SendShared) instead of a copy of its own.
func (c *Conn) push(cookie uint64, hdr []byte, n int, segs [][]byte, off int, fill func([]byte) error) (wire.RSN, error) {
	if c.dead {
		return 0, ErrDead
	}
	if n < 0 || len(hdr)+n > c.cfg.MTU {
		return 0, ErrTooLong
	}
	res := c.ep.res
	cells := res.Cells(len(hdr) + n)
	if c.ini.Full() || !res.Admit(c.txHeld, c.alpha.Float()) || !res.TxReq.Take(cells, false) {
		return 0, c.refuse()
	}
	next := c.ini.Slot(c.ini.Next) // the slot Add gives the push
	frame, m, err := c.build(next.Frame, wire.PushDataHeaderLen, hdr, n, segs, off, fill)
	if err != nil {
		res.TxReq.Give(cells)
		next.Frame = frame
		return 0, err
	}
	rsn, t := c.ini.Add(tl.Push, cookie)
	if m != nil {
		t.Mem, t.Shared = m, frame
	} else {
		t.Frame = frame
	}
	t.Cells = cells
	c.txHeld++
	now, outer := c.ep.enter()
	defer c.ep.leave(outer)
	c.count(hotTxnSubmitted)
	c.flush(now)
	return rsn, nil
}

// PushFrame is Push of a packet the ULP built in a buffer of its own, sent
// without copying the payload: frame holds wire.PushDataHeaderLen bytes of
// room, then the payload, and has EnvelopeLen bytes of spare capacity. The
// buffer is Falcon's from the call on; the push's Completion gives it back
// (Completion.Frame) once no packet of the transaction can be sent from it
// again, else Falcon keeps it (Frame nil: a connection that failed, a push
// completed by a NACK while its packet was still outstanding).
func (c *Conn) PushFrame(cookie uint64, frame []byte) (wire.RSN, error) {
	if c.dead {
		return 0, ErrDead
	}
	n := len(frame) - wire.PushDataHeaderLen
	if n < 0 || cap(frame)-len(frame) < envelopeLen {
		return 0, ErrBadFrame
	}
	if n > c.cfg.MTU {
		return 0, ErrTooLong
	}
	res := c.ep.res
	cells := res.Cells(n)
	if c.ini.Full() || !res.Admit(c.txHeld, c.alpha.Float()) || !res.TxReq.Take(cells, false) {
		return 0, c.refuse()
	}
	rsn, t := c.ini.Add(tl.Push, cookie)
	t.Cells = cells
	c.txHeld++
	t.Lent = frame
	now, outer := c.ep.enter()
	defer c.ep.leave(outer)
	c.count(hotTxnSubmitted)
	c.flush(now)
	return rsn, nil
}

// build builds a packet of headLen bytes of header room, hdr and n bytes
// of payload, from segs at byte offset off or written by fill: in a shared
// frame buffer m when the link takes them (sharedFrame), else in own, the
// transaction's reusable buffer. If fill fails it returns the buffer to
// keep as own (emptied), no m, and fill's error.
func (c *Conn) build(own []byte, headLen int, hdr []byte, n int, segs [][]byte, off int, fill func([]byte) error) (frame []byte, m *framebuf.Buf, err error) {
	frame = own
	if n >= sharedMin { // a smaller payload is not worth a shared frame
		if m, frame = c.sharedFrame(headLen+len(hdr), n); m == nil {
			frame = own
		}
	}
	frame, payload := place(frame, headLen, hdr, n)
	if fill == nil {
		return frame[:len(frame)-n+gather(payload, segs, off)], m, nil
	}
	if err := fill(payload); err != nil {
		if m != nil {
			m.Release()
			return own[:0], nil, err
		}
		return frame[:0], nil, err
	}
	return frame, m, nil
}

// place fills frame with headLen bytes of room for the Falcon header, then
// hdr, then n bytes for the payload (returned, to be written), leaving
// capacity for the envelope, so that the packet is built in place
// (buildInPlace).
func place(frame []byte, headLen int, hdr []byte, n int) (packet, payload []byte) {
	if need := headLen + len(hdr) + n + envelopeLen; cap(frame) < need {
		frame = make([]byte, 0, need+64)
	}
	frame = append(frame[:headLen], hdr...)
	at := len(frame)
	frame = frame[:at+n]
	return frame, frame[at:]
}

// gather copies the bytes of segs from byte offset off into payload and
// returns how many there were (fewer than len(payload) if segs end sooner).
func gather(payload []byte, segs [][]byte, off int) int {
	n := 0
	for _, s := range segs {
		if n == len(payload) {
			break
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n += copy(payload[n:], s[off:])
		off = 0
	}
	return n
}

// sharedMin is the least payload worth a shared frame buffer.
const sharedMin = 512

// sharedFrame returns a shared frame buffer (holding one reference, the
// caller's) and the empty frame placed in it for pre bytes of headers and
// n of payload, the payload starting on a page, when the connection's link
// takes frames by reference (RefLink) and a buffer holds the frame: the
// receiver then gets the frame itself (SendShared) and can keep it. build
// asks only for payloads of sharedMin bytes or more.
func (c *Conn) sharedFrame(pre, n int) (*framebuf.Buf, []byte) {
	if pre+n+envelopeLen > framebuf.LargeSize-framebuf.Page {
		return nil, nil
	}
	if _, ok := c.link().(RefLink); !ok {
		return nil, nil
	}
	m := framebuf.Get(pre + n + envelopeLen)
	frame, ok := m.Head(pre)
	if !ok {
		m.Release()
		return nil, nil
	}
	return m, frame
}

// Pull submits a pull transaction for length bytes of Pull Data. The Rx
// space for the data is reserved now [S §8.2].
func (c *Conn) Pull(cookie uint64, length int) (wire.RSN, error) {
	return c.PullHeader(cookie, length, nil)
}

// PullHeader is Pull with ULP request headers carried in the Pull Request
// (RDMA READ's RBTH+RETH+..., NVMe's Write Data Request NBTH); the target
// sees them as Request.Payload. hdr is copied.
func (c *Conn) PullHeader(cookie uint64, length int, hdr []byte) (wire.RSN, error) {
	if c.dead {
		return 0, ErrDead
	}
	if length < 0 || length > c.cfg.MTU || len(hdr) > c.cfg.MTU {
		return 0, ErrTooLong
	}
	res := c.ep.res
	rx := res.Cells(length)
	if c.ini.Full() || !res.Admit(c.txHeld, c.alpha.Float()) || !res.TxReq.Take(1, false) {
		return 0, c.refuse()
	}
	if !res.RxReq.Take(rx, false) {
		res.TxReq.Give(1)
		return 0, c.refuse()
	}
	rsn, t := c.ini.Add(tl.Pull, cookie)
	t.Cells, t.RxCells, t.Length = 1, rx, uint32(length)
	t.Payload = append(t.Payload[:0], hdr...)
	c.txHeld++
	now, outer := c.ep.enter()
	defer c.ep.leave(outer)
	c.count(hotTxnSubmitted)
	c.flush(now)
	return rsn, nil
}

func (c *Conn) refuse() error {
	c.count(hotXoff)
	if !c.xoff {
		c.xoff = true
		c.ep.nXoff++
	}
	return ErrXoff
}

// xonScan tells flow-controlled connections that they may submit again.
// The scan starts after the connection served last and goes round the
// list (RM-9's round robin between connections): the ULP refills what it
// is told about at once, so a fixed order would hand every freed slot to
// the same first connections and starve the rest.
func (e *Endpoint) xonScan() {
	if e.nXoff == 0 {
		return
	}
	n := len(e.list)
	for k := 0; k < n && e.nXoff > 0; k++ {
		i := (e.xonNext + k) % n
		if i >= len(e.list) { // a callback closed connections
			break
		}
		c := e.list[i]
		if c.xoff && !c.ini.Full() && e.res.Admit(c.txHeld, c.alpha.Float()) && e.res.TxReq.Pkt.Free() > 0 && e.res.TxReq.Buf.Free() > 0 &&
			e.res.TxData.Pkt.Free() > 0 && e.res.TxData.Buf.Free() > 0 {
			c.xoff = false
			e.nXoff--
			e.xonNext = (i + 1) % n
			c.count(hotXon)
			if u := e.cfg.ULP; u != nil {
				u.OnXon(c)
			}
		}
	}
}

// targetTxn returns the delivered request rsn of kind k.
func (c *Conn) targetTxn(rsn wire.RSN, k tl.Kind) (*tl.TTxn, error) {
	if c.dead {
		return nil, ErrDead
	}
	if fits, _ := c.tgt.Fits(rsn); !fits {
		return nil, ErrNoSuchTxn
	}
	s := c.tgt.Slot(rsn)
	if s.Kind != k || s.State != tl.TDelivered {
		return nil, ErrNoSuchTxn
	}
	return s, nil
}

// AckPush is the target ULP's acknowledgement of a delivered push: only now
// is the Push Data acknowledged at the PDL [S §9.2.2.4].
func (c *Conn) AckPush(rsn wire.RSN) error {
	s, err := c.targetTxn(rsn, tl.Push)
	if err != nil {
		return err
	}
	now, outer := c.ep.enter()
	defer c.ep.leave(outer)
	c.rx[dataW].Ack(s.PSN)
	c.releaseTarget(s)
	s.State = tl.TFinished
	c.tgt.Advance()
	c.co.Note(now, 2)
	if s.AR {
		c.wantAck(now)
	}
	c.flush(now)
	return nil
}

// NackPush refuses a delivered push: code RNR (retry after the RNR timeout
// encoded by rnrCode) or CIE, NRE, invalid CID (the initiator resyncs and
// completes in error with ulpCode) [S §9.2.2.4, §11].
func (c *Conn) NackPush(rsn wire.RSN, code wire.NackCode, ulpCode, rnrCode uint8) error {
	switch code {
	case wire.NackRNR, wire.NackCIE, wire.NackNRE, wire.NackInvalidCID:
	default:
		return ErrBadVerdict
	}
	s, err := c.targetTxn(rsn, tl.Push)
	if err != nil {
		return err
	}
	now, outer := c.ep.enter()
	defer c.ep.leave(outer)
	psn := s.PSN
	c.releaseTarget(s)
	if v := c.rx[dataW].Classify(psn); v == pdl.VerdictOld || v == pdl.VerdictDupAcked {
		// A Resync already filled this PSN (the initiator gave up): the
		// transaction is over whatever the ULP says now.
		s.State = tl.TFinished
		c.tgt.Advance()
		return nil
	}
	if code == wire.NackRNR {
		c.Stats.RNRWaits.Inc()
		c.rx[dataW].Unreceive(psn)
		s.State = tl.TFree
		if c.cfg.Ordered && rsn.Less(c.tgt.NextDeliver) {
			c.tgt.NextDeliver = rsn
		}
	} else {
		c.rx[dataW].Remember(psn, code, ulpCode, rnrCode)
		s.State = tl.TFinished
		c.tgt.Advance()
	}
	c.sendNack(now, dataW, psn, code, ulpCode, rnrCode)
	c.flush(now)
	return nil
}

// PullData answers a delivered pull with its data (≤ MTU, copied). Short
// data is normal; an error is signalled in the ULP's own header [S §11].
func (c *Conn) PullData(rsn wire.RSN, data []byte) error {
	return c.PullDataGather(rsn, data, nil, 0, 0)
}

// PullDataGather is PullData of hdr followed by n bytes of the scatter
// list segs from byte offset off, copied once (as PushGather).
func (c *Conn) PullDataGather(rsn wire.RSN, hdr []byte, segs [][]byte, off, n int) error {
	return c.pullData(rsn, hdr, n, segs, off, nil)
}

// PullDataFill is PullData of hdr followed by n bytes that fill writes
// into the packet itself (as PushFill); its error comes back as it is,
// and the pull is then still waiting for its data.
func (c *Conn) PullDataFill(rsn wire.RSN, hdr []byte, n int, fill func(payload []byte) error) error {
	return c.pullData(rsn, hdr, n, nil, 0, fill)
}

// pullData is PullDataGather (fill nil) and PullDataFill; over a RefLink
// the data goes in a shared frame buffer, as a push's.
func (c *Conn) pullData(rsn wire.RSN, hdr []byte, n int, segs [][]byte, off int, fill func([]byte) error) error {
	s, err := c.targetTxn(rsn, tl.Pull)
	if err != nil {
		return err
	}
	if n < 0 || len(hdr)+n > c.cfg.MTU {
		return ErrTooLong
	}
	res := c.ep.res
	cells := res.Cells(len(hdr) + n)
	if !res.TxData.Take(cells, false) {
		return c.refuse()
	}
	frame, m, err := c.build(s.Frame, wire.PullDataHeaderLen, hdr, n, segs, off, fill)
	if err != nil {
		res.TxData.Give(cells)
		s.Frame = frame
		return err
	}
	if m != nil {
		s.Mem, s.Shared = m, frame
	} else {
		s.Frame = frame
	}
	s.TxCells = cells
	s.State = tl.TResponding
	c.pullQ.push(rsn)
	now, outer := c.ep.enter()
	defer c.ep.leave(outer)
	c.flush(now)
	return nil
}

// NackPull defers a delivered pull (the ULP was not ready): it is delivered
// again after the RNR timeout of rnrCode. The pull was already acknowledged
// at the PDL, so this is the target's own retry [S §11].
func (c *Conn) NackPull(rsn wire.RSN, rnrCode uint8) error {
	s, err := c.targetTxn(rsn, tl.Pull)
	if err != nil {
		return err
	}
	c.Stats.RNRWaits.Inc()
	s.State = tl.TRNRWait
	s.Deadline = c.ep.now() + wire.RNRTimeout(rnrCode)
	c.armRNR(s.Deadline)
	c.touch()
	return nil
}
