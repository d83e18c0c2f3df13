package vhostusertest

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"falconnic/vhostuser"
)

// qemuProtoMask is the protocol-feature mask of QEMU 7.2: bits 0 to 16,
// VHOST_USER_PROTOCOL_F_MQ to F_STATUS (docs/interop/vhost-user.rst).
const qemuProtoMask = 1<<17 - 1

// Frontend is a pure-Go stand-in for QEMU 7.2's vhost-user front-end. It
// replays the message sequences recorded from QEMU 7.2 and keeps a
// transcript, one line per message.
type Frontend struct {
	conn *vhostuser.Conn
	raw  *net.UnixConn

	// Mem is the simulated guest RAM.
	Mem *GuestMemory
	// Queues are the driver-side rings, by virtqueue index.
	Queues []*DriverQueue
	// Features is the back-end's GET_FEATURES answer; Proto the negotiated protocol features.
	Features, Proto uint64
	// QueueNum is the GET_QUEUE_NUM answer.
	QueueNum uint64
	// Log is the transcript.
	Log []string
	// StripConfig drops PROTOCOL_F_CONFIG as QEMU does for a device without
	// config ops, such as net (hw/virtio/vhost-user.c).
	StripConfig bool

	masked   int          // the "masked notifier" eventfd QEMU installs before start
	memSent  map[int]bool // per vhost_dev (queue pair): QEMU keeps one shadow table each
	inflight []byte       // SET_INFLIGHT_FD payload QEMU keeps across reconnects
	infFD    int
}

// Pipe returns a connected pair of unix stream sockets (front, back).
func Pipe() (*net.UnixConn, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	conv := func(fd int) (*net.UnixConn, error) {
		f := os.NewFile(uintptr(fd), "vhost-user")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			return nil, err
		}
		return c.(*net.UnixConn), nil
	}
	a, err := conv(fds[0])
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	b, err := conv(fds[1])
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

// NewFrontend wraps a connection to a back-end. mem and queues may be set later.
func NewFrontend(c *net.UnixConn, mem *GuestMemory, queues []*DriverQueue) (*Frontend, error) {
	masked, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &Frontend{conn: vhostuser.NewConn(c), raw: c, Mem: mem, Queues: queues, masked: masked, infFD: -1}, nil
}

// Dial connects to a listening back-end.
func Dial(path string, mem *GuestMemory, queues []*DriverQueue) (*Frontend, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	return NewFrontend(c, mem, queues)
}

// Reconnect replaces the connection (the same guest RAM and rings), as
// QEMU does with chardev reconnect=N. The old connection is closed.
func (f *Frontend) Reconnect(c *net.UnixConn) {
	f.raw.Close()
	f.conn = vhostuser.NewConn(c)
	f.raw = c
	f.memSent = nil
}

// Close closes the connection (the back-end sees EOF) and QEMU-held fds.
func (f *Frontend) Close() {
	f.raw.Close()
	unix.Close(f.masked)
	if f.infFD >= 0 {
		unix.Close(f.infFD)
		f.infFD = -1
	}
}

// Conn exposes the raw codec for malformed-message tests.
func (f *Frontend) Conn() *vhostuser.Conn { return f.conn }

func (f *Frontend) logf(format string, args ...any) {
	f.Log = append(f.Log, fmt.Sprintf(format, args...))
}

// Get sends a request that is always answered and returns the reply.
func (f *Frontend) Get(req vhostuser.Request, payload []byte) ([]byte, []int, error) {
	if err := f.conn.WriteRequest(req, 0, payload); err != nil {
		return nil, nil, err
	}
	return f.conn.ReadReply(req)
}

// GetU64 sends a GET_* request and decodes its u64 reply.
func (f *Frontend) GetU64(req vhostuser.Request) (uint64, error) {
	p, fds, err := f.Get(req, nil)
	closeAll(fds)
	if err != nil {
		return 0, err
	}
	if len(p) != 8 {
		return 0, fmt.Errorf("%v: reply size %d", req, len(p))
	}
	v := binary.LittleEndian.Uint64(p)
	f.logf("%v -> %#x", req, v)
	return v, nil
}

// Set sends a request without a mandatory reply. If needAck and REPLY_ACK
// is negotiated it sets NEED_REPLY and checks the ack.
func (f *Frontend) Set(req vhostuser.Request, needAck bool, payload []byte, fds ...int) error {
	var flags uint32
	ack := needAck && f.Proto&vhostuser.ProtoReplyAck != 0
	if ack {
		flags = vhostuser.FlagNeedReply
	}
	if err := f.conn.WriteRequest(req, flags, payload, fds...); err != nil {
		return err
	}
	if !ack {
		return nil
	}
	p, rfds, err := f.conn.ReadReply(req)
	closeAll(rfds)
	if err != nil {
		return err
	}
	if len(p) != 8 || binary.LittleEndian.Uint64(p) != 0 {
		return fmt.Errorf("%v: failure ack %x", req, p)
	}
	return nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func state(idx, num uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, idx)
	return binary.LittleEndian.AppendUint32(b, num)
}

// SetU64 sends a u64 request and logs it.
func (f *Frontend) SetU64(req vhostuser.Request, v uint64) error {
	f.logf("%v %#x", req, v)
	return f.Set(req, false, u64(v))
}

// VringFile sends SET_VRING_KICK/CALL/ERR with a dup of fd (fd < 0: no fd).
func (f *Frontend) VringFile(req vhostuser.Request, idx int, fd int) error {
	if fd < 0 {
		f.logf("%v idx%d nofd", req, idx)
		return f.Set(req, false, u64(uint64(idx)|vhostuser.VringNoFD))
	}
	d, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	f.logf("%v idx%d fd", req, idx)
	return f.Set(req, false, u64(uint64(idx)), d)
}

// Enable sends SET_VRING_ENABLE.
func (f *Frontend) Enable(idx int, on bool) error {
	var v uint32
	if on {
		v = 1
	}
	f.logf("SET_VRING_ENABLE idx%d=%d", idx, v)
	return f.Set(vhostuser.ReqSetVringEnable, false, state(uint32(idx), v))
}

// GetVringBase stops ring idx and returns its last avail idx.
func (f *Frontend) GetVringBase(idx int) (uint16, error) {
	p, fds, err := f.Get(vhostuser.ReqGetVringBase, state(uint32(idx), 0))
	closeAll(fds)
	if err != nil {
		return 0, err
	}
	if len(p) != 8 || binary.LittleEndian.Uint32(p) != uint32(idx) {
		return 0, fmt.Errorf("GET_VRING_BASE: bad reply %x", p)
	}
	v := binary.LittleEndian.Uint32(p[4:])
	f.logf("GET_VRING_BASE idx%d -> %d", idx, v)
	return uint16(v), nil
}

// negotiate is the start of every vhost_dev's init (its first four messages).
func (f *Frontend) negotiate(first bool) error {
	var err error
	if f.Features, err = f.GetU64(vhostuser.ReqGetFeatures); err != nil {
		return err
	}
	p, err := f.GetU64(vhostuser.ReqGetProtocolFeatures)
	if err != nil {
		return err
	}
	p &= qemuProtoMask
	if f.StripConfig {
		p &^= vhostuser.ProtoConfig
	}
	f.Proto = p
	if err := f.SetU64(vhostuser.ReqSetProtocolFeatures, p); err != nil {
		return err
	}
	if first && p&vhostuser.ProtoMQ != 0 {
		if f.QueueNum, err = f.GetU64(vhostuser.ReqGetQueueNum); err != nil {
			return err
		}
	}
	if p&vhostuser.ProtoConfigureMemSlots != 0 {
		if _, err := f.GetU64(vhostuser.ReqGetMaxMemSlots); err != nil {
			return err
		}
	}
	if !first {
		return nil
	}
	f.logf("SET_OWNER")
	return f.Set(vhostuser.ReqSetOwner, false, nil)
}

// NetInit replays QEMU 7.2's netdev init for pairs queue pairs:
// negotiation, SET_OWNER late, GET_FEATURES twice,
// masked call fds, and rings enabled before they exist.
func (f *Frontend) NetInit(pairs int) error {
	f.StripConfig = true
	for k := 0; k < pairs; k++ {
		if err := f.negotiate(k == 0); err != nil {
			return err
		}
		if _, err := f.GetU64(vhostuser.ReqGetFeatures); err != nil {
			return err
		}
		for _, idx := range []int{2 * k, 2*k + 1} {
			if err := f.VringFile(vhostuser.ReqSetVringCall, idx, f.masked); err != nil {
				return err
			}
			if err := f.VringFile(vhostuser.ReqSetVringErr, idx, f.masked); err != nil {
				return err
			}
		}
	}
	for i := 0; i < 2*pairs; i++ {
		if err := f.Enable(i, i < 2); err != nil {
			return err
		}
	}
	return nil
}

// sendMem sends the memory table for vhost_dev dev: ADD_MEM_REG per
// region with CONFIGURE_MEM_SLOTS (once per connection and vhost_dev: with
// several queue pairs every pair adds the same regions again), else
// SET_MEM_TABLE on every start.
func (f *Frontend) sendMem(dev int) error {
	if f.Proto&vhostuser.ProtoConfigureMemSlots != 0 {
		if f.memSent[dev] {
			return nil
		}
		for i := range f.Mem.Regions {
			p, fd := f.Mem.RegionPayload(i)
			f.logf("ADD_MEM_REG gpa=%#x size=%#x", f.Mem.Regions[i].GPA, f.Mem.Regions[i].Size)
			err := f.Set(vhostuser.ReqAddMemReg, true, p, fd)
			unix.Close(fd)
			if err != nil {
				return err
			}
		}
		if f.memSent == nil {
			f.memSent = map[int]bool{}
		}
		f.memSent[dev] = true
		return nil
	}
	p, fds := f.Mem.MemTablePayload()
	f.logf("SET_MEM_TABLE nregions=%d", len(fds))
	err := f.Set(vhostuser.ReqSetMemTable, true, p, fds...)
	closeAll(fds)
	return err
}

// RingSetup sends NUM, BASE, ADDR, KICK and the real CALL for one ring.
func (f *Frontend) RingSetup(q *DriverQueue, base uint16) error {
	idx := uint32(q.Index)
	f.logf("SET_VRING_NUM idx%d %d", idx, q.Size)
	if err := f.Set(vhostuser.ReqSetVringNum, false, state(idx, uint32(q.Size))); err != nil {
		return err
	}
	f.logf("SET_VRING_BASE idx%d %d", idx, base)
	if err := f.Set(vhostuser.ReqSetVringBase, false, state(idx, uint32(base))); err != nil {
		return err
	}
	a := binary.LittleEndian.AppendUint32(nil, idx)
	a = binary.LittleEndian.AppendUint32(a, 0)
	a = binary.LittleEndian.AppendUint64(a, f.Mem.UVA(q.DescGPA))
	a = binary.LittleEndian.AppendUint64(a, f.Mem.UVA(q.UsedGPA))
	a = binary.LittleEndian.AppendUint64(a, f.Mem.UVA(q.AvailGPA))
	a = binary.LittleEndian.AppendUint64(a, 0)
	f.logf("SET_VRING_ADDR idx%d", idx)
	if err := f.Set(vhostuser.ReqSetVringAddr, false, a); err != nil {
		return err
	}
	if err := f.VringFile(vhostuser.ReqSetVringKick, q.Index, q.KickFD); err != nil {
		return err
	}
	return f.VringFile(vhostuser.ReqSetVringCall, q.Index, q.CallFD)
}

// status does QEMU's read-modify-write of the device status: GET_STATUS,
// then SET_STATUS only if bits are missing (0 clears).
func (f *Frontend) status(v uint64) error {
	if f.Proto&vhostuser.ProtoStatus == 0 {
		return nil
	}
	cur, err := f.GetU64(vhostuser.ReqGetStatus)
	if err != nil {
		return err
	}
	if v != 0 && cur&v == v {
		return nil
	}
	return f.SetU64(vhostuser.ReqSetStatus, v)
}

// NetStart replays the guest driver's start as QEMU 7.2 sends it (notes
// §3.1 #13-#32, §3.2, and runs with queues=2 and with STATUS and
// CONFIGURE_MEM_SLOTS negotiated). On a fresh boot (bases nil) the
// driver's probe first repeats SET_VRING_ENABLE for every ring three times
// and for pair 0 once more; a reconnect (bases = the used idx of each
// ring) goes straight to the start. Then, per pair (each its own
// vhost_dev): SET_FEATURES, the status read-modify-write, the memory table
// (with CONFIGURE_MEM_SLOTS every pair adds the same regions) and ring
// setup; then status DRIVER_OK and, with several pairs, the final enables
// for activePairs.
func (f *Frontend) NetStart(acked uint64, activePairs int, bases []uint16) error {
	pairs := len(f.Queues) / 2
	if bases == nil {
		for r := 0; r < 3; r++ {
			for i := range f.Queues {
				if err := f.Enable(i, i < 2); err != nil {
					return err
				}
			}
		}
		for i := 0; i < 2; i++ {
			if err := f.Enable(i, true); err != nil {
				return err
			}
		}
	}
	for k := 0; k < pairs; k++ {
		if err := f.SetU64(vhostuser.ReqSetFeatures, acked); err != nil {
			return err
		}
		if err := f.status(8); err != nil {
			return err
		}
		if err := f.sendMem(k); err != nil {
			return err
		}
		for _, q := range f.Queues[2*k : 2*k+2] {
			var base uint16
			if bases != nil {
				base = bases[q.Index]
			}
			if err := f.RingSetup(q, base); err != nil {
				return err
			}
		}
	}
	if err := f.status(0xf); err != nil {
		return err
	}
	if pairs > 1 {
		for i := range f.Queues {
			if err := f.Enable(i, i < 2*activePairs); err != nil {
				return err
			}
		}
	}
	return nil
}

// NetStop replays the guest's poweroff: GET_VRING_BASE
// per ring, then the late SET_VRING_ENABLE 1s.
func (f *Frontend) NetStop() ([]uint16, error) {
	if err := f.status(0); err != nil {
		return nil, err
	}
	bases := make([]uint16, len(f.Queues))
	for i := range f.Queues {
		b, err := f.GetVringBase(i)
		if err != nil {
			return nil, err
		}
		bases[i] = b
	}
	for i := range f.Queues {
		if err := f.Enable(i, true); err != nil {
			return nil, err
		}
	}
	return bases, nil
}

// UsedBases returns each ring's used idx as QEMU reads it from guest
// memory after a back-end crash (the SET_VRING_BASE of a reconnect).
func (f *Frontend) UsedBases() []uint16 {
	b := make([]uint16, len(f.Queues))
	for i, q := range f.Queues {
		b[i] = q.UsedIdx()
	}
	return b
}

// BlkInit replays vhost-user-blk realize and returns the config bytes.
// configLen 0 replays a reconnect's init (no GET_CONFIG).
func (f *Frontend) BlkInit(configLen uint32) ([]byte, error) {
	if err := f.negotiate(true); err != nil {
		return nil, err
	}
	if _, err := f.GetU64(vhostuser.ReqGetFeatures); err != nil {
		return nil, err
	}
	if err := f.VringFile(vhostuser.ReqSetVringCall, 0, f.masked); err != nil {
		return nil, err
	}
	if err := f.VringFile(vhostuser.ReqSetVringErr, 0, f.masked); err != nil {
		return nil, err
	}
	if configLen == 0 { // a reconnect: QEMU does not read config again
		return nil, nil
	}
	p := make([]byte, 12+configLen)
	binary.LittleEndian.PutUint32(p[4:], configLen)
	r, fds, err := f.Get(vhostuser.ReqGetConfig, p)
	closeAll(fds)
	if err != nil {
		return nil, err
	}
	if len(r) != len(p) {
		return nil, fmt.Errorf("GET_CONFIG: reply %d bytes, want %d", len(r), len(p))
	}
	f.logf("GET_CONFIG offset=0 size=%d -> %d bytes", configLen, len(r))
	return r[12:], nil
}

// BlkStart replays a driver start (SeaBIOS or Linux):
// SET_FEATURES, GET_INFLIGHT_FD + SET_INFLIGHT_FD unless QEMU still holds a
// region (after a reconnect it re-sends the one it kept), the real call fd,
// SET_FEATURES again, memory, ring setup and enable.
func (f *Frontend) BlkStart(q *DriverQueue, acked uint64, base uint16) error {
	if err := f.SetU64(vhostuser.ReqSetFeatures, acked); err != nil {
		return err
	}
	if f.Proto&vhostuser.ProtoInflightSHMFD != 0 {
		if f.inflight == nil {
			req := make([]byte, 24)
			vhostuser.PutInflight(req, 0, 0, 1, q.Size)
			p, fds, err := f.Get(vhostuser.ReqGetInflightFD, req)
			if err != nil {
				return err
			}
			if len(p) != 24 || len(fds) != 1 {
				closeAll(fds)
				return fmt.Errorf("GET_INFLIGHT_FD: reply %d bytes, %d fds", len(p), len(fds))
			}
			f.logf("GET_INFLIGHT_FD num_queues=1 queue_size=%d -> mmap_size=%d", q.Size, vhostuser.InflightMsg(p).MmapSize())
			f.inflight, f.infFD = p, fds[0]
		}
		f.logf("SET_INFLIGHT_FD")
		if err := f.Set(vhostuser.ReqSetInflightFD, false, f.inflight, f.infFD); err != nil {
			return err
		}
	}
	if err := f.VringFile(vhostuser.ReqSetVringCall, 0, q.CallFD); err != nil {
		return err
	}
	if err := f.SetU64(vhostuser.ReqSetFeatures, acked); err != nil {
		return err
	}
	if err := f.sendMem(0); err != nil {
		return err
	}
	if err := f.RingSetup(q, base); err != nil {
		return err
	}
	return f.Enable(0, true)
}

// BlkReset replays a guest device reset: ENABLE 0,
// GET_VRING_BASE, and QEMU frees its inflight region.
func (f *Frontend) BlkReset() (uint16, error) {
	if err := f.Enable(0, false); err != nil {
		return 0, err
	}
	b, err := f.GetVringBase(0)
	if f.infFD >= 0 {
		unix.Close(f.infFD)
		f.infFD = -1
	}
	f.inflight = nil
	return b, err
}
