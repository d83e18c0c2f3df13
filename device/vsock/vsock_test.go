package vsock

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

// vsockFailsafe bounds waits so a broken build fails instead of hanging; tests
// assert on results, never on timing.
const vsockFailsafe = 10 * time.Second

// vsockRig is one Device device served over a socketpair to the front-end
// simulator, with a guest driver on both rings.
type vsockRig struct {
	t      testing.TB
	v      *Device
	dir    string
	mem    *vhostusertest.GuestMemory
	fe     *vhostusertest.Frontend
	rx, tx *vhostusertest.DriverQueue
	done   chan error
	masked int
	g      *vsockGuest
}

const (
	rigRxSize = 128
	rigTxSize = 64
	rigRxBuf  = 4096 // Linux 6.1: [W hdr 44][W 4096] per RX buffer
	rigTxMax  = 64 << 10
)

func newVsockRig(t testing.TB) *vsockRig { return newVsockRigMode(t, "pipe") }

// newVsockRigMode connects the front-end over a socketpair to ServeConn
// ("pipe"), or runs Serve and connects to its socket as QEMU's client
// ("listen"), or lets Serve dial QEMU's server socket ("dial").
func newVsockRigMode(t testing.TB, mode string) *vsockRig {
	t.Helper()
	dir, err := os.MkdirTemp("", "vsk") // short: sun_path is 108 bytes
	vsMust(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &vsockRig{t: t, dir: dir}
	r.v, err = New(Config{Name: "vsock0", Socket: filepath.Join(dir, "vu.sock"), GuestCID: vsockTestCID,
		UDS: filepath.Join(dir, "v"), Dial: mode == "dial"})
	vsMust(t, err)
	tr := &vsTraceRing{max: 400}
	r.v.SetTrace(tr.add)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last %d trace lines:\n%s", tr.max, tr.dump())
		}
	})
	r.mem, err = vhostusertest.NewGuestMemory(vhostusertest.OneRegion(16 << 20))
	vsMust(t, err)
	r.rx, err = vhostusertest.NewDriverQueue(r.mem, vsockRxQueue, rigRxSize, 0, 8192)
	vsMust(t, err)
	r.tx, err = vhostusertest.NewDriverQueue(r.mem, vsockTxQueue, rigTxSize, 0, rigTxMax+128)
	vsMust(t, err)
	r.masked, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	vsMust(t, err)
	queues := []*vhostusertest.DriverQueue{r.rx, r.tx}
	stop := func() {}
	switch mode {
	case "pipe":
		vsMust(t, r.v.listenUDS())
		r.connect()
	case "listen", "dial":
		ctx, cancel := context.WithCancel(context.Background())
		var l *net.UnixListener
		if mode == "dial" { // QEMU's chardev server=on
			l, err = net.ListenUnix("unix", &net.UnixAddr{Name: r.v.cfg.Socket, Net: "unix"})
			vsMust(t, err)
			defer l.Close()
		}
		r.done = make(chan error, 1)
		go func() { r.done <- r.v.Serve(ctx) }()
		stop = cancel
		if mode == "dial" {
			l.SetDeadline(time.Now().Add(vsockFailsafe))
			c, err := l.AcceptUnix()
			vsMust(t, err)
			r.fe, err = vhostusertest.NewFrontend(c, r.mem, queues)
			vsMust(t, err)
		} else {
			for end := time.Now().Add(vsockFailsafe); ; time.Sleep(time.Millisecond) {
				if r.fe, err = vhostusertest.Dial(r.v.cfg.Socket, r.mem, queues); err == nil || time.Now().After(end) {
					break
				}
			}
			vsMust(t, err)
		}
	}
	r.g = &vsockGuest{t: t, rx: r.rx, tx: r.tx, mem: r.mem}
	t.Cleanup(func() {
		r.fe.Close()
		stop()
		<-r.done
		r.v.Close()
		r.rx.Close()
		r.tx.Close()
		unix.Close(r.masked)
		r.mem.Close()
	})
	return r
}

func vsMust(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// connect opens a new vhost-user connection (a QEMU start or reconnect).
func (r *vsockRig) connect() {
	front, back, err := vhostusertest.Pipe()
	vsMust(r.t, err)
	if r.fe == nil {
		r.fe, err = vhostusertest.NewFrontend(front, r.mem, []*vhostusertest.DriverQueue{r.rx, r.tx})
		vsMust(r.t, err)
	} else {
		r.fe.Reconnect(front)
	}
	r.done = make(chan error, 1)
	go func() { r.done <- r.v.ServeConn(back) }()
}

// qemuVsockInit replays vhost-user-vsock realize in QEMU 7.2:
// negotiation with CONFIG kept, SET_OWNER late, GET_FEATURES again,
// masked call fds for the 2 back-end rings, then GET_CONFIG of the 8-byte
// guest_cid. It returns the config bytes.
func (r *vsockRig) qemuVsockInit() []byte {
	fe := r.fe
	var err error
	fe.Features, err = fe.GetU64(vhostuser.ReqGetFeatures)
	vsMust(r.t, err)
	p, err := fe.GetU64(vhostuser.ReqGetProtocolFeatures)
	vsMust(r.t, err)
	fe.Proto = p & (1<<17 - 1)
	vsMust(r.t, fe.SetU64(vhostuser.ReqSetProtocolFeatures, fe.Proto))
	if fe.Proto&vhostuser.ProtoMQ != 0 {
		fe.QueueNum, err = fe.GetU64(vhostuser.ReqGetQueueNum)
		vsMust(r.t, err)
	}
	if fe.Proto&vhostuser.ProtoConfigureMemSlots != 0 {
		_, err = fe.GetU64(vhostuser.ReqGetMaxMemSlots)
		vsMust(r.t, err)
	}
	vsMust(r.t, fe.Set(vhostuser.ReqSetOwner, false, nil))
	_, err = fe.GetU64(vhostuser.ReqGetFeatures)
	vsMust(r.t, err)
	for idx := 0; idx < 2; idx++ {
		vsMust(r.t, fe.VringFile(vhostuser.ReqSetVringCall, idx, r.masked))
		vsMust(r.t, fe.VringFile(vhostuser.ReqSetVringErr, idx, r.masked))
	}
	req := make([]byte, 12+8)
	binary.LittleEndian.PutUint32(req[4:], 8)
	reply, fds, err := fe.Get(vhostuser.ReqGetConfig, req)
	for _, fd := range fds {
		unix.Close(fd)
	}
	vsMust(r.t, err)
	if len(reply) != 20 {
		r.t.Fatalf("GET_CONFIG reply %d bytes, want 20", len(reply))
	}
	return reply[12:]
}

func (r *vsockRig) status(v uint64) {
	if r.fe.Proto&vhostuser.ProtoStatus == 0 {
		return
	}
	_, err := r.fe.GetU64(vhostuser.ReqGetStatus)
	vsMust(r.t, err)
	vsMust(r.t, r.fe.SetU64(vhostuser.ReqSetStatus, v))
}

// qemuVsockStart replays the guest driver's start (as for vhost-user-fs):
// real call fds (unmask), SET_FEATURES, status, memory, both rings,
// enables, the call fds again, DRIVER_OK. bases are the SET_VRING_BASE
// values (nil: 0; a reconnect: the used idx).
func (r *vsockRig) qemuVsockStart(bases []uint16, sendMem bool) {
	fe := r.fe
	for _, q := range []*vhostusertest.DriverQueue{r.rx, r.tx} {
		vsMust(r.t, fe.VringFile(vhostuser.ReqSetVringCall, q.Index, q.CallFD))
	}
	vsMust(r.t, fe.SetU64(vhostuser.ReqSetFeatures, vhostuser.FeatureVersion1|vhostuser.FeatureProtocolFeatures))
	r.status(8)
	if sendMem {
		for i := range r.mem.Regions {
			p, fd := r.mem.RegionPayload(i)
			err := fe.Set(vhostuser.ReqAddMemReg, true, p, fd)
			unix.Close(fd)
			vsMust(r.t, err)
		}
	}
	for i, q := range []*vhostusertest.DriverQueue{r.rx, r.tx} {
		var base uint16
		if bases != nil {
			base = bases[i]
		}
		vsMust(r.t, fe.RingSetup(q, base))
	}
	vsMust(r.t, fe.Enable(0, true))
	vsMust(r.t, fe.Enable(1, true))
	for _, q := range []*vhostusertest.DriverQueue{r.rx, r.tx} {
		vsMust(r.t, fe.VringFile(vhostuser.ReqSetVringCall, q.Index, q.CallFD))
	}
	r.status(0xf)
}

// up runs init and start and fills the RX ring as the Linux driver does.
func (r *vsockRig) up() {
	cfg := r.qemuVsockInit()
	if cid := binary.LittleEndian.Uint64(cfg); cid != vsockTestCID {
		r.t.Fatalf("guest_cid %d", cid)
	}
	r.qemuVsockStart(nil, true)
	r.g.fillRx()
}

// hostDial connects a host client to the hybrid socket and sends CONNECT.
func (r *vsockRig) hostDial(port uint32) *net.UnixConn {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: r.v.cfg.UDS, Net: "unix"})
	vsMust(r.t, err)
	_, err = fmt.Fprintf(c, "CONNECT %d\n", port)
	vsMust(r.t, err)
	c.SetDeadline(time.Now().Add(vsockFailsafe))
	return c
}

// vsockGuest is the guest: the virtio-vsock driver's rings plus a small
// socket layer (buf_alloc, fwd_cnt, credit) like Linux's.
type vsockGuest struct {
	t      testing.TB
	rx, tx *vhostusertest.DriverQueue
	mem    *vhostusertest.GuestMemory
}

// vsockGuestPkt is one packet the guest received.
type vsockGuestPkt struct {
	hdr     Hdr
	payload []byte
}

func (p vsockGuestPkt) String() string {
	s := fmt.Sprintf("%v %d->%d", p.hdr.Op(), p.hdr.SrcPort(), p.hdr.DstPort())
	if p.hdr.Flags() != 0 {
		s += fmt.Sprintf(" flags=%d", p.hdr.Flags())
	}
	if len(p.payload) > 0 {
		s += fmt.Sprintf(" len=%d", len(p.payload))
	}
	return s
}

// fillRx posts RX buffers ([W 44][W 4096], one area per head) and kicks.
func (g *vsockGuest) fillRx() {
	for g.rx.Free() >= 2 {
		head, _ := g.rx.Peek()
		base := g.rx.BufGPAOf(head)
		_, err := g.rx.Add([]vhostusertest.Seg{{GPA: base, Len: VsockHdrLen, Write: true}, {GPA: base + 64, Len: rigRxBuf, Write: true}})
		vsMust(g.t, err)
	}
	g.rx.Publish()
	g.rx.Kick()
}

// recv returns the next packet the device put in RX.
func (g *vsockGuest) recv() vsockGuestPkt {
	g.t.Helper()
	if !g.rx.WaitUsed(1, vsockFailsafe) {
		g.t.Fatal("guest: no packet from the device")
	}
	u, _ := g.rx.PopUsed()
	if u.Len < VsockHdrLen {
		g.t.Fatalf("guest: used len %d", u.Len)
	}
	base := g.rx.BufGPAOf(u.ID)
	hdr := Hdr(append([]byte(nil), g.mem.Bytes(base, VsockHdrLen)...))
	p := vsockGuestPkt{hdr: hdr}
	if n := u.Len - VsockHdrLen; n > 0 {
		p.payload = append([]byte(nil), g.mem.Bytes(base+64, uint64(n))...)
	}
	if hdr.SrcCID() != VsockHostCID || hdr.DstCID() != vsockTestCID || hdr.Type() != VsockTypeStream || hdr.Len() != u.Len-VsockHdrLen {
		g.t.Fatalf("guest: bad header %x (used len %d)", []byte(hdr), u.Len)
	}
	g.fillRx()
	return p
}

// send posts one TX packet ([R hdr][R payload]) and kicks.
func (g *vsockGuest) send(op Op, gport, hport, flags, bufAlloc, fwd uint32, payload []byte) {
	g.sendRaw(vsPkt(op, gport, hport, flags, bufAlloc, fwd, payload))
}

func (g *vsockGuest) sendRaw(b []byte) {
	g.t.Helper()
	for g.tx.Free() < 2 {
		if _, ok := g.tx.PopUsed(); !ok && !g.tx.WaitUsed(1, vsockFailsafe) {
			g.t.Fatal("guest: TX ring never drained")
		}
	}
	head, _ := g.tx.Peek()
	base := g.tx.BufGPAOf(head)
	segs := []vhostusertest.Seg{{GPA: base, Len: uint32(min(len(b), VsockHdrLen))}}
	copy(g.mem.Bytes(base, uint64(len(b[:segs[0].Len]))), b)
	if len(b) > VsockHdrLen {
		copy(g.mem.Bytes(base+64, uint64(len(b)-VsockHdrLen)), b[VsockHdrLen:])
		segs = append(segs, vhostusertest.Seg{GPA: base + 64, Len: uint32(len(b) - VsockHdrLen)})
	}
	_, err := g.tx.Add(segs)
	vsMust(g.t, err)
	g.tx.Publish()
	g.tx.Kick()
}

// vsockGuestConn is the guest side of one stream, with Linux's credit rules.
type vsockGuestConn struct {
	g               *vsockGuest
	gport, hport    uint32
	bufAlloc        uint32 // ours (the guest's)
	fwdCnt, lastFwd uint32
	txCnt           uint32
	peerBuf         uint32
	peerFwd         uint32
	received        []byte
	peerShut        uint32
	rst             bool
}

func (c *vsockGuestConn) credit() uint32 {
	if c.txCnt-c.peerFwd >= c.peerBuf {
		return 0
	}
	return c.peerBuf - (c.txCnt - c.peerFwd)
}

func (c *vsockGuestConn) send(op Op, flags uint32, payload []byte) {
	c.g.send(op, c.gport, c.hport, flags, c.bufAlloc, c.fwdCnt, payload)
	c.lastFwd = c.fwdCnt
}

// handle applies one packet from the device; the app consumes RW at once.
func (c *vsockGuestConn) handle(p vsockGuestPkt) {
	t := c.g.t
	t.Helper()
	if p.hdr.SrcPort() != c.hport || p.hdr.DstPort() != c.gport {
		t.Fatalf("packet for another connection: %v", p)
	}
	c.peerBuf, c.peerFwd = p.hdr.BufAlloc(), p.hdr.FwdCnt()
	switch p.hdr.Op() {
	case VsockOpRW:
		if uint32(len(c.received))+uint32(len(p.payload))-c.fwdCnt > c.bufAlloc {
			t.Fatalf("device overran the guest's credit")
		}
		c.received = append(c.received, p.payload...)
		c.fwdCnt += uint32(len(p.payload))
		// Linux: tell the peer once our advertised free space runs low.
		if c.fwdCnt-c.lastFwd >= c.bufAlloc/2 {
			c.send(VsockOpCreditUpdate, 0, nil)
		}
	case VsockOpCreditRequest:
		c.send(VsockOpCreditUpdate, 0, nil)
	case VsockOpShutdown:
		c.peerShut |= p.hdr.Flags()
	case VsockOpRst:
		c.rst = true
	case VsockOpCreditUpdate:
	default:
		t.Fatalf("unexpected %v", p)
	}
}

func TestVsockQemu72NegotiationAndCallSwapMidRun(t *testing.T) {
	r := newVsockRig(t)
	r.up()
	fe := r.fe
	if fe.Features&vhostuser.FeatureVersion1 == 0 || fe.Features&vhostuser.FeatureProtocolFeatures == 0 {
		t.Fatalf("features %#x", fe.Features)
	}
	if fe.Proto&vhostuser.ProtoConfig == 0 {
		t.Fatalf("protocol features %#x lack CONFIG (QEMU 7.2 requires it for vsock)", fe.Proto)
	}
	if fe.QueueNum != 2 {
		t.Fatalf("GET_QUEUE_NUM %d, want 2 (rx, tx; QEMU keeps the event queue)", fe.QueueNum)
	}
	want := []string{
		"GET_FEATURES -> 0x170000000",
		"GET_PROTOCOL_FEATURES -> 0x1a209",
		"SET_PROTOCOL_FEATURES 0x1a209",
		"GET_QUEUE_NUM -> 0x2",
		"GET_MAX_MEM_SLOTS -> 0x20",
		"GET_FEATURES -> 0x170000000",
		"SET_VRING_CALL idx0 fd", "SET_VRING_ERR idx0 fd", "SET_VRING_CALL idx1 fd", "SET_VRING_ERR idx1 fd",
		"SET_VRING_CALL idx0 fd", "SET_VRING_CALL idx1 fd",
		"SET_FEATURES 0x140000000",
		"GET_STATUS -> 0x0", "SET_STATUS 0x8",
	}
	if got := fe.Log[:len(want)]; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("transcript:\n%s", strings.Join(fe.Log, "\n"))
	}
	// The guest connects to a port nobody serves: RST, on the first call fd.
	r.g.send(VsockOpRequest, 6000, 9, 0, 65536, 0, nil)
	if p := r.g.recv(); p.String() != "RST 9->6000" {
		t.Fatalf("got %v", p)
	}
	// QEMU swaps idx 1's call fd while the rings run; TX completions now
	// signal the new one.
	old := r.tx.CallFD
	nfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	vsMust(t, err)
	vsMust(t, fe.VringFile(vhostuser.ReqSetVringCall, 1, nfd))
	r.tx.CallFD = nfd
	defer unix.Close(old)
	r.tx.Calls()
	r.g.send(VsockOpRequest, 6001, 9, 0, 65536, 0, nil)
	if p := r.g.recv(); p.String() != "RST 9->6001" {
		t.Fatalf("got %v", p)
	}
	if !r.tx.WaitUsed(2, vsockFailsafe) {
		t.Fatal("TX not completed")
	}
	st := r.v.Status()
	if st.Session.State != "running" || st.Counters["dial_failed"] != 2 || st.Backend["call_fd_swaps"] == 0 {
		t.Fatalf("status %+v", st)
	}
}

// vsockEchoGuest serves one connection as an echo server until the host's
// SHUTDOWN(SEND) arrives and everything is echoed; it then shuts its own
// sending side and waits for the device's RST.
func vsockEchoGuest(c *vsockGuestConn) {
	echoed := 0
	for !c.rst {
		// Echo what we can within the device's credit.
		for echoed < len(c.received) && c.credit() > 0 {
			n := min(len(c.received)-echoed, int(c.credit()), rigTxMax)
			c.send(VsockOpRW, 0, c.received[echoed:echoed+n])
			c.txCnt += uint32(n)
			echoed += n
		}
		if c.peerShut&VsockShutdownSend != 0 && echoed == len(c.received) {
			c.send(VsockOpShutdown, VsockShutdownSend, nil)
			for !c.rst {
				c.handle(c.g.recv())
			}
			return
		}
		c.handle(c.g.recv())
	}
}

func TestVsockHostInitiatedEchoWithCreditBothWays(t *testing.T) {
	r := newVsockRig(t)
	r.up()
	client := r.hostDial(1024)
	req := r.g.recv()
	if req.hdr.Op() != VsockOpRequest || req.hdr.DstPort() != 1024 || req.hdr.SrcPort() < vsockEphemeralBase {
		t.Fatalf("got %v", req)
	}
	hport := req.hdr.SrcPort()
	// A small guest buffer: the 1 MiB from the host needs many credit updates.
	c := &vsockGuestConn{g: r.g, gport: 1024, hport: hport, bufAlloc: 64 << 10, peerBuf: req.hdr.BufAlloc()}
	c.send(VsockOpResponse, 0, nil)
	line := make([]byte, 0, 32)
	for {
		var b [1]byte
		_, err := client.Read(b[:])
		vsMust(t, err)
		line = append(line, b[0])
		if b[0] == '\n' {
			break
		}
	}
	if string(line) != fmt.Sprintf("OK %d\n", hport) {
		t.Fatalf("greeting %q", line)
	}
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(data)
	writeErr := make(chan error, 1)
	go func() {
		_, err := client.Write(data)
		if err == nil {
			err = client.CloseWrite()
		}
		writeErr <- err
	}()
	echo := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		echo <- b
	}()
	vsockEchoGuest(c)
	vsMust(t, <-writeErr)
	got := <-echo
	if !bytes.Equal(got, data) || !bytes.Equal(c.received, data) {
		t.Fatalf("echo: guest got %d bytes, host got %d of %d back", len(c.received), len(got), len(data))
	}
	st := r.v.Status()
	if len(st.Connections) != 0 || st.Counters["closed"] != 1 || st.Counters["tx_no_credit"] == 0 {
		t.Fatalf("status %+v", st)
	}
	if st.Counters["bytes_to_host"] != 1<<20 || st.Counters["bytes_to_guest"] != 1<<20 {
		t.Fatalf("byte counters %d %d", st.Counters["bytes_to_host"], st.Counters["bytes_to_guest"])
	}
	client.Close()
}

func TestVsockGuestConnectsToHostPortBridgedToUDSPort(t *testing.T) {
	r := newVsockRig(t)
	r.up()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: r.v.cfg.UDS + "_5000", Net: "unix"})
	vsMust(t, err)
	defer l.Close()
	c := &vsockGuestConn{g: r.g, gport: 6000, hport: 5000, bufAlloc: 1 << 20}
	c.send(VsockOpRequest, 0, nil)
	if p := r.g.recv(); p.String() != "RESPONSE 5000->6000" {
		t.Fatalf("got %v", p)
	} else {
		c.peerBuf = p.hdr.BufAlloc()
	}
	l.SetDeadline(time.Now().Add(vsockFailsafe))
	hc, err := l.AcceptUnix()
	vsMust(t, err)
	defer hc.Close()
	hc.SetDeadline(time.Now().Add(vsockFailsafe))
	if st := r.v.Status(); len(st.Connections) != 1 || st.Connections[0].State != "established" {
		t.Fatalf("connections %+v", st.Connections)
	}
	// Guest → host, then the guest is done sending: the host reads EOF.
	c.send(VsockOpRW, 0, []byte("ping"))
	c.txCnt += 4
	c.send(VsockOpShutdown, VsockShutdownSend, nil)
	got, err := io.ReadAll(hc)
	vsMust(t, err)
	if string(got) != "ping" {
		t.Fatalf("host read %q", got)
	}
	// Host → guest on the other half, then the host closes.
	_, err = hc.Write([]byte("pong"))
	vsMust(t, err)
	hc.CloseWrite()
	for c.peerShut == 0 {
		c.handle(r.g.recv())
	}
	if string(c.received) != "pong" || c.peerShut != VsockShutdownSend|VsockShutdownRcv {
		t.Fatalf("guest got %q, shutdown flags %d", c.received, c.peerShut)
	}
	// Like Linux, the guest consumed everything: the device finishes with RST
	// once it learns our fwd_cnt.
	c.send(VsockOpCreditUpdate, 0, nil)
	for !c.rst {
		c.handle(r.g.recv())
	}
	if st := r.v.Status(); len(st.Connections) != 0 || st.Counters["closed"] != 1 {
		t.Fatalf("status %+v", st)
	}
}

func TestVsockGuestRequestToUnservedPortGetsRst(t *testing.T) {
	r := newVsockRig(t)
	r.up()
	r.g.send(VsockOpRequest, 6000, 7777, 0, 65536, 0, nil)
	if p := r.g.recv(); p.String() != "RST 7777->6000" {
		t.Fatalf("got %v", p)
	}
	if n := r.v.Status().Counters["dial_failed"]; n != 1 {
		t.Fatalf("DialFailed=%d", n)
	}
}

func TestVsockGuestRstClosesHostClient(t *testing.T) {
	r := newVsockRig(t)
	r.up()
	client := r.hostDial(1024)
	req := r.g.recv()
	r.g.send(VsockOpRst, 1024, req.hdr.SrcPort(), 0, 0, 0, nil)
	if b, err := io.ReadAll(client); err != nil || len(b) != 0 {
		t.Fatalf("client read %q, %v; want EOF", b, err)
	}
	if st := r.v.Status(); len(st.Connections) != 0 || st.Counters["rst_received"] != 1 {
		t.Fatalf("status %+v", st)
	}
}

func TestVsockMalformedTxPacketsAreCountedAndServiceContinues(t *testing.T) {
	r := newVsockRig(t)
	r.up()
	short := vsPkt(VsockOpRequest, 1, 2, 0, 0, 0, nil)[:30]
	seq := vsPkt(VsockOpRequest, 6000, 5, 0, 0, 0, nil)
	Hdr(seq).SetType(2)
	spoof := vsPkt(VsockOpRequest, 6000, 5, 0, 0, 0, nil)
	Hdr(spoof).SetSrcCID(99)
	r.g.sendRaw(short)
	r.g.sendRaw(spoof)
	r.g.sendRaw(seq) // a SEQPACKET request we do not serve: RST
	if p := r.g.recv(); p.String() != "RST 5->6000" {
		t.Fatalf("got %v", p)
	}
	c := r.v.Status().Counters
	if c["hdr_short"] != 1 || c["hdr_type"] != 1 || c["hdr_src_cid"] != 1 || c["pkts_from_guest"] != 0 {
		t.Fatalf("counters %v", c)
	}
	// Still serving.
	r.g.send(VsockOpRequest, 6000, 7777, 0, 65536, 0, nil)
	if p := r.g.recv(); p.String() != "RST 7777->6000" {
		t.Fatalf("got %v", p)
	}
}

func TestVsockSessionLossResetsConnectionsAndReconnectServesAgain(t *testing.T) {
	r := newVsockRig(t)
	r.up()
	client := r.hostDial(1024)
	req := r.g.recv()
	c := &vsockGuestConn{g: r.g, gport: 1024, hport: req.hdr.SrcPort(), bufAlloc: 65536}
	c.send(VsockOpResponse, 0, nil)
	line := make([]byte, len(fmt.Sprintf("OK %d\n", c.hport)))
	_, err := io.ReadFull(client, line)
	vsMust(t, err)
	// QEMU goes away (crash, or the back-end connection drops).
	r.fe.Close()
	vsMust(t, <-r.done)
	if b, err := io.ReadAll(client); err != nil || len(b) != 0 {
		t.Fatalf("client read %q, %v; want EOF", b, err)
	}
	st := r.v.Status()
	if len(st.Connections) != 0 || st.Counters["session_resets"] != 1 {
		t.Fatalf("status %+v", st)
	}
	// QEMU reconnects (chardev reconnect=1): full init, rings resumed at
	// the used idx, memory sent again on the new connection.
	bases := []uint16{r.rx.UsedIdx(), r.tx.UsedIdx()}
	r.connect()
	r.qemuVsockInit()
	r.qemuVsockStart(bases, true)
	r.g.fillRx()
	client2 := r.hostDial(1025)
	defer client2.Close()
	if p := r.g.recv(); p.hdr.Op() != VsockOpRequest || p.hdr.DstPort() != 1025 {
		t.Fatalf("got %v", p)
	}
}

func TestVsockBadConnectLineIsCountedAndClosed(t *testing.T) {
	r := newVsockRig(t)
	for _, line := range []string{"CONNECT\n", "CONNECT -1\n", "CONNECT 99999999999\n", "connect 5\n", strings.Repeat("A", 40)} {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: r.v.cfg.UDS, Net: "unix"})
		vsMust(t, err)
		c.SetDeadline(time.Now().Add(vsockFailsafe))
		c.Write([]byte(line))
		// Closed by the device: EOF, or a reset when it left bytes unread.
		if b, err := io.ReadAll(c); (err != nil && !errors.Is(err, syscall.ECONNRESET)) || len(b) != 0 {
			t.Fatalf("%q: read %q, %v", line, b, err)
		}
		c.Close()
	}
	if n := r.v.Counters.HostBadConnect.Load(); n != 5 {
		t.Fatalf("HostBadConnect=%d", n)
	}
}

func TestVsockConfigSpaceIsGuestCIDReadOnly(t *testing.T) {
	v, err := New(Config{Socket: "x", GuestCID: 0x12345678})
	vsMust(t, err)
	d := vsockDevice{v}
	b, err := d.GetConfig(0, 8)
	if err != nil || binary.LittleEndian.Uint64(b) != 0x12345678 {
		t.Fatalf("config %x %v", b, err)
	}
	if b, err := d.GetConfig(4, 4); err != nil || binary.LittleEndian.Uint32(b) != 0 {
		t.Fatalf("upper half %x %v", b, err)
	}
	if _, err := d.GetConfig(4, 8); err == nil {
		t.Fatal("read past guest_cid accepted")
	}
	if err := d.SetConfig(0, []byte{1}); err == nil {
		t.Fatal("write accepted")
	}
	if v.Counters.BadConfigAccess.Load() != 2 {
		t.Fatalf("BadConfigAccess=%d", v.Counters.BadConfigAccess.Load())
	}
	for _, cid := range []uint64{0, 1, 2, 0xffffffff} {
		if _, err := New(Config{Socket: "x", GuestCID: cid}); err != ErrVsockCID {
			t.Errorf("cid %d: %v", cid, err)
		}
	}
}

// TestVsockServeModes runs Serve as QEMU meets it: listening for QEMU's
// client chardev, or dialing QEMU's server=on socket.
func TestVsockServeModes(t *testing.T) {
	for _, mode := range []string{"listen", "dial"} {
		t.Run(mode, func(t *testing.T) {
			r := newVsockRigMode(t, mode)
			r.up()
			client := r.hostDial(1024)
			defer client.Close()
			if p := r.g.recv(); p.hdr.Op() != VsockOpRequest || p.hdr.DstPort() != 1024 {
				t.Fatalf("got %v", p)
			}
		})
	}
}

func TestVsockConfigChecksAndJSON(t *testing.T) {
	var cfg Config
	vsMust(t, json.Unmarshal([]byte(`{"name":"vs0","socket":"vs0.sock","guest_cid":3,"uds":"vs0.uds"}`), &cfg))
	cfg.ResolvePaths("/run/falconnic")
	if cfg.Socket != "/run/falconnic/vs0.sock" || cfg.UDS != "/run/falconnic/vs0.uds" || cfg.GuestCID != 3 {
		t.Fatalf("config %+v", cfg)
	}
	vsMust(t, cfg.Check())
	for _, tc := range []struct {
		mut  func(c *Config)
		want error
	}{
		{func(c *Config) { c.GuestCID = 2 }, ErrVsockCID},
		{func(c *Config) { c.GuestCID = 0xffffffff }, ErrVsockCID},
		{func(c *Config) { c.Socket = "" }, ErrVsockSocket},
		{func(c *Config) { c.UDS = "/" + strings.Repeat("u", 100) }, ErrVsockPath},
	} {
		c := cfg
		tc.mut(&c)
		if err := c.Check(); err != tc.want {
			t.Errorf("%+v: %v, want %v", c, err, tc.want)
		}
	}
}

// vsTraceRing keeps the last max trace lines, dumped when a test fails.
type vsTraceRing struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (r *vsTraceRing) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) == r.max {
		copy(r.lines, r.lines[1:])
		r.lines = r.lines[:r.max-1]
	}
	r.lines = append(r.lines, s)
}

func (r *vsTraceRing) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

func TestVsockMalformedChainsAreCounted(t *testing.T) {
	r := newVsockRig(t)
	cfg := r.qemuVsockInit()
	if binary.LittleEndian.Uint64(cfg) != vsockTestCID {
		t.Fatalf("config %x", cfg)
	}
	r.qemuVsockStart(nil, true)
	// RX: the guest posts a buffer too small for a header and a chain with
	// a device-readable buffer; both come back empty, counted.
	head, _ := r.rx.Peek()
	_, err := r.rx.Add([]vhostusertest.Seg{{GPA: r.rx.BufGPAOf(head), Len: 20, Write: true}})
	vsMust(t, err)
	head, _ = r.rx.Peek()
	_, err = r.rx.Add([]vhostusertest.Seg{{GPA: r.rx.BufGPAOf(head), Len: 8}, {GPA: r.rx.BufGPAOf(head) + 64, Len: 4096, Write: true}})
	vsMust(t, err)
	r.rx.Publish()
	r.rx.Kick()
	// TX: a chain with a device-writable buffer is dropped, counted.
	head, _ = r.tx.Peek()
	base := r.tx.BufGPAOf(head)
	copy(r.mem.Bytes(base, VsockHdrLen), vsPkt(VsockOpRequest, 6000, 7777, 0, 0, 0, nil))
	_, err = r.tx.Add([]vhostusertest.Seg{{GPA: base, Len: VsockHdrLen}, {GPA: base + 64, Len: 16, Write: true}})
	vsMust(t, err)
	r.tx.Publish()
	r.tx.Kick()
	// A valid REQUEST to an unserved port queues an RST for the bad buffers.
	r.g.send(VsockOpRequest, 6000, 7777, 0, 65536, 0, nil)
	if !r.rx.WaitUsed(2, vsockFailsafe) {
		t.Fatal("RX buffers not returned")
	}
	for i := 0; i < 2; i++ {
		if u, _ := r.rx.PopUsed(); u.Len != 0 {
			t.Fatalf("bad RX chain used with len %d", u.Len)
		}
	}
	// A good buffer gets the RST that waited.
	r.g.fillRx()
	if p := r.g.recv(); p.String() != "RST 7777->6000" {
		t.Fatalf("got %v", p)
	}
	c := r.v.Status().Counters
	if c["tx_chain_writable"] != 1 || c["rx_buf_too_small"] != 1 || c["rx_chain_readable"] != 1 || c["pkts_from_guest"] != 1 {
		t.Fatalf("counters %v", c)
	}
}
