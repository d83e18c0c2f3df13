// Package ethertest is the Ethernet function's test peer: a simulated QEMU
// and guest virtio-net driver attached to a NIC over a socketpair
// (vhostusertest's front-end and driver queues), which sends frames on the
// guest's TX rings and reads them from its RX rings. Tests of the NIC, of
// the functions riding on it and of the daemon use it; none needs QEMU.
package ethertest

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

// virtio-net as the guest driver sees it (virtio 1.2 §5.1.3, §5.1.6).
const (
	// FeatureMrgRxbuf is VIRTIO_NET_F_MRG_RXBUF.
	FeatureMrgRxbuf = 1 << 15
	// Acked1 is a modern guest's usual set: VERSION_1 and MRG_RXBUF.
	Acked1 = vhostuser.FeatureVersion1 | FeatureMrgRxbuf

	hdrLen       = 12 // virtio_net_hdr with VERSION_1 or MRG_RXBUF
	hdrLegacyLen = 10 // without either
	hdrNumBufs   = 10 // offset of num_buffers
)

// Ring geometry of the simulated guest.
const (
	RingSize = 256
	BufSize  = 2048
)

// Failsafe bounds how long the guest waits for something that must come.
const Failsafe = 60 * time.Second

// Server is what the guest attaches to: a NIC serving one vhost-user
// session on an established connection.
type Server interface {
	ServeConn(c *net.UnixConn) error
}

// Guest is a simulated QEMU + guest driver attached to one NIC.
type Guest struct {
	T     testing.TB
	Mem   *vhostusertest.GuestMemory
	FE    *vhostusertest.Frontend
	Qs    []*vhostusertest.DriverQueue // 2k: RX of pair k, 2k+1: its TX
	Acked uint64                       // features the driver acknowledges
	RxLen uint32                       // RX buffer size the guest posts

	srv   Server
	done  chan error
	pairs int
}

// Attach connects a guest with pairs queue pairs to srv and replays QEMU's
// net init and start with the acked features; the test's cleanup detaches it.
func Attach(t testing.TB, srv Server, pairs int, acked uint64) *Guest {
	t.Helper()
	g := newGuest(t, pairs, acked)
	g.srv = srv
	g.Connect(nil)
	t.Cleanup(g.Close)
	return g
}

func newGuest(t testing.TB, pairs int, acked uint64) *Guest {
	t.Helper()
	mem, err := vhostusertest.NewGuestMemory(vhostusertest.TwoRegions(1<<20, 4<<20, uint64(pairs)*2*RingSize*(BufSize+300)+(1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	g := &Guest{T: t, Mem: mem, Acked: acked | vhostuser.FeatureProtocolFeatures, pairs: pairs, RxLen: 1536}
	for i := 0; i < 2*pairs; i++ {
		q, err := vhostusertest.NewDriverQueue(mem, i, RingSize, 1, BufSize)
		if err != nil {
			t.Fatal(err)
		}
		g.Qs = append(g.Qs, q)
	}
	return g
}

// AttachConn is Attach for a NIC that dialled: the guest drives the
// front-end end c of an established session (QEMU with a listening
// chardev). Connect cannot be used on it.
func AttachConn(t testing.TB, c *net.UnixConn, pairs int, acked uint64) *Guest {
	t.Helper()
	g := newGuest(t, pairs, acked)
	var err error
	if g.FE, err = vhostusertest.NewFrontend(c, g.Mem, g.Qs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.FE.NetInit(pairs); err != nil {
		t.Fatal(err)
	}
	if err := g.FE.NetStart(g.Acked, pairs, nil); err != nil {
		t.Fatal(err)
	}
	return g
}

// Connect (re)connects the front-end and replays net init and start, with
// the rings' bases (nil: zero).
func (g *Guest) Connect(bases []uint16) {
	g.T.Helper()
	front, back, err := vhostusertest.Pipe()
	if err != nil {
		g.T.Fatal(err)
	}
	old := g.done
	if g.FE == nil {
		if g.FE, err = vhostusertest.NewFrontend(front, g.Mem, g.Qs); err != nil {
			g.T.Fatal(err)
		}
	} else {
		g.FE.Reconnect(front)
		<-old
	}
	g.done = make(chan error, 1)
	go func() { g.done <- g.srv.ServeConn(back) }()
	if err := g.FE.NetInit(g.pairs); err != nil {
		g.T.Fatal(err)
	}
	if err := g.FE.NetStart(g.Acked, g.pairs, bases); err != nil {
		g.T.Fatal(err)
	}
}

// Ended waits for the current session to end (the back-end dropped it);
// the next Connect does not wait for it again.
func (g *Guest) Ended() {
	err := <-g.done
	g.done = make(chan error, 1)
	g.done <- err
}

// Close ends the session and frees the guest's rings and memory.
func (g *Guest) Close() {
	g.FE.Close()
	if g.done != nil {
		<-g.done
	}
	for _, q := range g.Qs {
		q.Close()
	}
	g.Mem.Close()
}

// HdrLen is the virtio_net_hdr length for the acked features.
func (g *Guest) HdrLen() int {
	if g.Acked&(FeatureMrgRxbuf|vhostuser.FeatureVersion1) != 0 {
		return hdrLen
	}
	return hdrLegacyLen
}

// Post posts one frame on the TX ring of pair p (one descriptor: hdr +
// frame), reclaiming used TX chains first. It does not kick.
func (g *Guest) Post(p int, frame []byte) bool {
	q := g.Qs[2*p+1]
	for {
		if _, ok := q.PopUsed(); !ok {
			break
		}
	}
	i, ok := q.Peek()
	if !ok {
		return false
	}
	h := g.HdrLen()
	b := q.Buf(i)
	clear(b[:h])
	copy(b[h:], frame)
	_, err := q.Add([]vhostusertest.Seg{{GPA: q.BufGPAOf(i), Len: uint32(h + len(frame))}})
	return err == nil
}

// Send posts frames on pair p's TX ring, publishes and kicks.
func (g *Guest) Send(p int, frames ...[]byte) {
	g.T.Helper()
	for _, f := range frames {
		if !g.Post(p, f) {
			g.T.Fatal("TX ring full")
		}
	}
	g.Qs[2*p+1].Publish()
	g.Qs[2*p+1].Kick()
}

// PostRX posts n RX buffers of g.RxLen bytes on pair p's RX ring and kicks.
func (g *Guest) PostRX(p, n int) {
	q := g.Qs[2*p]
	for k := 0; k < n; k++ {
		i, ok := q.Peek()
		if !ok {
			break
		}
		if _, err := q.Add([]vhostusertest.Seg{{GPA: q.BufGPAOf(i), Len: g.RxLen, Write: true}}); err != nil {
			g.T.Fatal(err)
		}
	}
	q.Publish()
	q.Kick()
}

// Recv reads one received frame from pair p's RX ring (joining merged
// buffers by num_buffers); ok is false if none is there.
func (g *Guest) Recv(p int) (frame []byte, nbufs int, ok bool) {
	q := g.Qs[2*p]
	u, ok := q.PopUsed()
	if !ok {
		return nil, 0, false
	}
	h := g.HdrLen()
	data := append([]byte(nil), q.Buf(u.ID)[:u.Len]...)
	if len(data) < h {
		return nil, 0, true // a dropped frame's chain, returned empty
	}
	nbufs = 1
	if h == hdrLen {
		nbufs = int(binary.LittleEndian.Uint16(data[hdrNumBufs:]))
	}
	for k := 1; k < nbufs; k++ {
		if !q.WaitUsed(1, Failsafe) {
			g.T.Fatal("merged buffer missing")
		}
		u2, _ := q.PopUsed()
		data = append(data, q.Buf(u2.ID)[:u2.Len]...)
	}
	return data[h:], nbufs, true
}

// RecvN waits for n frames on pair p.
func (g *Guest) RecvN(p, n int) [][]byte {
	g.T.Helper()
	var out [][]byte
	for len(out) < n {
		if !g.Qs[2*p].WaitUsed(1, Failsafe) {
			g.T.Fatalf("got %d frames, want %d", len(out), n)
		}
		f, _, _ := g.Recv(p)
		out = append(out, f)
	}
	return out
}

// EthFrame builds an Ethernet frame dst ← src of EtherType etype.
func EthFrame(dst, src net.HardwareAddr, etype uint16, payload string) []byte {
	f := append(append(append([]byte(nil), dst...), src...), byte(etype>>8), byte(etype))
	return append(f, payload...)
}
