package fabric

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"falconnic/device/l2"
	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// Fabric limits.
const (
	MaxPaths      = 16 // most UDP source ports (paths) one fabric port uses
	fabricReadBuf = 4 << 20
)

// Fabric errors.
var (
	ErrUnknownPeer = errors.New("fabric: not a configured peer")
	ErrTooBig      = errors.New("fabric: payload too big for one datagram")
	ErrBadKind     = errors.New("fabric: invalid payload kind")
	ErrClosed      = errors.New("fabric: closed")
)

// Options configures a Fabric. Zero fields take defaults.
type Options struct {
	// Listen is the local UDP address. Port 0 picks a free one.
	Listen netip.AddrPort
	// Peers are the other daemons' listen addresses.
	Peers []netip.AddrPort
	// Paths is how many UDP source ports this daemon sends from: path i
	// uses port Listen.Port()+i, and a datagram with flow label f takes
	// path f % Paths. Every daemon of one fabric must use the same Paths,
	// because a peer is recognised by its address and that port range.
	// Default 1.
	Paths int
	// Clock drives MAC aging and the reorder hold time; default clock.Real.
	Clock clock.Clock
	// MACAge and MaxMACs size the table of which peer holds which MAC.
	MACAge  time.Duration
	MaxMACs int
	// Impair injects seeded loss and reordering on egress.
	Impair Impairment
	// Logger receives fabric events; default slog.Default().
	Logger *slog.Logger
	// NoOffload turns UDP GSO and GRO off: every datagram is its own
	// send and receive in the kernel (batched by sendmmsg and recvmmsg
	// still). Default: on where the kernel offers them.
	NoOffload bool
}

// Receiver takes datagrams of one kind from the fabric. from is the
// peer's configured address (send replies there); payload is valid only
// during the call. Receive runs on the fabric's read goroutine and must not
// block long.
type Receiver interface {
	ReceiveFabric(from netip.AddrPort, flow uint32, payload []byte)
}

// Fabric is the switch port that reaches other daemons over UDP: a full
// mesh of peers, each datagram carrying one fabric header (see the wire
// format above Magic) and one payload.
//
// For Ethernet it behaves like a switch port towards a set of peers: it
// learns which peer holds which source MAC (with aging) and sends known
// unicast to that peer, everything else to every peer. Frames received from
// the fabric go to the local switch only (split horizon), so a full mesh has
// no loops. Other kinds (Falcon packets, connection-manager messages) are
// sent with Send or a Link and received by the Receiver
// registered with Handle.
//
// Everything received is hostile: Decode checks each datagram, and
// every drop is counted by cause. Datagrams from addresses that are not
// configured peers are dropped.
type Fabric struct {
	opts  Options
	log   *slog.Logger
	conns []*net.UDPConn // conns[i] sends path i; conns[0] is Listen
	raw   []rawConn      // raw[i] is conns[i]'s, for sendmmsg and recvmmsg
	v6    bool           // the sockets are IPv6 (peers' IPv4 addresses are v4-mapped)
	gso   atomic.Bool    // the kernel takes UDP GSO sends (UDP_SEGMENT)
	local netip.AddrPort

	peerMu sync.Mutex // serialises AddPeer
	peers  atomic.Pointer[peerSet]
	macs   *macTable[fabricPeer]

	receivers [numKinds]atomic.Pointer[receiverBox]
	sink      atomic.Pointer[sinkBox] // where Ethernet frames from the fabric go
	imp       atomic.Pointer[impairer]
	bufs      sync.Pool // *[]byte of HeaderLen+MaxPayload

	tap atomic.Pointer[Tap] // nil: nobody captures

	c      Counters
	drops  [numFabricDrops]stats.Counter
	counts stats.Set

	closeOnce sync.Once
	closed    atomic.Bool
}

type receiverBox struct{ r Receiver }

// Counters are the fabric port's counters (receive drops by cause are
// kept in the drop table and exported in the same Set).
type Counters struct {
	RxDatagrams     stats.Counter
	RxBytes         stats.Counter
	RxReadError     stats.Counter
	TxDatagrams     stats.Counter
	TxBytes         stats.Counter
	TxFlooded       stats.Counter
	TxTooBig        stats.Counter
	TxNoPeer        stats.Counter
	TxBadKind       stats.Counter
	TxControl       stats.Counter
	TxRunt          stats.Counter
	TxError         stats.Counter
	TxImpairDrop    stats.Counter
	TxImpairReorder stats.Counter
	TxBatches       stats.Counter
	TxShort         stats.Counter
	TxAgain         stats.Counter
	TxStallDrop     stats.Counter
	TxGSO           stats.Counter
	TxGSOOff        stats.Counter
	RxBatches       stats.Counter
	RxGRO           stats.Counter
	macCounters
}

// Tap sees every datagram the fabric sends (out, before the egress
// impairment: what this host put on the wire) and receives (before any
// check) for a capture: local and remote are the UDP addresses, origin
// the MAC of the NIC whose Falcon packet it is when the sender knows it
// (Link), zero otherwise. datagram is valid only during the call.
type Tap func(out bool, origin [6]byte, local, remote netip.AddrPort, datagram []byte)

// SetTap installs t (nil removes it).
func (f *Fabric) SetTap(t Tap) {
	if t == nil {
		f.tap.Store(nil)
		return
	}
	f.tap.Store(&t)
}

// fabricPeer is one other daemon.
type fabricPeer struct {
	addr   netip.AddrPort
	sa     rawSockaddr // addr for sendmmsg
	saLen  uint32      // 0: addr cannot be reached from the fabric's sockets
	c      peerCounters
	heard  atomic.Bool  // a valid datagram has arrived from this peer
	lastRx atomic.Int64 // clock.Time of the latest valid datagram
}

type peerCounters struct {
	RxDatagrams, RxBytes, TxDatagrams, TxBytes stats.Counter
}

// set lists a peer's counters with help text.
func (c *peerCounters) set() stats.Set {
	return stats.Set{
		{Name: "rx_datagrams", Help: "valid datagrams received from the peer", Counter: &c.RxDatagrams},
		{Name: "rx_bytes", Help: "bytes of valid datagrams received from the peer", Counter: &c.RxBytes},
		{Name: "tx_datagrams", Help: "datagrams sent to the peer (before the impairment, if any)", Counter: &c.TxDatagrams},
		{Name: "tx_bytes", Help: "bytes of datagrams sent to the peer", Counter: &c.TxBytes},
	}
}

// peerSet is an immutable snapshot of the peers (copy-on-write).
type peerSet struct {
	list   []*fabricPeer
	byAddr map[netip.AddrPort]*fabricPeer
	byIP   map[netip.Addr][]*fabricPeer
}

// New binds the fabric's UDP sockets. Call Run to receive.
func New(opts Options) (*Fabric, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Paths == 0 {
		opts.Paths = 1
	}
	if opts.Paths < 1 || opts.Paths > MaxPaths {
		return nil, fmt.Errorf("fabric: paths %d out of range 1..%d", opts.Paths, MaxPaths)
	}
	if opts.MACAge <= 0 {
		opts.MACAge = DefaultMACAge
	}
	if opts.MaxMACs <= 0 {
		opts.MaxMACs = DefaultMaxMACs
	}
	if !opts.Listen.Addr().IsValid() {
		return nil, fmt.Errorf("fabric: listen address %q is not an IP:port", opts.Listen)
	}
	imp, err := newImpairer(opts.Impair, opts.Clock)
	if err != nil {
		return nil, err
	}
	f := &Fabric{opts: opts, log: opts.Logger}
	f.macs = newMACTable[fabricPeer](opts.MACAge, opts.MaxMACs, &f.c.macCounters)
	f.peers.Store(&peerSet{byAddr: map[netip.AddrPort]*fabricPeer{}, byIP: map[netip.Addr][]*fabricPeer{}})
	f.bufs.New = func() any {
		b := make([]byte, HeaderLen+MaxPayload)
		return &b
	}
	f.imp.Store(imp)
	f.counts = f.counterSet()
	f.conns, err = listenPaths(opts.Listen.Addr().Unmap(), opts.Listen.Port(), opts.Paths)
	if err != nil {
		return nil, err
	}
	if f.raw, err = rawConns(f.conns); err != nil {
		f.Close()
		return nil, err
	}
	f.local = f.conns[0].LocalAddr().(*net.UDPAddr).AddrPort()
	f.v6 = !f.local.Addr().Is4()
	if !opts.NoOffload {
		f.gso.Store(setOffload(f.raw))
	}
	f.local = netip.AddrPortFrom(f.local.Addr().Unmap(), f.local.Port())
	for _, p := range opts.Peers {
		if err := f.AddPeer(p); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

func (f *Fabric) counterSet() stats.Set {
	c := &f.c
	set := stats.Set{
		{Name: "rx_datagrams", Help: "datagrams read from the fabric sockets", Counter: &c.RxDatagrams},
		{Name: "rx_bytes", Help: "bytes read from the fabric sockets", Counter: &c.RxBytes},
		{Name: "rx_read_error", Help: "socket read errors", Counter: &c.RxReadError},
		{Name: "tx_datagrams", Help: "datagrams written to the fabric", Counter: &c.TxDatagrams},
		{Name: "tx_bytes", Help: "bytes written to the fabric", Counter: &c.TxBytes},
		{Name: "tx_flooded", Help: "Ethernet frames sent to every peer (group or unknown destination)", Counter: &c.TxFlooded},
		{Name: "tx_too_big", Help: "sends refused: payload larger than one datagram", Counter: &c.TxTooBig},
		{Name: "tx_no_peer", Help: "sends refused: destination is not a configured peer", Counter: &c.TxNoPeer},
		{Name: "tx_bad_kind", Help: "sends refused: invalid payload kind", Counter: &c.TxBadKind},
		{Name: "tx_control", Help: "Ethernet frames not sent: control-channel EtherType never crosses the fabric", Counter: &c.TxControl},
		{Name: "tx_runt", Help: "Ethernet frames not sent: shorter than an Ethernet header", Counter: &c.TxRunt},
		{Name: "tx_error", Help: "socket write errors", Counter: &c.TxError},
		{Name: "tx_impair_drop", Help: "datagrams dropped on purpose by the loss impairment", Counter: &c.TxImpairDrop},
		{Name: "tx_impair_reorder", Help: "datagrams held back by the reorder impairment", Counter: &c.TxImpairReorder},
		{Name: "tx_batches", Help: "sendmmsg calls that sent at least one datagram (Outbox)", Counter: &c.TxBatches},
		{Name: "tx_short", Help: "datagrams the kernel sent only part of", Counter: &c.TxShort},
		{Name: "tx_again", Help: "sends that found the socket's send buffer full (EAGAIN)", Counter: &c.TxAgain},
		{Name: "tx_stall_drop", Help: "datagrams dropped: the socket's send buffer stayed full for the stall bound", Counter: &c.TxStallDrop},
		{Name: "tx_gso", Help: "UDP GSO sends (several datagrams of one size to one peer in one send)", Counter: &c.TxGSO},
		{Name: "tx_gso_off", Help: "times the kernel refused a UDP GSO send and GSO was turned off", Counter: &c.TxGSOOff},
		{Name: "rx_gro", Help: "coalesced receives (UDP GRO) split into their datagrams", Counter: &c.RxGRO},
		{Name: "rx_batches", Help: "recvmmsg calls that returned datagrams", Counter: &c.RxBatches},
	}
	for i := range f.drops {
		set = append(set, stats.Desc{Name: fabricDrops[i].name, Help: fabricDrops[i].help, Counter: &f.drops[i]})
	}
	return append(set, c.macCounters.set("")...)
}

// listenPaths binds paths UDP sockets on consecutive ports starting at
// port (or at a free port when port is 0).
func listenPaths(ip netip.Addr, port uint16, paths int) ([]*net.UDPConn, error) {
	network := "udp6"
	if ip.Is4() {
		network = "udp4"
	}
	var lastErr error
	for range 32 {
		c0, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, port)))
		if err != nil {
			return nil, fmt.Errorf("fabric: listen: %w", err)
		}
		base := c0.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		conns := []*net.UDPConn{c0}
		for i := 1; i < paths && lastErr == nil; i++ {
			if int(base)+i > 65535 {
				lastErr = fmt.Errorf("fabric: path ports %d..%d exceed 65535", base, int(base)+paths-1)
				break
			}
			c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, base+uint16(i))))
			if err != nil {
				lastErr = fmt.Errorf("fabric: listen for path %d: %w", i, err)
				break
			}
			conns = append(conns, c)
		}
		if len(conns) == paths {
			for _, c := range conns {
				_ = c.SetReadBuffer(fabricReadBuf) // best effort
				_ = c.SetWriteBuffer(fabricReadBuf)
			}
			return conns, nil
		}
		for _, c := range conns {
			c.Close()
		}
		if port != 0 {
			return nil, lastErr
		}
		lastErr = nil // a free base port's neighbours were taken: try another
	}
	return nil, fmt.Errorf("fabric: no run of %d free UDP ports found", paths)
}

// LocalAddr returns the address peers send to.
func (f *Fabric) LocalAddr() netip.AddrPort { return f.local }

// Paths returns how many UDP source ports the fabric sends from.
func (f *Fabric) Paths() int { return f.opts.Paths }

// Counters returns the fabric's counter table.
func (f *Fabric) Counters() stats.Set { return f.counts }

// AddPeer adds a daemon listening at addr to the mesh. Adding a known peer
// again does nothing.
func (f *Fabric) AddPeer(addr netip.AddrPort) error {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	if !addr.Addr().IsValid() || addr.Port() == 0 {
		return fmt.Errorf("fabric: peer %q is not an IP:port", addr)
	}
	f.peerMu.Lock()
	defer f.peerMu.Unlock()
	old := f.peers.Load()
	if old.byAddr[addr] != nil {
		return nil
	}
	paths := f.opts.Paths
	for _, q := range old.byIP[addr.Addr()] {
		if d := int(addr.Port()) - int(q.addr.Port()); d > -paths && d < paths {
			return fmt.Errorf("fabric: peer %v's ports overlap peer %v's (%d paths each)", addr, q.addr, paths)
		}
	}
	if f.local.IsValid() && addr.Addr() == f.local.Addr() {
		if d := int(addr.Port()) - int(f.local.Port()); d > -paths && d < paths {
			return fmt.Errorf("fabric: peer %v overlaps this daemon's own ports", addr)
		}
	}
	p := &fabricPeer{addr: addr}
	p.saLen = putSockaddr(&p.sa, addr, f.v6)
	next := &peerSet{
		list:   append(append([]*fabricPeer(nil), old.list...), p),
		byAddr: make(map[netip.AddrPort]*fabricPeer, len(old.byAddr)+1),
		byIP:   make(map[netip.Addr][]*fabricPeer, len(old.byIP)+1),
	}
	for _, q := range next.list {
		next.byAddr[q.addr] = q
		next.byIP[q.addr.Addr()] = append(next.byIP[q.addr.Addr()], q)
	}
	f.peers.Store(next)
	return nil
}

// peerFrom returns the peer that sends from src: same IP, source port in
// the peer's path range.
func (f *Fabric) peerFrom(src netip.AddrPort) *fabricPeer {
	paths := f.opts.Paths
	port := int(src.Port())
	for _, p := range f.peers.Load().byIP[src.Addr().Unmap()] {
		if base := int(p.addr.Port()); port >= base && port < base+paths {
			return p
		}
	}
	return nil
}

// Handle registers r as the receiver of datagrams of kind k (replacing any
// earlier one; nil unregisters). Ethernet frames always go to the switch
// (SetFrameSink), so k must not be KindEthernet.
func (f *Fabric) Handle(k Kind, r Receiver) error {
	if !k.valid() || k == KindEthernet {
		return fmt.Errorf("%w: %v", ErrBadKind, k)
	}
	if r == nil {
		f.receivers[k].Store(nil)
	} else {
		f.receivers[k].Store(&receiverBox{r: r})
	}
	return nil
}

// SetFrameSink sets where Ethernet frames received from the fabric go: the
// fabric's switch port.
func (f *Fabric) SetFrameSink(s l2.Sink) {
	if s == nil {
		f.sink.Store(nil)
		return
	}
	f.sink.Store(&sinkBox{s: s})
}

// SetImpairment replaces the egress impairment (a zero Impairment turns it
// off). A datagram held back for reordering is sent first.
func (f *Fabric) SetImpairment(im Impairment) error {
	next, err := newImpairer(im, f.opts.Clock)
	if err != nil {
		return err
	}
	if old := f.imp.Swap(next); old != nil {
		old.release(f)
	}
	return nil
}

// Impairment returns the current egress impairment.
func (f *Fabric) Impairment() Impairment {
	if im := f.imp.Load(); im != nil {
		return im.cfg
	}
	return Impairment{}
}

// Run reads datagrams until ctx is done or Close is called, then closes the
// sockets. It returns nil after a normal shutdown.
func (f *Fabric) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for i, c := range f.conns {
		wg.Add(1)
		r := newRxRing()
		go func() {
			defer wg.Done()
			f.readLoop(c, f.raw[i], r)
		}()
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	wg.Wait()
	stop()
	return nil
}

// Close closes the sockets; Run returns. It is safe to call more than once.
func (f *Fabric) Close() error {
	f.closeOnce.Do(func() {
		f.closed.Store(true)
		if im := f.imp.Load(); im != nil {
			im.release(f)
		}
		for _, c := range f.conns {
			c.Close()
		}
	})
	return nil
}

// receive handles one datagram from src.
func (f *Fabric) receive(src netip.AddrPort, b []byte) {
	f.c.RxDatagrams.Inc()
	f.c.RxBytes.Add(uint64(len(b)))
	p := f.peerFrom(src)
	if p == nil {
		f.drops[dropUnknownPeer].Inc()
		return
	}
	h, payload, cause := decodeFabric(b)
	if cause != dropNone {
		f.drops[cause].Inc()
		return
	}
	p.c.RxDatagrams.Inc()
	p.c.RxBytes.Add(uint64(len(b)))
	p.lastRx.Store(int64(f.opts.Clock.Now()))
	if !p.heard.Load() && !p.heard.Swap(true) {
		f.log.Info("fabric peer heard from", "peer", p.addr)
	}
	k := h.Kind()
	if k == KindEthernet {
		f.receiveEthernet(p, payload)
		return
	}
	box := f.receivers[k].Load()
	if box == nil {
		f.drops[dropNoReceiver].Inc()
		return
	}
	f.drops[dropNone].Inc()
	box.r.ReceiveFabric(p.addr, h.FlowLabel(), payload)
}

func (f *Fabric) receiveEthernet(p *fabricPeer, frame []byte) {
	if isControlFrame(frame) {
		f.drops[dropControl].Inc()
		return
	}
	box := f.sink.Load()
	if box == nil {
		f.drops[dropNoReceiver].Inc()
		return
	}
	if src := ethAddrAt(frame, 6); !src.group() {
		f.macs.learn(src, p, f.opts.Clock.Now())
	}
	f.drops[dropNone].Inc()
	box.s.Deliver(frame)
}

// Deliver sends an Ethernet frame leaving the local switch to the peer that
// holds its destination, or to every peer. It makes Fabric a l2.Sink.
func (f *Fabric) Deliver(frame []byte) {
	if len(frame) < ethHeaderLen {
		f.c.TxRunt.Inc()
		return
	}
	if isControlFrame(frame) {
		f.c.TxControl.Inc()
		return
	}
	flow := ethFlow(frame)
	if dst := ethAddrAt(frame, 0); !dst.group() {
		if p := f.macs.lookup(dst, f.opts.Clock.Now()); p != nil {
			f.sendPeer(p, KindEthernet, flow, frame, [6]byte{})
			return
		}
	}
	f.c.TxFlooded.Inc()
	for _, p := range f.peers.Load().list {
		f.sendPeer(p, KindEthernet, flow, frame, [6]byte{})
	}
}

// ethFlow derives a flow label from a frame's addresses (FNV-1a), so frames
// between one pair of stations keep to one path.
func ethFlow(frame []byte) uint32 {
	h := uint32(2166136261)
	for _, b := range frame[:12] {
		h ^= uint32(b)
		h *= 16777619
	}
	return h
}

// Send sends payload of kind k to the peer listening at dst with flow label
// flow. Errors are also counted.
func (f *Fabric) Send(k Kind, dst netip.AddrPort, flow uint32, payload []byte) error {
	return f.send(k, dst, flow, payload, [6]byte{})
}

// send is Send for the NIC with MAC origin (zero: unknown).
func (f *Fabric) send(k Kind, dst netip.AddrPort, flow uint32, payload []byte, origin [6]byte) error {
	if !k.valid() {
		f.c.TxBadKind.Inc()
		return fmt.Errorf("%w: %v", ErrBadKind, k)
	}
	p := f.peers.Load().byAddr[netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())]
	if p == nil {
		f.c.TxNoPeer.Inc()
		return fmt.Errorf("%w: %v", ErrUnknownPeer, dst)
	}
	return f.sendPeer(p, k, flow, payload, origin)
}

func (f *Fabric) sendPeer(p *fabricPeer, k Kind, flow uint32, payload []byte, origin [6]byte) error {
	if len(payload) > MaxPayload {
		f.c.TxTooBig.Inc()
		return ErrTooBig
	}
	if f.closed.Load() {
		f.c.TxError.Inc()
		return ErrClosed
	}
	bp := f.bufs.Get().(*[]byte)
	defer f.bufs.Put(bp)
	b := (*bp)[:HeaderLen+len(payload)]
	Encode(b, k, flow, len(payload))
	copy(b[HeaderLen:], payload)
	conn := f.conns[flow%uint32(len(f.conns))]
	if t := f.tap.Load(); t != nil {
		(*t)(true, origin, netip.AddrPortFrom(f.local.Addr(), f.local.Port()+uint16(flow%uint32(len(f.conns)))), p.addr, b)
	}
	p.c.TxDatagrams.Inc()
	p.c.TxBytes.Add(uint64(len(b)))
	if im := f.imp.Load(); im != nil {
		return im.send(f, conn, p.addr, b)
	}
	return f.write(conn, p.addr, b)
}

func (f *Fabric) write(conn *net.UDPConn, dst netip.AddrPort, b []byte) error {
	if _, err := conn.WriteToUDPAddrPort(b, dst); err != nil {
		f.c.TxError.Inc()
		return err
	}
	f.c.TxDatagrams.Inc()
	f.c.TxBytes.Add(uint64(len(b)))
	return nil
}

// PeerTable is one peer's counter table.
type PeerTable struct {
	Addr netip.AddrPort
	Set  stats.Set
}

// PeerTables returns every peer's counter table.
func (f *Fabric) PeerTables() []PeerTable {
	var ts []PeerTable
	for _, p := range f.peers.Load().list {
		ts = append(ts, PeerTable{Addr: p.addr, Set: p.c.set()})
	}
	return ts
}

// Sweep removes aged-out MAC entries; lookups already ignore them.
func (f *Fabric) Sweep() int { return f.macs.sweep(f.opts.Clock.Now()) }

// Status is the fabric's part of the daemon status.
type Status struct {
	Listen     string            `json:"listen"`
	Paths      int               `json:"paths"`
	Peers      []PeerStatus      `json:"peers"`
	MACs       []MACStatus       `json:"macs"`
	Impairment Impairment        `json:"impairment"`
	Counters   map[string]uint64 `json:"counters"`
}

// PeerStatus is one peer's traffic.
type PeerStatus struct {
	Addr string `json:"addr"`
	// LastRx is how long ago the peer's latest valid datagram arrived;
	// absent if none has.
	LastRx   *time.Duration    `json:"last_rx_ago_ns,omitempty"`
	Counters map[string]uint64 `json:"counters"`
}

// Status reports the peers, learned MACs, impairment and counters.
func (f *Fabric) Status() Status {
	st := Status{
		Listen:     f.local.String(),
		Paths:      f.opts.Paths,
		Impairment: f.Impairment(),
		Counters:   f.counts.Snapshot(),
	}
	now := f.opts.Clock.Now()
	for _, p := range f.peers.Load().list {
		ps := PeerStatus{Addr: p.addr.String(), Counters: p.c.set().Snapshot()}
		if p.heard.Load() {
			ago := now - clock.Time(p.lastRx.Load())
			ps.LastRx = &ago
		}
		st.Peers = append(st.Peers, ps)
	}
	for _, v := range f.macs.snapshot(f.opts.Clock.Now()) {
		st.MACs = append(st.MACs, MACStatus{MAC: v.addr.String(), Port: v.at.addr.String(), Age: v.age})
	}
	sort.Slice(st.MACs, func(i, j int) bool { return st.MACs[i].MAC < st.MACs[j].MAC })
	return st
}

// SendToMAC sends payload of kind k toward the NIC with MAC mac: to the
// peer daemon that last showed that MAC, or, when none has, to every peer.
// It reports an error only when nothing could be sent.
func (f *Fabric) SendToMAC(mac [6]byte, k Kind, payload []byte) error {
	if p := f.macs.lookup(ethAddr(mac), f.opts.Clock.Now()); p != nil {
		return f.sendPeer(p, k, 0, payload, [6]byte{})
	}
	var err error
	sent := false
	for _, p := range f.peers.Load().list {
		if e := f.sendPeer(p, k, 0, payload, [6]byte{}); e != nil {
			err = e
		} else {
			sent = true
		}
	}
	if sent {
		return nil
	}
	if err == nil {
		f.c.TxNoPeer.Inc()
		err = fmt.Errorf("%w: no peer for %x", ErrUnknownPeer, mac)
	}
	return err
}
