package fabric

import (
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"falconnic/device/l2"
	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// Ethernet framing constants (IEEE 802.3 §3.1.1; 802.1Q §9.6).
const (
	ethHeaderLen = l2.HeaderLen // destination, source, EtherType
	etherTypeOff = 12           // offset of the (outer) EtherType
	etherVLAN    = 0x8100       // 802.1Q C-tag
	etherQinQ    = 0x88A8       // 802.1ad S-tag
)

// Switch defaults.
const (
	DefaultMACAge   = 300 * time.Second // IEEE 802.1Q default ageing time
	DefaultMaxMACs  = 4096
	DefaultMaxFrame = 65535
)

// SwitchOptions configures a Switch. Zero fields take defaults.
type SwitchOptions struct {
	Clock    clock.Clock   // source of time for MAC aging; default clock.Real
	MACAge   time.Duration // how long a learned address stays valid; default DefaultMACAge
	MaxMACs  int           // learned-address table size; default DefaultMaxMACs
	MaxFrame int           // longest frame accepted; default DefaultMaxFrame
}

// Switch is the daemon's in-process L2 learning switch. NICs of one daemon
// and the fabric port are its ports.
//
// It learns source addresses per port (with aging on the injected clock),
// forwards known unicast to one port and floods broadcast, multicast and
// unknown unicast to every other port, never back to the ingress port. It
// drops runts, oversize frames, frames with a group source address,
// spoofed sources on locked ports (LockSource) and control-channel frames
// (EtherType 0x88B5), each with its own counter.
//
// Forwarding is synchronous: Deliver on an ingress port calls Deliver on the
// egress port's sink before it returns, so sinks must copy what they keep and
// must not block long. Deliver is safe for concurrent use from many ports and
// does not allocate in steady state.
type Switch struct {
	opts  SwitchOptions
	macs  *macTable[SwitchPort]
	mu    sync.Mutex                    // serialises AddPort and RemovePort
	ports atomic.Pointer[[]*SwitchPort] // copy-on-write port list

	c      SwitchCounters
	counts stats.Set
}

// SwitchCounters are the switch-wide counters.
type SwitchCounters struct {
	Forwarded stats.Counter
	Flooded   stats.Counter
	macCounters
}

// SwitchPort is one port of a Switch. Frames entering the switch through the
// port are handed to Deliver (so a SwitchPort is a NIC's uplink); frames
// leaving through it go to the sink given to Connect.
type SwitchPort struct {
	sw      *Switch
	name    string
	out     atomic.Pointer[sinkBox]
	removed atomic.Bool
	srcLock atomic.Pointer[ethAddr] // the only source address accepted, if set

	c      PortCounters
	counts stats.Set
}

type sinkBox struct {
	s  l2.Sink
	ps l2.PatientSink // s, when it can hold a sender back
}

// PortCounters are the counters of one switch port: traffic in each
// direction and one counter per drop cause.
type PortCounters struct {
	RxFrames stats.Counter
	RxBytes  stats.Counter
	TxFrames stats.Counter
	TxBytes  stats.Counter

	RxRunt         stats.Counter
	RxTooBig       stats.Counter
	RxControl      stats.Counter
	RxGroupSource  stats.Counter
	RxSpoofed      stats.Counter
	RxPinnedSource stats.Counter
	RxFiltered     stats.Counter
	RxPortRemoved  stats.Counter
	TxNotConnected stats.Counter
}

// NewSwitch returns a switch with no ports.
func NewSwitch(opts SwitchOptions) *Switch {
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.MACAge <= 0 {
		opts.MACAge = DefaultMACAge
	}
	if opts.MaxMACs <= 0 {
		opts.MaxMACs = DefaultMaxMACs
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = DefaultMaxFrame
	}
	s := &Switch{opts: opts}
	s.macs = newMACTable[SwitchPort](opts.MACAge, opts.MaxMACs, &s.c.macCounters)
	s.ports.Store(&[]*SwitchPort{})
	s.counts = append(stats.Set{
		{Name: "forwarded", Help: "frames forwarded to one learned port", Counter: &s.c.Forwarded},
		{Name: "flooded", Help: "frames flooded (broadcast, multicast, unknown or aged unicast)", Counter: &s.c.Flooded},
	}, s.c.macCounters.set("")...)
	return s
}

// MACAge returns how long a learned address stays valid.
func (s *Switch) MACAge() time.Duration { return s.opts.MACAge }

// Ports returns the switch's ports (a snapshot).
func (s *Switch) Ports() []*SwitchPort { return *s.ports.Load() }

// Counters returns the switch-wide counter table.
func (s *Switch) Counters() stats.Set { return s.counts }

// AddPort adds a port named name (names are for status only). The port drops
// what it would send until Connect gives it a sink.
func (s *Switch) AddPort(name string) *SwitchPort {
	p := &SwitchPort{sw: s, name: name}
	p.counts = stats.Set{
		{Name: "rx_frames", Help: "frames that entered the switch through this port", Counter: &p.c.RxFrames},
		{Name: "rx_bytes", Help: "bytes that entered the switch through this port", Counter: &p.c.RxBytes},
		{Name: "tx_frames", Help: "frames that left the switch through this port", Counter: &p.c.TxFrames},
		{Name: "tx_bytes", Help: "bytes that left the switch through this port", Counter: &p.c.TxBytes},
		{Name: "rx_runt", Help: "frames dropped: shorter than an Ethernet header", Counter: &p.c.RxRunt},
		{Name: "rx_too_big", Help: "frames dropped: longer than the switch's maximum frame", Counter: &p.c.RxTooBig},
		{Name: "rx_control", Help: "frames dropped: control-channel EtherType 0x88B5 never crosses the switch", Counter: &p.c.RxControl},
		{Name: "rx_group_source", Help: "frames dropped: source address is broadcast or multicast", Counter: &p.c.RxGroupSource},
		{Name: "rx_spoofed", Help: "frames dropped: source address is not the port's locked address", Counter: &p.c.RxSpoofed},
		{Name: "rx_pinned_source", Help: "frames dropped: source address is locked to another port", Counter: &p.c.RxPinnedSource},
		{Name: "rx_filtered", Help: "frames dropped: destination was learned on the ingress port", Counter: &p.c.RxFiltered},
		{Name: "rx_port_removed", Help: "frames dropped: delivered to a port after RemovePort", Counter: &p.c.RxPortRemoved},
		{Name: "tx_not_connected", Help: "frames dropped: egress port has no sink yet", Counter: &p.c.TxNotConnected},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.ports.Load()
	ports := make([]*SwitchPort, len(old), len(old)+1)
	copy(ports, old)
	ports = append(ports, p)
	s.ports.Store(&ports)
	return p
}

// RemovePort detaches p: it stops sending and receiving, and the addresses
// learned on it are forgotten.
func (s *Switch) RemovePort(p *SwitchPort) {
	if p == nil || p.sw != s {
		return
	}
	s.mu.Lock()
	old := *s.ports.Load()
	ports := make([]*SwitchPort, 0, len(old))
	for _, q := range old {
		if q != p {
			ports = append(ports, q)
		}
	}
	s.ports.Store(&ports)
	p.removed.Store(true)
	s.mu.Unlock()
	s.macs.forget(p)
}

// Sweep removes aged-out addresses from the learning table. Lookups already
// ignore them; Sweep only frees memory. It returns how many it removed.
func (s *Switch) Sweep() int { return s.macs.sweep(s.opts.Clock.Now()) }

// LockSource makes mac the port's only source address (a NIC port's own
// MAC): frames from the port with another source are dropped (RxSpoofed),
// and mac is pinned to the port, so frames claiming it on any other port
// are dropped too (RxPinnedSource) and traffic to it always comes here.
func (p *SwitchPort) LockSource(mac net.HardwareAddr) error {
	if len(mac) != 6 || mac[0]&1 != 0 {
		return fmt.Errorf("switch: cannot lock port %s to %v: not a unicast MAC", p.name, mac)
	}
	a := ethAddrAt(mac, 0)
	p.srcLock.Store(&a)
	p.sw.macs.pin(a, p, p.sw.opts.Clock.Now())
	return nil
}

// Name returns the port's name.
func (p *SwitchPort) Name() string { return p.name }

// Counters returns the port's counter table.
func (p *SwitchPort) Counters() stats.Set { return p.counts }

// Connect sets where frames leaving the switch through p go (the NIC's
// receive path, the fabric's egress). A nil sink disconnects.
func (p *SwitchPort) Connect(out l2.Sink) {
	if out == nil {
		p.out.Store(nil)
		return
	}
	ps, _ := out.(l2.PatientSink)
	p.out.Store(&sinkBox{s: out, ps: ps})
}

// Deliver takes a frame entering the switch through p and forwards it. The
// switch does not keep frame after Deliver returns.
func (p *SwitchPort) Deliver(frame []byte) { p.deliver(frame, false) }

// DeliverPatient is Deliver for a sender that can be held back (a local
// NIC's TX path): a frame forwarded to one learned port may wait there for
// room (see l2.PatientSink). Flooded frames never wait.
func (p *SwitchPort) DeliverPatient(frame []byte) { p.deliver(frame, true) }

func (p *SwitchPort) deliver(frame []byte, patient bool) {
	if p.removed.Load() {
		p.c.RxPortRemoved.Inc()
		return
	}
	p.c.RxFrames.Inc()
	p.c.RxBytes.Add(uint64(len(frame)))
	s := p.sw
	switch {
	case len(frame) < ethHeaderLen:
		p.c.RxRunt.Inc()
		return
	case len(frame) > s.opts.MaxFrame:
		p.c.RxTooBig.Inc()
		return
	case isControlFrame(frame):
		p.c.RxControl.Inc()
		return
	}
	src := ethAddrAt(frame, 6)
	if src.group() {
		p.c.RxGroupSource.Inc()
		return
	}
	if lock := p.srcLock.Load(); lock != nil && src != *lock {
		p.c.RxSpoofed.Inc()
		return
	}
	now := s.opts.Clock.Now()
	if !s.macs.learn(src, p, now) {
		p.c.RxPinnedSource.Inc()
		return
	}

	dst := ethAddrAt(frame, 0)
	if !dst.group() {
		if q := s.macs.lookup(dst, now); q != nil {
			if q == p {
				p.c.RxFiltered.Inc()
				return
			}
			s.c.Forwarded.Inc()
			q.send(frame, patient)
			return
		}
	}
	s.c.Flooded.Inc()
	for _, q := range *s.ports.Load() {
		if q != p {
			q.send(frame, false)
		}
	}
}

func (p *SwitchPort) send(frame []byte, patient bool) {
	box := p.out.Load()
	if box == nil || p.removed.Load() {
		p.c.TxNotConnected.Inc()
		return
	}
	p.c.TxFrames.Inc()
	p.c.TxBytes.Add(uint64(len(frame)))
	if patient && box.ps != nil {
		box.ps.DeliverPatient(frame)
		return
	}
	box.s.Deliver(frame)
}

// isControlFrame reports whether frame carries the control-channel EtherType,
// directly or behind one or two VLAN tags.
func isControlFrame(frame []byte) bool {
	off := etherTypeOff
	for range 3 {
		if len(frame) < off+2 {
			return false
		}
		switch binary.BigEndian.Uint16(frame[off:]) {
		case l2.EtherTypeControl:
			return true
		case etherVLAN, etherQinQ:
			off += 4
		default:
			return false
		}
	}
	return false
}

// SwitchStatus is the switch's part of the daemon status.
type SwitchStatus struct {
	Ports    []PortStatus      `json:"ports"`
	MACs     []MACStatus       `json:"macs"`
	Counters map[string]uint64 `json:"counters"`
}

// PortStatus is one switch port's counters.
type PortStatus struct {
	Name     string            `json:"name"`
	Counters map[string]uint64 `json:"counters"`
}

// MACStatus is one learned address: where it was seen and how long ago.
type MACStatus struct {
	MAC    string        `json:"mac"`
	Port   string        `json:"port"`
	Age    time.Duration `json:"age_ns"`
	Static bool          `json:"static,omitempty"` // locked to the port (a NIC's own MAC)
}

// Status reports the ports, the learned addresses and the counters.
func (s *Switch) Status() SwitchStatus {
	st := SwitchStatus{Counters: s.counts.Snapshot()}
	for _, p := range *s.ports.Load() {
		st.Ports = append(st.Ports, PortStatus{Name: p.name, Counters: p.counts.Snapshot()})
	}
	for _, v := range s.macs.snapshot(s.opts.Clock.Now()) {
		st.MACs = append(st.MACs, MACStatus{MAC: v.addr.String(), Port: v.at.name, Age: v.age, Static: v.static})
	}
	sort.Slice(st.MACs, func(i, j int) bool { return st.MACs[i].MAC < st.MACs[j].MAC })
	return st
}
