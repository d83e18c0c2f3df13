package nvme

import (
	"unsafe"

	"falconnic/falcon"
	"falconnic/falcon/framebuf"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// Target nCMD states.
const (
	tFree    uint8 = iota
	tPulling       // write waiting for its pull to be sent or answered
	tRespond       // response ready (queued if Falcon said Xoff)
	tIOWait        // backend IO waiting for room in an AsyncBackend (ioWait)
	tIO            // backend IO submitted to an AsyncBackend
)

// tslot is the target's state for one nCMD (its Target Tag).
type tslot struct {
	state  uint8
	gen    uint16
	path   *Path
	nbth   [wire.NBTHLen]byte
	op     Opcode
	rtype  wire.NVMePacketType // response type
	ns     *Namespace
	lba    uint64 // first block of this nCMD (data) or of the command
	blocks uint64
	bytes  int
	flags  uint8
	fua    bool // write: force unit access
	loaded bool // read: buf holds the data (an AsyncBackend read it)
	status Status
	buf    []byte        // header room + aligned data (takeChunk); taken on first use, kept until lent to Falcon
	chunk  int32         // buf's index in Engine.chunks
	frame  *framebuf.Buf // a kept Write Data Response frame holding io.Buf (Config.Frames)
	io     IO
	fence  [6]byte // orphaned IO (path nil): the initiator MAC its writes fence
}

func (s *tslot) tag(i int32) uint32 { return uint32(i) | uint32(s.gen&0x7ff)<<13 }

// decoded is a Read/Write Request as the target understands it.
type decoded struct {
	op     Opcode
	ns     *Namespace
	lba    uint64
	blocks uint64
	bytes  int
	flags  uint8
	fua    bool
	status Status
}

// decodeCommand validates a Read or Write Request against the exported
// namespaces [NVMe Base 2.0 §4.6.1.2 order: opcode, namespace, fields,
// range, protection]. The request bytes are hostile.
func (e *Engine) decodeCommand(p *Path, n *wire.NVMe) decoded {
	var d decoded
	x := cmdExt(n.Cmd)
	op, ok := x.Opcode(n.Type)
	info, known := op.Info()
	d.op, d.flags = op, x.Flags()
	d.fua = op == OpWrite && n.Cmd.FUA()
	if !ok || !known {
		e.Stats.BadOpcode.Inc()
		d.status = StatusInvalidOpcode
		return d
	}
	if info.Read != (n.Type == wire.NVMeReadRequest) {
		e.Stats.BadField.Inc()
		d.status = StatusInvalidField
		return d
	}
	ns := e.namespace(n.Cmd.TargetNSID())
	if ns == nil {
		e.Stats.BadNamespace.Inc()
		d.status = StatusInvalidNamespace
		return d
	}
	if !ns.allowed(p) {
		ns.Stats.AccessDenied.Inc()
		d.status = StatusAccessDenied
		return d
	}
	d.ns = ns
	h := n.NBTH
	total, off := int(h.NCNTTotal())+1, int(h.NCNTOffset())
	if off >= total {
		e.Stats.BadField.Inc()
		d.status = StatusInvalidField
		return d
	}
	bs := uint64(ns.cfg.BlockSize)
	switch {
	case op == OpIdentify:
		if total != 1 || d.flags != 0 {
			e.Stats.BadField.Inc()
			d.status = StatusInvalidField
		}
		return d
	case op == OpFlush:
		if total != 1 {
			e.Stats.BadField.Inc()
			d.status = StatusInvalidField
		}
		return d
	}
	nlb := uint64(n.Cmd.NLB()) + 1
	slba := n.Cmd.SLBA()
	if info.Data {
		per := ChunkSize / bs
		if nlb*bs > MaxTransfer || (nlb*bs+ChunkSize-1)/ChunkSize != uint64(total) {
			e.Stats.BadField.Inc()
			d.status = StatusInvalidField
			return d
		}
		d.lba = slba + uint64(off)*per
		d.blocks = min(per, nlb-uint64(off)*per)
		d.bytes = int(d.blocks * bs)
	} else {
		if total != 1 {
			e.Stats.BadField.Inc()
			d.status = StatusInvalidField
			return d
		}
		d.lba, d.blocks = slba, nlb
	}
	if slba >= ns.cfg.Blocks || nlb > ns.cfg.Blocks-slba {
		ns.Stats.OutOfRange.Inc()
		d.status = StatusLBAOutOfRange
		return d
	}
	if info.Writes && ns.cfg.ReadOnly {
		ns.Stats.WriteProtected.Inc()
		d.status = StatusWriteProtected
	}
	return d
}

// onCommand takes a Read or Write Request from path p.
func (e *Engine) onCommand(p *Path, rsn wire.RSN, n *wire.NVMe) {
	if len(e.tfree) == 0 {
		e.Stats.TargetBusy.Inc()
		_ = p.conn.NackPush(rsn, wire.NackRNR, 0, rnrRetry)
		return
	}
	if p.held >= e.pathShare() {
		e.Stats.PathShareFull.Inc()
		_ = p.conn.NackPush(rsn, wire.NackRNR, 0, rnrRetry)
		return
	}
	if n.Type == wire.NVMeWriteRequest && e.orphans[p.ini.MAC] > 0 {
		// A write of this initiator from a failed path is still in the
		// backend: a retried copy must not land before it (nor a newer
		// write be overwritten by it) [issue 18, finding 6].
		e.Stats.WriteFenced.Inc()
		_ = p.conn.NackPush(rsn, wire.NackRNR, 0, rnrRetry)
		return
	}
	e.Stats.Commands.Inc()
	d := e.decodeCommand(p, n)
	si := e.tfree[len(e.tfree)-1]
	e.tfree = e.tfree[:len(e.tfree)-1]
	s := &e.tslots[si]
	rt := wire.NVMeWriteCompletion
	if n.Type == wire.NVMeReadRequest {
		rt = wire.NVMeReadResponse
	}
	s.fill(p, n, &d, rt)
	p.held++
	_ = p.conn.AckPush(rsn)
	if d.op == OpWrite && n.Type == wire.NVMeWriteRequest && s.status.OK() {
		s.state = tPulling
		if len(p.pullWait) > 0 || !e.pull(si) {
			p.pullWait = append(p.pullWait, si)
		}
		return
	}
	// Reads from a plain backend are done while the response is built.
	if s.status.OK() && s.op != OpIdentify && (s.op != OpRead || e.isAsync(s.ns)) {
		e.prepareIO(s, si)
		e.startIO(si)
		return
	}
	s.state = tRespond
	e.respond(si)
}

// isAsync reports whether ns's backend runs IO off the engine's goroutine.
func (e *Engine) isAsync(ns *Namespace) bool {
	_, ok := ns.cfg.Backend.(AsyncBackend)
	return ok
}

func (s *tslot) fill(p *Path, n *wire.NVMe, d *decoded, rt wire.NVMePacketType) {
	s.gen++
	s.path, s.op, s.rtype, s.ns = p, d.op, rt, d.ns
	s.lba, s.blocks, s.bytes, s.flags, s.status = d.lba, d.blocks, d.bytes, d.flags, d.status
	s.fua, s.loaded = d.fua, false
	copy(s.nbth[:], n.NBTH)
}

// pull sends slot si's Write Data Request: a pull of the nCMD's data
// whose header is the NBTH naming it [N]. False means Xoff; on any other
// refusal the write completes with a data transfer error.
func (e *Engine) pull(si int32) bool {
	s := &e.tslots[si]
	p := s.path
	h := wire.NBTH(s.nbth[:])
	f := wire.NVMeFields{Type: wire.NVMeWriteDataRequest, InitiatorFunction: h.InitiatorFunction(), TargetTag: s.tag(si),
		NCNTTotal: h.NCNTTotal(), InitiatorTag: h.InitiatorTag(), NCNTOffset: h.NCNTOffset(), ICMD: h.ICMD()}
	b, _ := wire.AppendNVMe(e.scratch[:0], &f)
	_, err := p.conn.PullHeader(ckTgtPull|uint64(si), wire.NBTHLen+s.bytes, b)
	switch err {
	case nil:
		e.Stats.PullsSent.Inc()
	case falcon.ErrXoff:
		e.Stats.TxXoff.Inc()
		return false
	default:
		s.status = StatusDataTransferError
		s.state = tRespond
		e.respond(si)
	}
	return true
}

// drainPulls sends the Write Data Requests Falcon refused, in order.
func (e *Engine) drainPulls(p *Path) {
	for len(p.pullWait) > 0 && !p.down {
		if !e.pull(p.pullWait[0]) {
			return
		}
		p.pullWait = p.pullWait[1:]
	}
}

// onWriteData receives a Write Data Response (the pull's data) and writes it.
func (e *Engine) onWriteData(p *Path, si int32, cpl *falcon.Completion) {
	if si < 0 || int(si) >= len(e.tslots) {
		return
	}
	s := &e.tslots[si]
	if s.state != tPulling || s.path != p {
		e.Stats.RxStaleTag.Inc()
		return
	}
	s.state = tRespond
	var data []byte
	if s.status.OK() {
		data, s.status = e.writeData(s, cpl)
	}
	if !s.status.OK() {
		e.respond(si)
		return
	}
	e.prepareIO(s, si)
	switch {
	case !e.isAsync(s.ns):
		s.io.Buf = data
	case e.keepFrame(s, data):
		s.io.Buf = data
	default:
		copy(s.io.Buf, data) // cpl.Data is Falcon's until this returns
	}
	e.startIO(si)
}

// keepFrame keeps the frame data lies in for slot s's IO, if data lies in
// it as aligned as a slot buffer (ChunkSize) and the link lets it go.
func (e *Engine) keepFrame(s *tslot, data []byte) bool {
	if e.cfg.Frames == nil || len(data) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(data)))%ChunkSize != 0 {
		return false
	}
	s.frame = e.cfg.Frames.KeepFrame(data)
	if s.frame == nil {
		return false
	}
	e.Stats.KeptFrames.Inc()
	return true
}

// writeData checks a Write Data Response against the slot's write and
// returns its data.
func (e *Engine) writeData(s *tslot, cpl *falcon.Completion) ([]byte, Status) {
	if cpl.Status != tl.CmplAck {
		return nil, StatusDataTransferError
	}
	n, err := wire.ParseNVMe(cpl.Data, wire.TypePullData)
	want := wire.NBTH(s.nbth[:])
	switch {
	case err != nil || n.Type != wire.NVMeWriteDataResponse:
		e.Stats.RxBadHeader.Inc()
		return nil, StatusDataTransferError
	case n.NBTH.INV():
		e.Stats.RxWriteDataInvalid.Inc()
		return nil, StatusDataTransferError
	case n.NBTH.InitiatorTag() != want.InitiatorTag() || n.NBTH.ICMD() != want.ICMD() ||
		n.NBTH.NCNTOffset() != want.NCNTOffset():
		e.Stats.RxWriteDataMismatch.Inc()
		return nil, StatusDataTransferError
	case len(n.Data) != s.bytes:
		e.Stats.RxBadLength.Inc()
		return nil, StatusDataTransferError
	}
	return n.Data, StatusSuccess
}

// respond pushes slot si's Read Response or Write Completion; on Xoff it
// waits in the path's response queue. The slot is freed once Falcon has
// the packet.
func (e *Engine) respond(si int32) {
	s := &e.tslots[si]
	p := s.path
	if len(p.respQ) > 0 {
		p.respQ = append(p.respQ, si)
		return
	}
	if !e.sendResponse(si) {
		p.respQ = append(p.respQ, si)
	}
}

func (e *Engine) flushResponses(p *Path) {
	for len(p.respQ) > 0 {
		if !e.sendResponse(p.respQ[0]) {
			return
		}
		p.respQ = p.respQ[1:]
	}
	p.respQ = p.respQ[:0]
}

// sendResponse builds and pushes one response; false means Xoff.
func (e *Engine) sendResponse(si int32) bool {
	s := &e.tslots[si]
	p := s.path
	h := wire.NBTH(s.nbth[:])
	st := s.status
	f := wire.NVMeFields{Type: s.rtype, InitiatorFunction: h.InitiatorFunction(), TargetTag: s.tag(si),
		NCNTTotal: h.NCNTTotal(), InitiatorTag: h.InitiatorTag(), NCNTOffset: h.NCNTOffset(), ICMD: h.ICMD()}
	b := e.scratch[:0]
	if s.rtype == wire.NVMeReadResponse && st.OK() {
		f.Status = uint16(st)
		b, _ = wire.AppendNVMe(b, &f)
		if s.op == OpIdentify {
			s.ns.Stats.Identifies.Inc()
			b = s.ns.Info().AppendIdentify(b)
		} else if s.loaded {
			return e.pushChunk(si, b)
		} else { // a plain backend reads into the chunk here
			ns := s.ns
			if s.buf == nil {
				s.buf, s.chunk = e.takeChunk()
			}
			ns.Stats.Reads.Inc()
			if _, err := ns.cfg.Backend.ReadAt(s.data(), int64(s.lba)*int64(ns.cfg.BlockSize)); err != nil {
				ns.Stats.BackendErrors.Inc()
				st = StatusUnrecoveredRead
			} else {
				ns.Stats.ReadBytes.Add(uint64(s.bytes))
				return e.pushChunk(si, b)
			}
		}
	}
	if !st.OK() || s.rtype == wire.NVMeWriteCompletion {
		f.Status = uint16(st)
		b, _ = wire.AppendNVMe(b[:0], &f)
	}
	if !st.OK() {
		e.Stats.ErrorResponses.Inc()
	}
	_, err := p.conn.Push(ckTgtPush|uint64(si), b)
	if err == falcon.ErrXoff {
		e.Stats.TxXoff.Inc()
		return false
	}
	if err == nil {
		e.Stats.Responses.Inc()
	}
	e.freeTarget(si)
	return true
}

// pushChunk pushes slot si's Read Response, its data in the chunk: hdr
// goes just before the data, the packet is the chunk itself (PushFrame),
// and Falcon gives it back with the push's completion (chunkBack). False
// means Xoff, the chunk still the slot's.
func (e *Engine) pushChunk(si int32, hdr []byte) bool {
	s := &e.tslots[si]
	copy(s.buf[ChunkSize-len(hdr):], hdr)
	frame := s.buf[ChunkSize-len(hdr)-wire.PushDataHeaderLen : ChunkSize+s.bytes]
	_, err := s.path.conn.PushFrame(ckTgtLent|uint64(s.chunk), frame)
	switch err {
	case falcon.ErrXoff:
		e.Stats.TxXoff.Inc()
		return false
	case nil:
		e.Stats.Responses.Inc()
		e.Stats.LentChunks.Inc()
		s.buf, s.chunk = nil, -1
	}
	e.freeTarget(si)
	return true
}

// pathShare is how many target slots one path may hold: the table split
// evenly between the live paths [issue 18, build item 4], so one path
// (a forged one, or one initiator's burst) cannot starve the others.
func (e *Engine) pathShare() int { return max(maxTargets/max(len(e.list), 1), minPathShare) }

// minPathShare is the share of a path however many there are.
const minPathShare = 64

func (e *Engine) freeTarget(si int32) {
	s := &e.tslots[si]
	if s.path != nil {
		s.path.held--
	}
	if s.frame != nil {
		e.cfg.Frames.ReleaseFrame(s.frame)
		s.frame = nil
	}
	s.state, s.path, s.ns = tFree, nil, nil
	e.tfree = append(e.tfree, si)
}

// dropTargets frees every target slot of a failed path. A slot whose IO
// an AsyncBackend still holds (its buffer with it) loses its path and is
// freed when the IO comes back (IODone).
func (e *Engine) dropTargets(p *Path) {
	for i := range e.tslots {
		s := &e.tslots[i]
		switch {
		case s.state == tFree || s.path != p:
		case s.state == tIO:
			p.held--
			s.path, s.fence = nil, p.ini.MAC
			e.orphans[p.ini.MAC]++
		default:
			e.freeTarget(int32(i))
		}
	}
	keep := e.ioWait[:0]
	for _, si := range e.ioWait {
		if e.tslots[si].state == tIOWait {
			keep = append(keep, si)
		}
	}
	e.ioWait = keep
	p.respQ, p.pullWait = nil, nil
}
