package vsock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"falconnic/internal/clock"
	"falconnic/vhostuser"
)

// Config configures one vhost-user-vsock device. The JSON tags let
// the daemon's config file carry it as is:
//
//	"vsock": [{"name": "vs0", "socket": "vs0.sock", "guest_cid": 3, "uds": "vs0.uds"}]
type Config struct {
	// Name identifies the device in status output.
	Name string `json:"name"`
	// Socket is the vhost-user socket QEMU's chardev uses.
	Socket string `json:"socket"`
	// GuestCID is the guest's CID (config space guest_cid), 3 or more.
	GuestCID uint64 `json:"guest_cid"`
	// UDS is the host unix socket of the hybrid bridge: host clients
	// connect here and write "CONNECT <port>\n"; guest connections to host
	// port P are bridged to "<UDS>_<P>". Empty: no host bridge (guest
	// connections get RST).
	UDS string `json:"uds,omitempty"`
	// Dial makes the daemon connect to QEMU's server socket instead of
	// listening (QEMU chardev server=on).
	Dial bool `json:"dial,omitempty"`
	// Clock times host-initiated connects and the re-dials of a NIC in
	// dial mode (nil: clock.Real).
	Clock clock.Clock `json:"-"`
}

// Errors of Config.Check.
var (
	ErrVsockCID    = errors.New("vsock: guest_cid must be in 3..0xfffffffe")
	ErrVsockSocket = errors.New("vsock: socket path required")
	ErrVsockPath   = errors.New("vsock: socket path too long for a unix socket")
)

// maxSunPath is sizeof(sockaddr_un.sun_path) minus the terminating NUL.
const maxSunPath = 107

// Check validates c: the CID range (virtio 1.2 §5.10.4: 0-2 are reserved,
// 0xffffffff is VMADDR_CID_ANY), and socket paths that fit sun_path,
// including UDS's "_<port>" suffix.
func (c *Config) Check() error {
	switch {
	case c.GuestCID < vsockMinGuestCID || c.GuestCID > vsockMaxGuestCID:
		return ErrVsockCID
	case c.Socket == "":
		return ErrVsockSocket
	case len(c.Socket) > maxSunPath || len(c.UDS)+len("_4294967295") > maxSunPath:
		return ErrVsockPath
	case c.UDS != "" && c.UDS == c.Socket:
		return fmt.Errorf("vsock: uds and socket are both %s", c.UDS)
	}
	return nil
}

// ResolvePaths makes relative Socket and UDS paths relative to dir (the
// config file's directory).
func (c *Config) ResolvePaths(dir string) {
	if c.Socket != "" && !filepath.IsAbs(c.Socket) {
		c.Socket = filepath.Join(dir, c.Socket)
	}
	if c.UDS != "" && !filepath.IsAbs(c.UDS) {
		c.UDS = filepath.Join(dir, c.UDS)
	}
}

// vsockConnectLineMax bounds "CONNECT <port>\n" (Firecracker's hybrid format).
const vsockConnectLineMax = 32

// vsockRxQueue and vsockTxQueue are the virtqueues the back-end serves;
// the event queue (2) stays in QEMU (hw/virtio/vhost-vsock-common.c).
const (
	vsockRxQueue = 0
	vsockTxQueue = 1
)

// Device is a vhost-user-vsock device (virtio 1.2 §5.10) bridged to host
// unix sockets the way Firecracker's hybrid vsock is. Create it with
// New, run Serve, stop with Close.
//
// Roles and layers:
//
//   - proto.go: the 44-byte virtio_vsock_hdr as a byte view, the op
//     table, and ParseHdr with one error (and counter) per cause.
//   - conn.go: vsockEngine, the sans-I/O connection state machine:
//     guest packets, host socket events and the clock in; packets for the
//     guest (fillRx) and host-socket actions (vsockAct) out.
//   - vsock.go (this file): the I/O. The vhost-user back-end serves rings 0
//     (rx) and 1 (tx); QEMU 7.2 keeps the event queue (2) itself. One
//     goroutine per ring, one reader and one writer per host socket, the
//     UDS acceptor and per-port dials.
//
// Host bridge: a client of UDS writes "CONNECT <port>\n"; the guest gets a
// REQUEST from host CID 2, an ephemeral port (from 2^30); on RESPONSE the
// client reads "OK <hostport>\n" and bytes flow; on RST, or no answer in
// 2 s, the client is closed. A guest REQUEST to CID 2 port P is bridged to
// the unix socket "<UDS>_<P>" (RST if nobody listens there).
//
// Connection states: connecting (host-initiated, REQUEST sent) or dialing
// (guest-initiated, dialing UDS_P) → established → gone (RST either way,
// or the close handshake: SHUTDOWN flags in each direction, then RST).
// Half-closes map to the host socket: guest SHUTDOWN(SEND) → CloseWrite
// once every byte reached the host; host EOF → SHUTDOWN(SEND) once every
// byte reached the guest.
//
// Credit (§5.10.6.3): we advertise buf_alloc = 256 KiB per connection and
// fwd_cnt = bytes written to the host socket; a guest that sends beyond it
// is reset. We never send more than buf_alloc - (tx_cnt - fwd_cnt) of the
// guest's; with no credit we send CREDIT_REQUEST once and wait.
//
// Threading and invariants: one mutex guards the engine and the socket
// table; nothing blocking runs under it (actions are channel wakes,
// closes, goroutine starts). A vhost-user session loss resets every
// connection (host sockets closed): the guest's rings, and so its view of
// them, are gone. Guest bytes are hostile: every drop has a counter in
// Counters, and nothing panics on them (FuzzVsockHdr).
//
// QEMU 7.2: the chardev must not use reconnect= (vhost-user-vsock realize
// does not wait for the connection and fails with "Failed to set msg
// fds"); CONFIG is required (guest_cid is read with GET_CONFIG). After a
// back-end drop QEMU accepts (or, with server=on, is given) a new
// connection but never re-initialises the device (checked with a real
// guest): the guest's vsock stays dead until QEMU restarts, and host
// CONNECTs time out. The device itself serves any new session from scratch.
type Device struct {
	cfg Config
	clk clock.Clock
	srv vhostuser.Server
	// Counters count every event and drop cause; they survive sessions.
	Counters Counters

	mu     sync.Mutex // guards eng, socks, ln, closed
	eng    *vsockEngine
	socks  map[uint64]*vsockSock
	acts   []vsockAct
	ln     *net.UnixListener
	closed bool
	rxWake chan struct{}
	stop   chan struct{} // closed by Close
	// pending are host clients still sending their CONNECT line.
	pending map[*net.UnixConn]struct{}
	wg      sync.WaitGroup
}

// vsockSock is one host unix socket bridged to a guest connection.
type vsockSock struct {
	id       uint64
	conn     *net.UnixConn
	greeting []byte // "OK <port>\n" for host-initiated connections
	wakeW    chan struct{}
	wakeR    chan struct{}
	done     chan struct{}
	once     sync.Once
	started  bool
	timer    clock.Timer
}

func (s *vsockSock) close() {
	s.once.Do(func() {
		close(s.done)
		s.conn.Close()
		if s.timer != nil {
			s.timer.Stop()
		}
	})
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// New checks cfg and builds the device (nothing is opened yet).
func New(cfg Config) (*Device, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	v := &Device{cfg: cfg, clk: cfg.Clock, socks: map[uint64]*vsockSock{}, rxWake: make(chan struct{}, 1),
		stop: make(chan struct{}), pending: map[*net.UnixConn]struct{}{}}
	if v.clk == nil {
		v.clk = clock.Real
	}
	v.eng = newVsockEngine(cfg.GuestCID, &v.Counters)
	v.srv = vhostuser.Server{Path: cfg.Socket, Dial: cfg.Dial, Device: vsockDevice{v}}
	return v, nil
}

// Serve listens on UDS and serves the vhost-user socket until ctx ends or
// Close is called. Sessions come and go (QEMU reconnects); each session
// loss resets every connection.
func (v *Device) Serve(ctx context.Context) error {
	if v.cfg.UDS != "" {
		if err := v.listenUDS(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-v.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if v.cfg.Dial {
		err := v.serveDial(ctx)
		v.Close()
		return err
	}
	err := v.serveListen(ctx)
	v.Close()
	return err
}

func (v *Device) serveListen(ctx context.Context) error {
	if fi, err := os.Lstat(v.cfg.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(v.cfg.Socket)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: v.cfg.Socket, Net: "unix"})
	if err != nil {
		return err
	}
	l.SetUnlinkOnClose(true)
	stop := context.AfterFunc(ctx, func() { l.Close(); v.srv.Disconnect() })
	defer stop()
	defer l.Close()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		// One front-end at a time: QEMU reconnects only after a drop.
		v.ServeConn(c)
	}
}

func (v *Device) serveDial(ctx context.Context) error {
	stop := context.AfterFunc(ctx, v.srv.Disconnect)
	defer stop()
	for ctx.Err() == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", v.cfg.Socket)
		if err != nil {
			retry := make(chan struct{})
			t := v.clk.AfterFunc(200*time.Millisecond, func() { close(retry) })
			select {
			case <-ctx.Done():
				t.Stop()
			case <-retry:
			}
			continue
		}
		v.ServeConn(c.(*net.UnixConn))
	}
	return nil
}

// ServeConn runs one vhost-user session on c. When it ends every vsock
// connection is reset: the guest's view of them is gone with the rings.
func (v *Device) ServeConn(c *net.UnixConn) error {
	err := v.srv.ServeConn(c)
	v.mu.Lock()
	v.eng.resetAll()
	v.runActs()
	v.mu.Unlock()
	return err
}

// SetTrace sends one line per vsock packet, connection state change and
// vhost-user message to f (nil: off). Call it before Serve.
func (v *Device) SetTrace(f func(string)) {
	v.mu.Lock()
	v.eng.trace = f
	v.mu.Unlock()
	v.srv.Trace = f
}

// Disconnect drops the current vhost-user session (tests, operators).
func (v *Device) Disconnect() { v.srv.Disconnect() }

// Close stops the UDS listener and closes every host socket. The
// vhost-user side stops when Serve's context ends.
func (v *Device) Close() error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	close(v.stop)
	if v.ln != nil {
		v.ln.Close()
	}
	for c := range v.pending {
		c.Close()
	}
	v.eng.resetAll()
	v.runActs()
	v.mu.Unlock()
	v.srv.Disconnect()
	v.wg.Wait()
	return nil
}

// listenUDS opens the hybrid socket for host-initiated connections.
func (v *Device) listenUDS() error {
	if fi, err := os.Lstat(v.cfg.UDS); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(v.cfg.UDS)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: v.cfg.UDS, Net: "unix"})
	if err != nil {
		return err
	}
	l.SetUnlinkOnClose(true)
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		l.Close()
		return net.ErrClosed
	}
	v.ln = l
	v.mu.Unlock()
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			v.wg.Add(1)
			go func() {
				defer v.wg.Done()
				v.hostClient(c)
			}()
		}
	}()
	return nil
}

// parseConnectLine parses "CONNECT <port>\n" (decimal u32, no sign, no
// spaces around the number).
func parseConnectLine(line []byte) (uint32, bool) {
	const prefix = "CONNECT "
	if len(line) < len(prefix)+2 || string(line[:len(prefix)]) != prefix || line[len(line)-1] != '\n' {
		return 0, false
	}
	num := line[len(prefix) : len(line)-1]
	for _, ch := range num {
		if ch < '0' || ch > '9' {
			return 0, false
		}
	}
	p, err := strconv.ParseUint(string(num), 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(p), true
}

// hostClient reads a host client's CONNECT line (byte by byte: bytes after
// the newline belong to the stream) and starts the connection.
func (v *Device) hostClient(c *net.UnixConn) {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		c.Close()
		return
	}
	v.pending[c] = struct{}{}
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		delete(v.pending, c)
		v.mu.Unlock()
	}()
	var line [vsockConnectLineMax]byte
	n := 0
	for {
		if n == len(line) {
			v.Counters.HostBadConnect.Inc()
			c.Close()
			return
		}
		m, err := c.Read(line[n : n+1])
		if err != nil {
			v.Counters.HostBadConnect.Inc()
			c.Close()
			return
		}
		n += m
		if n > 0 && line[n-1] == '\n' {
			break
		}
	}
	port, ok := parseConnectLine(line[:n])
	if !ok {
		v.Counters.HostBadConnect.Inc()
		c.Close()
		return
	}
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		c.Close()
		return
	}
	id := v.eng.newID()
	s := v.newSock(id, c)
	if _, ok := v.eng.hostConnect(id, port, v.clk.Now()); !ok {
		delete(v.socks, id)
		v.mu.Unlock()
		s.close()
		return
	}
	s.timer = v.clk.AfterFunc(vsockConnectTimeout, func() {
		v.mu.Lock()
		v.eng.onTimer(v.clk.Now())
		v.runActs()
		v.mu.Unlock()
	})
	v.mu.Unlock()
	wake(v.rxWake)
}

func (v *Device) newSock(id uint64, c *net.UnixConn) *vsockSock {
	s := &vsockSock{id: id, conn: c, wakeW: make(chan struct{}, 1), wakeR: make(chan struct{}, 1), done: make(chan struct{})}
	v.socks[id] = s
	return s
}

// runActs carries out the engine's host-side actions. Called with v.mu
// held; nothing here blocks.
func (v *Device) runActs() {
	v.acts = v.eng.takeActs(v.acts)
	for _, a := range v.acts {
		s := v.socks[a.id]
		switch a.kind {
		case actDial:
			if v.closed {
				continue // Close is waiting for the goroutines: start none
			}
			v.wg.Add(1)
			go v.dial(a.id, a.port)
		case actAccept:
			if s != nil {
				s.greeting = fmt.Appendf(nil, "OK %d\n", a.port)
				v.startPumps(s)
			}
		case actClose:
			if s != nil {
				delete(v.socks, a.id)
				s.close()
			}
		case actCloseWrite:
			if s != nil {
				s.conn.CloseWrite()
			}
		case actWakeWriter:
			if s != nil {
				wake(s.wakeW)
			}
		case actWakeReader:
			if s != nil {
				if !s.started {
					v.startPumps(s)
				}
				wake(s.wakeR)
			}
		}
	}
}

// dial connects UDS_<port> for a guest REQUEST.
func (v *Device) dial(id uint64, port uint32) {
	defer v.wg.Done()
	path := fmt.Sprintf("%s_%d", v.cfg.UDS, port)
	var c *net.UnixConn
	var err error
	if v.cfg.UDS == "" {
		err = errors.New("vsock: no UDS configured")
	} else {
		c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	}
	v.mu.Lock()
	if err == nil && !v.closed {
		v.newSock(id, c)
	} else if c != nil {
		c.Close()
		err = net.ErrClosed
	}
	v.eng.dialDone(id, err == nil)
	v.runActs()
	v.mu.Unlock()
	wake(v.rxWake)
}

// startPumps starts the reader and writer of an established connection.
func (v *Device) startPumps(s *vsockSock) {
	if s.started || v.closed {
		return
	}
	s.started = true
	if s.timer != nil {
		s.timer.Stop()
	}
	v.wg.Add(2)
	go v.reader(s)
	go v.writer(s)
}

// reader moves host bytes to the engine, as much as the engine has room for.
func (v *Device) reader(s *vsockSock) {
	defer v.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		v.mu.Lock()
		room := v.eng.hostRoom(s.id)
		v.mu.Unlock()
		if room == 0 {
			select {
			case <-s.done:
				return
			case <-s.wakeR:
				continue
			}
		}
		n, err := s.conn.Read(buf[:min(room, len(buf))])
		select {
		case <-s.done:
			return
		default:
		}
		v.mu.Lock()
		if n > 0 {
			v.eng.hostRead(s.id, buf[:n])
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
				v.mu.Unlock()
				return
			}
			if isEOF(err) {
				v.eng.hostEOF(s.id)
			} else {
				v.eng.hostError(s.id)
			}
			v.runActs()
			v.mu.Unlock()
			wake(v.rxWake)
			return
		}
		v.runActs()
		v.mu.Unlock()
		wake(v.rxWake)
	}
}

// writer moves guest bytes to the host socket.
func (v *Device) writer(s *vsockSock) {
	defer v.wg.Done()
	if len(s.greeting) > 0 {
		if _, err := s.conn.Write(s.greeting); err != nil {
			v.mu.Lock()
			v.eng.hostError(s.id)
			v.runActs()
			v.mu.Unlock()
			wake(v.rxWake)
			return
		}
	}
	buf := make([]byte, 64<<10)
	for {
		v.mu.Lock()
		n := v.eng.peekToHost(s.id, buf)
		v.mu.Unlock()
		if n == 0 {
			select {
			case <-s.done:
				return
			case <-s.wakeW:
				continue
			}
		}
		w, err := s.conn.Write(buf[:n])
		v.mu.Lock()
		if err != nil {
			select {
			case <-s.done:
			default:
				v.eng.hostError(s.id)
				v.runActs()
			}
			v.mu.Unlock()
			wake(v.rxWake)
			return
		}
		v.eng.hostWrote(s.id, w)
		v.runActs()
		v.mu.Unlock()
		wake(v.rxWake)
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// vsockDevice is the vhostuser.Device face of Device.
type vsockDevice struct{ v *Device }

func (d vsockDevice) Features() uint64 {
	return vhostuser.FeatureVersion1 | vhostuser.FeatureIndirectDesc | vhostuser.FeatureEventIdx
}

// ProtocolFeatures: QEMU 7.2 requires CONFIG for vhost-user-vsock
// (hw/virtio/vhost-user-vsock.c).
func (d vsockDevice) ProtocolFeatures() uint64 { return vhostuser.ProtoConfig }
func (d vsockDevice) NumQueues() int           { return 2 }
func (d vsockDevice) QueueNum() uint64         { return 2 }
func (d vsockDevice) SetFeatures(uint64)       {}

// GetConfig serves struct virtio_vsock_config { le64 guest_cid } (virtio 1.2 §5.10.4).
func (d vsockDevice) GetConfig(offset, size uint32) ([]byte, error) {
	var cfg [8]byte
	binary.LittleEndian.PutUint64(cfg[:], d.v.cfg.GuestCID)
	if uint64(offset)+uint64(size) > uint64(len(cfg)) {
		d.v.Counters.BadConfigAccess.Inc()
		return nil, vhostuser.ErrBadPayload
	}
	return append([]byte(nil), cfg[offset:offset+size]...), nil
}

// SetConfig: the vsock config space is read-only.
func (d vsockDevice) SetConfig(offset uint32, data []byte) error {
	d.v.Counters.BadConfigAccess.Inc()
	return vhostuser.ErrBadPayload
}

func (d vsockDevice) RunQueue(q *vhostuser.Queue) {
	switch q.Index() {
	case vsockRxQueue:
		d.v.runRx(q)
	case vsockTxQueue:
		d.v.runTx(q)
	default:
		<-q.Done()
	}
}

// runRx fills guest RX buffers with pending packets.
func (v *Device) runRx(q *vhostuser.Queue) {
	var ch vhostuser.Chain
	for {
		for {
			v.mu.Lock()
			if !v.eng.hasRx() {
				v.mu.Unlock()
				break
			}
			if !q.Pop(&ch) {
				v.mu.Unlock()
				break
			}
			var n uint32
			if ch.ReadLen != 0 {
				v.Counters.RxChainReadable.Inc()
			} else {
				n = v.eng.fillRx(ch.Bufs, ch.WriteLen)
				v.runActs()
			}
			v.mu.Unlock()
			q.Push(ch.Head, n)
		}
		q.Notify()
		select {
		case <-q.Done():
			return
		case <-q.Wake():
		case <-v.rxWake:
		}
	}
}

// runTx takes the guest's packets.
func (v *Device) runTx(q *vhostuser.Queue) {
	var ch vhostuser.Chain
	scratch := make([]byte, VsockHdrLen+vsockMaxPayload)
	for {
		popped := false
		for q.Pop(&ch) {
			popped = true
			pkt, ok := v.gather(&ch, scratch)
			if ok {
				v.mu.Lock()
				v.eng.guestPacket(pkt, v.clk.Now())
				v.runActs()
				v.mu.Unlock()
			}
			q.Push(ch.Head, 0)
		}
		q.Notify()
		if popped {
			wake(v.rxWake)
		}
		select {
		case <-q.Done():
			return
		case <-q.Wake():
		}
	}
}

// gather returns a TX chain's readable bytes, contiguous (in place when the
// chain is one buffer). Bad chain shapes are counted.
func (v *Device) gather(ch *vhostuser.Chain, scratch []byte) ([]byte, bool) {
	if ch.WriteLen != 0 {
		v.Counters.TxChainWritable.Inc()
		return nil, false
	}
	if ch.ReadLen > uint64(len(scratch)) {
		v.Counters.TxChainTooBig.Inc()
		return nil, false
	}
	if len(ch.Bufs) == 1 {
		return ch.Bufs[0].Data, true
	}
	n := 0
	for _, b := range ch.Bufs {
		n += copy(scratch[n:], b.Data)
	}
	return scratch[:n], true
}

// ConnStatus is one connection in Status.
type ConnStatus struct {
	GuestPort    uint32 `json:"guest_port"`
	HostPort     uint32 `json:"host_port"`
	State        string `json:"state"`
	RxCnt        uint32 `json:"rx_cnt"`
	FwdCnt       uint32 `json:"fwd_cnt"`
	TxCnt        uint32 `json:"tx_cnt"`
	PeerBufAlloc uint32 `json:"peer_buf_alloc"`
	PeerFwdCnt   uint32 `json:"peer_fwd_cnt"`
	ToHost       int    `json:"to_host_bytes"`
	ToGuest      int    `json:"to_guest_bytes"`
	GuestShut    uint32 `json:"guest_shutdown"`
	HostEOF      bool   `json:"host_eof"`
}

// Status is a JSON-friendly snapshot of the device.
type Status struct {
	Name        string                  `json:"name"`
	GuestCID    uint64                  `json:"guest_cid"`
	Socket      string                  `json:"socket"`
	UDS         string                  `json:"uds"`
	Session     vhostuser.SessionStatus `json:"session"`
	Connections []ConnStatus            `json:"connections"`
	Counters    map[string]uint64       `json:"counters"`
	Backend     map[string]uint64       `json:"backend_counters"`
}

// Name returns the device's name from its config.
func (v *Device) Name() string { return v.cfg.Name }

// BackendCounters returns the vhost-user back-end's counters.
func (v *Device) BackendCounters() *vhostuser.Counters { return &v.srv.Counters }

// StatusJSON is Status for the daemon's status table.
func (v *Device) StatusJSON() any { return v.Status() }

// Status returns a snapshot; safe from any goroutine.
func (v *Device) Status() Status {
	st := Status{
		Name: v.cfg.Name, GuestCID: v.cfg.GuestCID, Socket: v.cfg.Socket, UDS: v.cfg.UDS,
		Session:  v.srv.Status(),
		Counters: v.Counters.Set().Snapshot(),
		Backend:  v.srv.Counters.Set().Snapshot(),
	}
	v.mu.Lock()
	for _, c := range v.eng.conns {
		st.Connections = append(st.Connections, ConnStatus{
			GuestPort: c.key.guestPort, HostPort: c.key.hostPort, State: c.state.String(),
			RxCnt: c.rxCnt, FwdCnt: c.fwdCnt, TxCnt: c.txCnt,
			PeerBufAlloc: c.peerBufAlloc, PeerFwdCnt: c.peerFwdCnt,
			ToHost: c.toHost.Len(), ToGuest: c.toGuest.Len(),
			GuestShut: c.guestShut, HostEOF: c.hostEOF,
		})
	}
	v.mu.Unlock()
	sort.Slice(st.Connections, func(i, j int) bool {
		a, b := st.Connections[i], st.Connections[j]
		if a.HostPort != b.HostPort {
			return a.HostPort < b.HostPort
		}
		return a.GuestPort < b.GuestPort
	})
	return st
}
