package fabric

import (
	"net"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Outbox limits: the most datagrams one flush hands the kernel per path
// (one sendmmsg call when the socket has room), and the bytes of
// datagrams an outbox holds before it flushes.
const (
	outboxMax   = 64
	outboxArena = 256 << 10
	// outboxFlushBytes: an outbox holding this many bytes flushes at
	// once (one UDP GSO send's worth), so the first datagram of a burst
	// does not wait for a whole burst of sealing and transport work.
	outboxFlushBytes = 64 << 10
	// txStall bounds how long a flush waits for a full socket send
	// buffer to drain before it drops what is left (tx_stall_drop).
	txStall = 100 * time.Millisecond
	// A UDP GSO send carries at most gsoMaxSegs datagrams and
	// gsoMaxBytes of them: the kernel's UDP_MAX_SEGMENTS, and what one
	// IPv4 UDP datagram can hold.
	gsoMaxSegs  = 64
	gsoMaxBytes = 65507
)

// Outbox gathers the datagrams one goroutine sends (a port's: every
// Falcon connection it has to other daemons) and hands them to the
// kernel a burst at a time, one sendmmsg per path, each run of datagrams
// of one size to one peer as one UDP GSO send: at Flush (the fabric's
// side of a port's end of a burst of work, port.OnIdle), or once it holds
// outboxMax datagrams or outboxFlushBytes. Each datagram is copied,
// header first, to the outbox's arena when it is sent (or built there in
// place, Link.Reserve), so the caller may reuse its buffer at once, as
// with Link.Send. An Outbox is owned by one goroutine; Links from it must
// only be used there. The loss impairment drops datagrams as they are
// queued; with reordering on, datagrams bypass the outbox (the impairment
// sends them one at a time, holding some back).
type Outbox struct {
	f     *Fabric
	paths []outPath
	arena []byte
	n     int   // datagrams queued over all paths
	order []int // paths in flush order (Flush)

	// The flush in progress (write is the raw conn's callback, bound once
	// so a flush does not allocate).
	cur   *outPath
	off   int
	wait  bool // on EAGAIN, wait for room (after a stall deadline was set)
	stall bool // EAGAIN seen while not waiting
	write func(fd uintptr) bool
}

// outPath is one path's queued datagrams and their sendmmsg vectors:
// message k sends runs[k] datagrams (more than one: a UDP GSO send, its
// segment size in ctrl[k]).
type outPath struct {
	dgrams [][]byte
	peers  []*fabricPeer
	msgs   []unix.Mmsghdr
	iovs   []unix.Iovec
	ctrl   []gsoCtrl
	runs   []uint16
	nmsgs  int
	last   int // the outbox's count of datagrams when this path's last was queued
}

// gsoCtrl is a UDP_SEGMENT control message: the segment size of a GSO
// send (laid out as CMSG_SPACE(sizeof(uint16))).
type gsoCtrl struct {
	hdr  unix.Cmsghdr
	size uint16
	_    [6]byte
}

// NewOutbox returns an empty outbox for one sending goroutine.
func (f *Fabric) NewOutbox() *Outbox {
	o := &Outbox{f: f, paths: make([]outPath, len(f.conns)), arena: make([]byte, 0, outboxArena), order: make([]int, 0, len(f.conns))}
	for i := range o.paths {
		q := &o.paths[i]
		q.dgrams = make([][]byte, 0, outboxMax)
		q.peers = make([]*fabricPeer, 0, outboxMax)
		q.msgs = make([]unix.Mmsghdr, outboxMax)
		q.iovs = make([]unix.Iovec, outboxMax)
		q.ctrl = make([]gsoCtrl, outboxMax)
		q.runs = make([]uint16, outboxMax)
	}
	o.write = o.sendmmsg
	return o
}

// Link returns a link that sends payloads of kind k to the peer at peer
// through the outbox.
func (o *Outbox) Link(peer netip.AddrPort, k Kind) *Link {
	l := o.f.Link(peer, k)
	l.ob = o
	return l
}

// Queued reports how many datagrams wait for the next Flush.
func (o *Outbox) Queued() int { return o.n }

// send queues payload of kind k for the peer at l.peer (Link.Send).
func (o *Outbox) send(l *Link, flow uint32, payload []byte) {
	f := o.f
	if !l.kind.valid() {
		f.c.TxBadKind.Inc()
		return
	}
	p := l.p
	if p == nil {
		if p = f.peers.Load().byAddr[l.peer]; p == nil {
			f.c.TxNoPeer.Inc()
			return
		}
		l.p = p // peers are never removed
	}
	if len(payload) > MaxPayload {
		f.c.TxTooBig.Inc()
		return
	}
	im := f.imp.Load()
	if im != nil && im.cfg.ReorderPercent > 0 {
		_ = f.sendPeer(p, l.kind, flow, payload, l.origin)
		return
	}
	need := HeaderLen + len(payload)
	inPlace := len(payload) > 0 && o.reserved(len(payload)) == &payload[0]
	if !inPlace && len(o.arena)+need > cap(o.arena) {
		o.Flush()
	}
	start := len(o.arena)
	o.arena = o.arena[:start+need]
	b := o.arena[start : start+need : start+need]
	Encode(b, l.kind, flow, len(payload))
	if !inPlace {
		copy(b[HeaderLen:], payload)
	}
	path := flow % uint32(len(f.conns))
	if t := f.tap.Load(); t != nil {
		(*t)(true, l.origin, netip.AddrPortFrom(f.local.Addr(), f.local.Port()+uint16(path)), p.addr, b)
	}
	p.c.TxDatagrams.Inc()
	p.c.TxBytes.Add(uint64(len(b)))
	if im != nil && im.lose(f) {
		o.arena = o.arena[:start]
		return
	}
	q := &o.paths[path]
	q.dgrams = append(q.dgrams, b)
	q.peers = append(q.peers, p)
	q.last = o.n
	o.n++
	if len(q.dgrams) == outboxMax || len(o.arena) >= outboxFlushBytes {
		o.Flush()
	}
}

// reserve returns room for an n-byte payload after the queued datagrams,
// flushing first if the arena is too full; nil if n is too big.
func (o *Outbox) reserve(n int) []byte {
	if n <= 0 || n > MaxPayload {
		return nil
	}
	if len(o.arena)+HeaderLen+n > cap(o.arena) {
		o.Flush()
	}
	start := len(o.arena) + HeaderLen
	return o.arena[start : start+n : start+n]
}

// reserved is where a payload of n bytes reserve returned starts (nil if
// none fits).
func (o *Outbox) reserved(n int) *byte {
	if start := len(o.arena) + HeaderLen; start+n <= cap(o.arena) {
		return &o.arena[:start+1][start]
	}
	return nil
}

// Flush hands every queued datagram to the kernel: one sendmmsg per path
// when the sockets have room. Datagrams the kernel refuses are counted
// (tx_error, tx_short, tx_stall_drop), not retried: a lost packet is the
// transport's to recover.
func (o *Outbox) Flush() {
	if o.n == 0 {
		return
	}
	f := o.f
	for _, i := range o.pathOrder() {
		q := &o.paths[i]
		if f.closed.Load() {
			f.c.TxError.Add(uint64(len(q.dgrams)))
		} else {
			o.flushPath(i, q)
		}
		clear(q.dgrams)
		clear(q.peers)
		q.dgrams, q.peers = q.dgrams[:0], q.peers[:0]
	}
	o.arena = o.arena[:0]
	o.n = 0
}

// pathOrder lists the paths with queued datagrams in the order of their
// last datagram, the order Flush sends them in: the datagram queued last
// leaves last, so an endpoint's per-flow ACKs (one per path) arrive
// before the one on the latest packet's flow, as they would one by one,
// and each still acknowledges something and times its flow.
func (o *Outbox) pathOrder() []int {
	order := o.order[:0]
	for i := range o.paths {
		if len(o.paths[i].dgrams) > 0 {
			order = append(order, i)
		}
	}
	for j := 1; j < len(order); j++ {
		for k := j; k > 0 && o.paths[order[k]].last < o.paths[order[k-1]].last; k-- {
			order[k], order[k-1] = order[k-1], order[k]
		}
	}
	o.order = order
	return order
}

func (o *Outbox) flushPath(i int, q *outPath) {
	f := o.f
	gso := f.gso.Load()
	nm := 0
	for j := 0; j < len(q.dgrams); {
		run := 1
		if gso {
			run = gsoRun(q.dgrams[j:], q.peers[j:])
		}
		for k := j; k < j+run; k++ {
			d := q.dgrams[k]
			q.iovs[k].Base = &d[0]
			q.iovs[k].SetLen(len(d))
		}
		m := &q.msgs[nm]
		m.Len = 0
		m.Hdr.Name = &q.peers[j].sa[0]
		m.Hdr.Namelen = q.peers[j].saLen
		m.Hdr.Iov = &q.iovs[j]
		m.Hdr.SetIovlen(run)
		if run > 1 {
			c := &q.ctrl[nm]
			c.hdr.Level, c.hdr.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			c.hdr.SetLen(unix.CmsgLen(2))
			c.size = uint16(len(q.dgrams[j]))
			m.Hdr.Control = (*byte)(unsafe.Pointer(c))
			m.Hdr.SetControllen(unix.CmsgSpace(2))
		}
		q.runs[nm] = uint16(run)
		nm++
		j += run
	}
	q.nmsgs = nm
	o.cur, o.off, o.wait, o.stall = q, 0, false, false
	err := f.raw[i].Write(o.write)
	if err == nil && o.stall {
		// The socket's send buffer is full: wait for room, up to txStall.
		conn := f.conns[i]
		_ = conn.SetWriteDeadline(time.Now().Add(txStall))
		o.wait = true
		err = f.raw[i].Write(o.write)
		_ = conn.SetWriteDeadline(time.Time{})
	}
	rest := 0
	for _, r := range q.runs[o.off:nm] {
		rest += int(r)
	}
	if rest > 0 {
		if err != nil && !f.closed.Load() {
			f.c.TxStallDrop.Add(uint64(rest))
		} else {
			f.c.TxError.Add(uint64(rest))
		}
	}
	clear(q.msgs[:nm]) // no pointers into the arena or the peers stay behind
	clear(q.iovs[:len(q.dgrams)])
	o.cur = nil
}

// gsoRun is how many datagrams from the first can go as one UDP GSO send
// (UDP_SEGMENT): to one peer, all the size of the first but the last,
// which may be shorter, at most gsoMaxSegs of them and gsoMaxBytes in all.
func gsoRun(dgrams [][]byte, peers []*fabricPeer) int {
	size := len(dgrams[0])
	total := size
	n := 1
	for n < len(dgrams) && n < gsoMaxSegs && peers[n] == peers[0] {
		l := len(dgrams[n])
		if l > size || total+l > gsoMaxBytes {
			break
		}
		total += l
		n++
		if l < size {
			break
		}
	}
	return n
}

// sendmmsg is the raw conn's write callback: it sends o.cur's messages
// from o.off, and reports false (wait for room) only when o.wait.
func (o *Outbox) sendmmsg(fd uintptr) bool {
	f, q := o.f, o.cur
	msgs := q.msgs[:q.nmsgs]
	for o.off < len(msgs) {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&msgs[o.off])), uintptr(len(msgs)-o.off), 0, 0, 0)
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			f.c.TxAgain.Inc()
			if o.wait {
				return false
			}
			o.stall = true
			return true
		default:
			// The message at o.off was refused (nothing of it was sent):
			// count its datagrams and go on with the next. A GSO send the
			// kernel cannot do turns GSO off for the fabric.
			if q.runs[o.off] > 1 && f.gso.CompareAndSwap(true, false) {
				f.c.TxGSOOff.Inc()
				f.log.Warn("fabric: UDP GSO refused, sending datagrams one by one", "err", e)
			}
			f.txFailed(e, int(q.runs[o.off]))
			o.off++
			continue
		}
		f.c.TxBatches.Inc()
		for k := o.off; k < o.off+int(r); k++ {
			m := &msgs[k]
			want := uint64(0)
			for _, iov := range unsafe.Slice(m.Hdr.Iov, m.Hdr.Iovlen) {
				want += uint64(iov.Len)
			}
			if uint64(m.Len) != want {
				f.c.TxShort.Add(uint64(q.runs[k]))
				continue
			}
			if q.runs[k] > 1 {
				f.c.TxGSO.Inc()
			}
			f.c.TxDatagrams.Add(uint64(q.runs[k]))
			f.c.TxBytes.Add(uint64(m.Len))
		}
		o.off += int(r)
	}
	return true
}

// txFailed counts n datagrams the kernel refused, and logs the first,
// second, fourth... refusal.
func (f *Fabric) txFailed(err error, n int) {
	f.c.TxError.Add(uint64(n))
	if n := f.c.TxError.Load(); n&(n-1) == 0 {
		f.log.Warn("fabric write", "err", err, "errors", n)
	}
}

// rawConns returns the raw conns of conns, for sendmmsg and recvmmsg.
func rawConns(conns []*net.UDPConn) ([]rawConn, error) {
	rs := make([]rawConn, len(conns))
	for i, c := range conns {
		r, err := c.SyscallConn()
		if err != nil {
			return nil, err
		}
		rs[i] = r
	}
	return rs, nil
}
