package fabric

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

type rawConn = syscall.RawConn

// Receive batching: one recvmmsg takes up to rxBatch datagrams into a ring
// of preallocated buffers of rxBufLen bytes each (more than the largest
// UDP payload, so no datagram is cut short).
const (
	rxBatch  = 32
	rxBufLen = 1 << 16
	// rxCtrlLen holds one UDP_GRO control message (CMSG_SPACE(sizeof(int))).
	rxCtrlLen = 32
)

// rxRing is one socket's receive buffers and recvmmsg vectors, owned by
// its read goroutine.
type rxRing struct {
	msgs  [rxBatch]unix.Mmsghdr
	iovs  [rxBatch]unix.Iovec
	names [rxBatch]rawSockaddr
	ctrl  [rxBatch][rxCtrlLen]byte // UDP_GRO's segment size
	buf   []byte
	n     int // datagrams the last recvmmsg returned
	err   error
	read  func(fd uintptr) bool
}

func newRxRing() *rxRing {
	r := &rxRing{buf: make([]byte, rxBatch*rxBufLen)}
	r.read = r.recvmmsg
	return r
}

// reset makes every slot ready for the next recvmmsg.
func (r *rxRing) reset() {
	for i := range r.msgs {
		iov := &r.iovs[i]
		iov.Base = &r.buf[i*rxBufLen]
		iov.SetLen(rxBufLen)
		m := &r.msgs[i]
		m.Len = 0
		m.Hdr = unix.Msghdr{Name: &r.names[i][0], Namelen: uint32(len(r.names[i])), Iov: iov, Control: &r.ctrl[i][0]}
		m.Hdr.SetIovlen(1)
		m.Hdr.SetControllen(rxCtrlLen)
	}
}

// recvmmsg is the raw conn's read callback: false (wait until readable)
// when nothing is queued.
func (r *rxRing) recvmmsg(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.msgs[0])), rxBatch, 0, 0, 0)
		switch e {
		case 0:
			r.n, r.err = int(n), nil
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.n, r.err = 0, e
		return true
	}
}

// readLoop receives c's datagrams a batch at a time, into r, until c is
// closed.
func (f *Fabric) readLoop(c *net.UDPConn, rc rawConn, r *rxRing) {
	local := c.LocalAddr().(*net.UDPAddr).AddrPort()
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	for {
		r.reset()
		err := rc.Read(r.read)
		if err == nil {
			err = r.err
		}
		if err != nil {
			if f.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			f.c.RxReadError.Inc()
			if n := f.c.RxReadError.Load(); n&(n-1) == 0 { // 1st, 2nd, 4th, 8th...: never a log flood
				f.log.Warn("fabric read", "err", err, "errors", n)
			}
			continue
		}
		f.c.RxBatches.Inc()
		for i := range r.n {
			f.receiveSlot(local, r, i)
		}
	}
}

// receiveSlot handles the datagram in slot i of r: each is checked on its
// own, so a hostile one costs only itself.
func (f *Fabric) receiveSlot(local netip.AddrPort, r *rxRing, i int) {
	m := &r.msgs[i]
	n := int(m.Len)
	if n > rxBufLen {
		n = rxBufLen
	}
	b := r.buf[i*rxBufLen : i*rxBufLen+n]
	if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
		f.c.RxDatagrams.Inc()
		f.c.RxBytes.Add(uint64(n))
		f.drops[dropTruncated].Inc()
		return
	}
	src, ok := parseSockaddr(&r.names[i], m.Hdr.Namelen)
	if !ok {
		f.c.RxDatagrams.Inc()
		f.c.RxBytes.Add(uint64(n))
		f.drops[dropBadSource].Inc()
		return
	}
	ctrl := r.ctrl[i][:min(int(m.Hdr.Controllen), rxCtrlLen)]
	seg := 0
	if m.Hdr.Flags&unix.MSG_CTRUNC == 0 {
		seg = groSegment(ctrl)
	}
	if seg <= 0 || seg >= len(b) {
		f.receiveOne(local, src, b)
		return
	}
	f.c.RxGRO.Inc()
	for len(b) > 0 {
		d := b[:min(seg, len(b))]
		b = b[len(d):]
		f.receiveOne(local, src, d)
	}
}

// receiveOne hands one datagram to the tap and the receiver.
func (f *Fabric) receiveOne(local, src netip.AddrPort, b []byte) {
	if t := f.tap.Load(); t != nil {
		(*t)(false, [6]byte{}, local, src, b)
	}
	f.receive(src, b)
}
