package nvme

import (
	"time"

	"falconnic/falcon"
	"falconnic/falcon/wire"
)

// nCMD states at the initiator.
const (
	nFree   uint8 = iota
	nQueued       // waiting for Falcon room (Xoff)
	nSent         // request pushed; waiting for the response/completion
)

type ncmd struct {
	gen    uint16
	state  uint8
	pulled bool
	off    uint8 // index in the iCMD
	icmd   int32
}

type icmd struct {
	cmd      *Command
	gen      uint16
	info     OpInfo
	n        int // nCMDs
	done     int
	status   Status
	bytes    int
	deadline time.Duration
}

// Path is the NVMe state towards one peer NIC over one unordered Falcon
// connection: the initiator's command tables and the target's queues for
// that peer.
type Path struct {
	e        *Engine
	conn     *falcon.Conn
	down     bool
	flushing bool // flushTx is running (completions may Submit again)

	// initiator
	icmds    []icmd
	icmdFree []int32
	ncmds    []ncmd
	ncmdFree []int32
	backlog  []*Command    // waiting for table room
	txQ      []int32       // nCMDs refused by Falcon (Xoff), in order
	pullQ    []pendingPull // Write Data Responses refused (Xoff)

	// target
	pullWait []int32 // target slots whose Write Data Request Falcon refused (Xoff)
	respQ    []int32 // target responses refused (Xoff)
	held     int     // target slots this path's commands hold (fair share)

	ini        Initiator // who is on the far end (AddPathFrom)
	identified bool
}

// pendingPull is a Write Data Request waiting for room to answer.
type pendingPull struct {
	rsn    wire.RSN
	length int
	ni     int32  // the nCMD it named when it came, or -1
	tag    uint32 // that nCMD's tag
}

// newPath returns a path whose initiator tables come with its first
// command (tables): a path that only serves a remote initiator, or that
// a peer opened and never used, costs little.
func newPath(e *Engine, c *falcon.Conn) *Path {
	return &Path{e: e, conn: c}
}

// tables allocates the initiator tables.
func (p *Path) tables() {
	if p.icmds != nil {
		return
	}
	p.icmds, p.ncmds = make([]icmd, maxICMDs), make([]ncmd, maxNCMDs)
	p.icmdFree = make([]int32, maxICMDs)
	for i := range p.icmdFree {
		p.icmdFree[i] = int32(maxICMDs - 1 - i)
	}
	p.ncmdFree = make([]int32, maxNCMDs)
	for i := range p.ncmdFree {
		p.ncmdFree[i] = int32(maxNCMDs - 1 - i)
	}
}

// Conn returns the path's connection.
func (p *Path) Conn() *falcon.Conn { return p.conn }

// Down reports whether the path failed (its connection died or it was
// removed); Submit refuses with ErrPathDown from then on.
func (p *Path) Down() bool { return p.down || p.conn.Dead() }

// Outstanding returns the commands submitted and not yet completed.
func (p *Path) Outstanding() int { return len(p.icmds) - len(p.icmdFree) + len(p.backlog) }

func nTag(i int32, gen uint16) uint32 { return uint32(i) | uint32(gen&0xfff)<<12 }
func iTag(i int32, gen uint16) uint32 { return uint32(i) | uint32(gen&0x3fff)<<10 }

// chunks returns the number of nCMDs of cmd (its data in 4 KiB pieces).
func chunks(info OpInfo, bytes int) int {
	if !info.Data {
		return 1
	}
	return (bytes + ChunkSize - 1) / ChunkSize
}

// validate checks a host command before it takes any state.
func validate(c *Command) (OpInfo, int, bool) {
	info, ok := c.Op.Info()
	if !ok {
		return info, 0, false
	}
	bytes := dataLen(c.Data)
	switch {
	case info.Data:
		if c.Blocks == 0 || c.Blocks > MaxBlocks || bytes == 0 || bytes > MaxTransfer || bytes%512 != 0 {
			return info, 0, false
		}
	case c.Op == OpIdentify:
		if bytes != IdentifyLen {
			return info, 0, false
		}
	case c.Op == OpFlush:
		if c.Blocks != 0 || bytes != 0 {
			return info, 0, false
		}
	default: // Write Zeroes, DSM
		if c.Blocks == 0 || c.Blocks > MaxBlocks || bytes != 0 {
			return info, 0, false
		}
	}
	return info, bytes, true
}

// Submit starts a host command towards the peer. It returns ErrInvalid for
// a malformed command (nothing is sent) and ErrPathDown once the path
// failed; otherwise cmd completes through Config.OnComplete. Commands
// beyond the tables' room wait in order.
func (p *Path) Submit(c *Command) error {
	if _, _, ok := validate(c); !ok {
		p.e.Stats.SubmitInvalid.Inc()
		return ErrInvalid
	}
	if p.conn.Dead() {
		p.fail() // its completions may come back here: down is set first
	}
	if p.down {
		return ErrPathDown
	}
	p.e.Stats.Submitted.Inc()
	p.backlog = append(p.backlog, c)
	p.start()
	return nil
}

// start moves backlog commands into the tables while there is room.
func (p *Path) start() {
	if len(p.backlog) > 0 {
		p.tables()
	}
	for len(p.backlog) > 0 && !p.down {
		c := p.backlog[0]
		info, bytes, _ := validate(c)
		n := chunks(info, bytes)
		if len(p.icmdFree) == 0 || len(p.ncmdFree) < n {
			p.e.Stats.TableFull.Inc()
			return
		}
		// Pop by moving the rest down: the queue keeps its array (a
		// reslice would shed capacity and reallocate on every refill).
		rest := copy(p.backlog, p.backlog[1:])
		p.backlog[rest] = nil
		p.backlog = p.backlog[:rest]
		ii := p.icmdFree[len(p.icmdFree)-1]
		p.icmdFree = p.icmdFree[:len(p.icmdFree)-1]
		ic := &p.icmds[ii]
		ic.gen++
		ic.cmd, ic.info, ic.n, ic.done, ic.status, ic.bytes = c, info, n, 0, StatusSuccess, bytes
		ic.deadline = p.e.now() + p.e.cfg.CommandTimeout
		c.slot = ii
		for k := 0; k < n; k++ {
			ni := p.ncmdFree[len(p.ncmdFree)-1]
			p.ncmdFree = p.ncmdFree[:len(p.ncmdFree)-1]
			nc := &p.ncmds[ni]
			nc.gen++
			nc.state, nc.pulled, nc.off, nc.icmd = nQueued, false, uint8(k), ii
			p.txQ = append(p.txQ, ni)
		}
		p.flushTx()
	}
}

// flushTx pushes queued nCMDs until Falcon says Xoff. A command failed
// on the way completes at once, and its submitter may Submit again: that
// only queues, and this loop sends it.
func (p *Path) flushTx() {
	if p.flushing {
		return
	}
	p.flushing = true
	defer func() { p.flushing = false }()
	i := 0
	for i < len(p.txQ) {
		ni := p.txQ[i]
		nc := &p.ncmds[ni]
		if nc.state == nQueued && !p.sendNCMD(ni, nc) {
			break
		}
		if len(p.txQ) == 0 { // the path failed meanwhile
			return
		}
		i++
	}
	// Keep the unsent rest (and what completions queued meanwhile) at the
	// front of the same array.
	n := copy(p.txQ, p.txQ[i:])
	p.txQ = p.txQ[:n]
}

// sendNCMD builds and pushes one Read/Write Request; false means Xoff.
func (p *Path) sendNCMD(ni int32, nc *ncmd) bool {
	ic := &p.icmds[nc.icmd]
	c := ic.cmd
	t := wire.NVMeWriteRequest
	if ic.info.Read {
		t = wire.NVMeReadRequest
	}
	f := wire.NVMeFields{Type: t, InitiatorFunction: p.e.cfg.Function, NCNTTotal: uint8(ic.n - 1),
		InitiatorTag: nTag(ni, nc.gen), NCNTOffset: nc.off, ICMD: iTag(nc.icmd, ic.gen)}
	b, n := wire.AppendNVMe(p.e.scratch[:0], &f)
	cmd := n.Cmd
	cmd.SetInitiatorNSID(c.NSID)
	cmd.SetTargetNSID(c.NSID)
	cmd.SetSLBA(c.SLBA)
	if c.Blocks > 0 {
		cmd.SetNLB(uint16(c.Blocks - 1))
	}
	x := cmdExt(cmd)
	x.SetOpcode(c.Op)
	if c.Op == OpWriteZeroes && c.Deallocate {
		x.SetFlags(flagDeallocate)
	}
	cmd.SetFUA(c.Op == OpWrite && c.FUA)
	_, err := p.conn.Push(ckIniPush|uint64(nTag(ni, nc.gen)), b)
	switch err {
	case nil:
		nc.state = nSent
		p.e.Stats.NCMDsSent.Inc()
		return true
	case falcon.ErrXoff:
		p.e.Stats.TxXoff.Inc()
		return false
	default:
		nc.state = nSent
		p.finishNCMD(ni, StatusInternalPathError)
		return true
	}
}

// lookup returns the live nCMD a response names, or -1.
func (p *Path) lookup(tag, icmdTag uint32, off uint8) int32 {
	ni := int32(tag & 0xfff)
	if int(ni) >= len(p.ncmds) {
		return -1 // no command was ever sent on this path
	}
	nc := &p.ncmds[ni]
	if nc.state != nSent || nTag(ni, nc.gen) != tag || iTag(nc.icmd, p.icmds[nc.icmd].gen) != icmdTag || nc.off != off {
		return -1
	}
	return ni
}

// chunkLen returns the bytes of nCMD off of an iCMD.
func (ic *icmd) chunkLen(off uint8) int {
	if !ic.info.Data {
		if ic.cmd.Op == OpIdentify {
			return IdentifyLen
		}
		return 0
	}
	return min(ChunkSize, ic.bytes-int(off)*ChunkSize)
}

// onResponse handles a Read Response or Write Completion.
func (p *Path) onResponse(n *wire.NVMe) {
	h := n.NBTH
	ni := p.lookup(h.InitiatorTag(), h.ICMD(), h.NCNTOffset())
	if ni < 0 {
		p.e.Stats.RxStaleTag.Inc()
		return
	}
	nc := &p.ncmds[ni]
	ic := &p.icmds[nc.icmd]
	if ic.info.Read != (n.Type == wire.NVMeReadResponse) {
		p.e.Stats.RxWrongResponse.Inc()
		return
	}
	st := Status(n.Status)
	if n.Type == wire.NVMeReadResponse {
		p.e.Stats.ReadResponses.Inc()
		want := ic.chunkLen(nc.off)
		switch {
		case st.OK() && len(n.Data) != want:
			p.e.Stats.RxBadLength.Inc()
			st = StatusDataTransferError
		case st.OK():
			copyTo(ic.cmd.Data, int(nc.off)*ChunkSize, n.Data)
		}
	} else {
		p.e.Stats.WriteCompletions.Inc()
	}
	p.finishNCMD(ni, st)
}

// onPushFailed fails the nCMD whose request Falcon could not deliver.
func (p *Path) onPushFailed(tag uint32) {
	ni := int32(tag & 0xfff)
	if int(ni) >= len(p.ncmds) {
		return
	}
	if nc := &p.ncmds[ni]; nc.state == nSent && nTag(ni, nc.gen) == tag {
		p.finishNCMD(ni, StatusInternalPathError)
	}
}

// finishNCMD ends one nCMD and, with its last, the iCMD.
func (p *Path) finishNCMD(ni int32, st Status) {
	nc := &p.ncmds[ni]
	ic := &p.icmds[nc.icmd]
	nc.state = nFree
	p.ncmdFree = append(p.ncmdFree, ni)
	ic.done++
	if !st.OK() && ic.status.OK() {
		ic.status = st
	}
	if ic.done < ic.n {
		return
	}
	c := ic.cmd
	ic.cmd = nil
	p.icmdFree = append(p.icmdFree, nc.icmd)
	c.Status = ic.status
	c.slot = -1
	p.e.Stats.Completed.Inc()
	if !c.Status.OK() {
		p.e.Stats.CompletedInError.Inc()
	}
	p.e.complete(c)
	p.start()
}

// onWriteDataRequest answers the target's pull for a write nCMD's data.
// The Pull Request carries the Write Data Request's NBTH (hdr, hostile),
// which names the nCMD as its Write Request did.
func (p *Path) onWriteDataRequest(rsn wire.RSN, length int, hdr []byte) {
	pp := pendingPull{rsn: rsn, length: length, ni: -1}
	n, err := wire.ParseNVMe(hdr, wire.TypePullRequest)
	switch {
	case err != nil || n.Type != wire.NVMeWriteDataRequest:
		p.e.Stats.RxBadHeader.Inc()
	default:
		h := n.NBTH
		if ni := p.lookup(h.InitiatorTag(), h.ICMD(), h.NCNTOffset()); ni >= 0 && p.icmds[p.ncmds[ni].icmd].cmd.Op == OpWrite {
			pp.ni, pp.tag = ni, h.InitiatorTag()
		} else {
			p.e.Stats.RxPullUnknown.Inc()
		}
	}
	if len(p.pullQ) > 0 || !p.answerPull(pp) {
		p.e.Stats.TxXoff.Inc()
		p.pullQ = append(p.pullQ, pp)
	}
}

// answerPull sends the Write Data Response; false means Xoff. A pull that
// names no live write (or one that finished while the answer waited) is
// answered with an NBTH marked INV, or nothing if it has no room for one.
func (p *Path) answerPull(pp pendingPull) bool {
	b := p.e.scratch[:0]
	ni := pp.ni
	if ni >= 0 && (p.ncmds[ni].state != nSent || nTag(ni, p.ncmds[ni].gen) != pp.tag) {
		ni = -1
	}
	if ni < 0 || pp.length < wire.NBTHLen {
		if pp.length >= wire.NBTHLen {
			f := wire.NVMeFields{Type: wire.NVMeWriteDataResponse, InitiatorFunction: p.e.cfg.Function, INV: true}
			b, _ = wire.AppendNVMe(b, &f)
		}
	} else {
		nc := &p.ncmds[ni]
		ic := &p.icmds[nc.icmd]
		f := wire.NVMeFields{Type: wire.NVMeWriteDataResponse, InitiatorFunction: p.e.cfg.Function,
			NCNTTotal: uint8(ic.n - 1), InitiatorTag: nTag(ni, nc.gen), NCNTOffset: nc.off, ICMD: iTag(nc.icmd, ic.gen)}
		var n wire.NVMe
		b, n = wire.AppendNVMe(b, &f)
		want := ic.chunkLen(nc.off)
		if pp.length < wire.NBTHLen+want {
			p.e.Stats.RxPullShort.Inc()
			n.NBTH.SetINV(true)
		} else {
			// The NBTH and the chunk go into the packet with one copy.
			err := p.conn.PullDataGather(pp.rsn, b, ic.cmd.Data, int(nc.off)*ChunkSize, want)
			if err == falcon.ErrXoff {
				return false
			}
			nc.pulled = true
			p.e.Stats.WriteDataSent.Inc()
			return true
		}
	}
	err := p.conn.PullData(pp.rsn, b)
	return err != falcon.ErrXoff
}

// resume retries everything Falcon refused, then admits new commands.
func (p *Path) resume() {
	for len(p.pullQ) > 0 {
		if !p.answerPull(p.pullQ[0]) {
			return
		}
		p.pullQ = p.pullQ[1:]
	}
	p.e.flushResponses(p)
	p.e.drainPulls(p)
	p.flushTx()
	p.start()
}

// fail completes everything outstanding with an internal path error (the
// connection died or the path was removed).
func (p *Path) fail() {
	if p.down {
		return
	}
	p.down = true
	for i := range p.ncmds {
		if p.ncmds[i].state != nFree {
			p.ncmds[i].state = nSent
			p.finishNCMD(int32(i), StatusInternalPathError)
		}
	}
	for _, c := range p.backlog {
		c.Status = StatusInternalPathError
		p.e.Stats.Completed.Inc()
		p.e.Stats.CompletedInError.Inc()
		p.e.complete(c)
	}
	p.backlog, p.txQ, p.pullQ = nil, nil, nil
	p.e.dropTargets(p)
}

// complete hands a finished command to its submitter.
func (e *Engine) complete(c *Command) {
	if c.Done != nil {
		c.Done(c)
	} else if f := e.cfg.OnComplete; f != nil {
		f(c)
	}
}

// Cancel detaches c from its buffers and its submitter (a device whose
// guest memory goes away): a command waiting for room is dropped; one in
// flight runs on but never touches c.Data again (a write's remaining data
// goes out short and the target fails it) and its completion calls no
// one. It runs on the endpoint's goroutine.
func (p *Path) Cancel(c *Command) {
	for i, b := range p.backlog {
		if b == c {
			p.backlog = append(p.backlog[:i], p.backlog[i+1:]...)
			break
		}
	}
	c.Data = nil
	c.Done = func(*Command) {}
	p.e.Stats.Cancelled.Inc()
}

// timeout fails the rest of iCMD ii: its nCMDs are freed, so late
// responses and pulls find no live tag (counted, answered with INV).
func (p *Path) timeout(ii int32) {
	p.e.Stats.TimedOut.Inc()
	for ni := range p.ncmds {
		if nc := &p.ncmds[ni]; nc.state != nFree && nc.icmd == ii {
			p.finishNCMD(int32(ni), StatusTransportError)
			if p.icmds[ii].cmd == nil {
				return
			}
		}
	}
}
