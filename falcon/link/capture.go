package link

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// FalconUDPPort is the UDP destination port of Falcon packets in captures:
// PSP's port, which Isekai uses for Falcon (Rev 0.9 names none).
const FalconUDPPort = 1000

// Synthetic framing sizes.
const (
	ethLen   = 14
	ipv6Len  = 40
	udpLen   = 8
	frameHdr = ethLen + ipv6Len + udpLen
)

// CaptureConfig sets the synthetic outer headers and timestamps of a
// Capture. Zero fields take the defaults noted.
type CaptureConfig struct {
	// Clock stamps the packets; nil means clock.Real.
	Clock clock.Clock
	// Epoch is the wall time of the clock's zero. When zero it is the Unix
	// epoch for an explicit Clock (so captures from a manual clock are
	// reproducible) and the real clock's start for a nil Clock (so
	// timestamps are wall time).
	Epoch time.Time
	// SrcMAC and DstMAC default to 02:00:00:00:00:01 and :02.
	SrcMAC, DstMAC net.HardwareAddr
	// SrcIP and DstIP (IPv6) default to fd00::1 and fd00::2.
	SrcIP, DstIP netip.Addr
}

// Capture is a Link that records every packet it sends to a pcapng stream,
// then passes it to the wrapped Link (if any). Frames are Ethernet / IPv6
// (flow label = flow, hop limit 255) / UDP (source port 0xC000 | low 14 bits
// of flow, destination port 1000, valid checksum) / Falcon packet.
type Capture struct {
	mu    sync.Mutex
	w     *pcapgo.NgWriter
	next  Link
	cfg   CaptureConfig
	frame []byte
	err   error

	// WriteErrors counts packets that could not be written to the capture
	// (they are still forwarded).
	WriteErrors stats.Counter
	// Captured counts packets written.
	Captured stats.Counter
}

// NewCapture starts a pcapng stream on w (writing its section and interface
// headers) and returns a Link that records packets and forwards them to l.
// l may be nil to record only.
func NewCapture(w io.Writer, l Link, cfg CaptureConfig) (*Capture, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
		if cfg.Epoch.IsZero() {
			cfg.Epoch = time.Now().Add(-clock.Real.Now())
		}
	}
	if cfg.Epoch.IsZero() {
		cfg.Epoch = time.Unix(0, 0)
	}
	if len(cfg.SrcMAC) != 6 {
		cfg.SrcMAC = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	}
	if len(cfg.DstMAC) != 6 {
		cfg.DstMAC = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	}
	if !cfg.SrcIP.Is6() {
		cfg.SrcIP = netip.MustParseAddr("fd00::1")
	}
	if !cfg.DstIP.Is6() {
		cfg.DstIP = netip.MustParseAddr("fd00::2")
	}
	nw, err := pcapgo.NewNgWriter(w, layers.LinkTypeEthernet)
	if err != nil {
		return nil, err
	}
	return &Capture{w: nw, next: l, cfg: cfg, frame: make([]byte, 0, 9216)}, nil
}

// Send records pkt and forwards it to the wrapped Link.
func (c *Capture) Send(pkt []byte, flow uint32) {
	c.mu.Lock()
	c.frame = AppendFrame(c.frame[:0], pkt, flow, c.cfg.SrcMAC, c.cfg.DstMAC, c.cfg.SrcIP, c.cfg.DstIP)
	ci := gopacket.CaptureInfo{
		Timestamp:     c.cfg.Epoch.Add(c.cfg.Clock.Now()),
		CaptureLength: len(c.frame),
		Length:        len(c.frame),
	}
	if err := c.w.WritePacket(ci, c.frame); err != nil {
		c.WriteErrors.Inc()
		if c.err == nil {
			c.err = err
		}
	} else {
		c.Captured.Inc()
	}
	c.mu.Unlock()
	if c.next != nil {
		c.next.Send(pkt, flow)
	}
}

// Flush writes buffered capture data to the underlying writer and returns
// the first error seen so far.
func (c *Capture) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.w.Flush(); err != nil && c.err == nil {
		c.err = err
	}
	return c.err
}

// Err returns the first write error, if any.
func (c *Capture) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AppendFrame appends pkt wrapped in Ethernet / IPv6 / UDP to b: IPv6 flow
// label = low 20 bits of flow, UDP source port 0xC000 | low 14 bits of flow,
// destination port FalconUDPPort, with the UDP checksum filled in. pkt must
// be shorter than 65535-8 bytes (larger ones are truncated to fit).
func AppendFrame(b, pkt []byte, flow uint32, srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr) []byte {
	return AppendUDPFrame(b, pkt, flow, srcMAC, dstMAC,
		netip.AddrPortFrom(src, uint16(0xc000|flow&0x3fff)), netip.AddrPortFrom(dst, FalconUDPPort))
}

// AppendUDPFrame appends payload wrapped in Ethernet / IP / UDP from src to
// dst to b: IPv6 (flow label = low 20 bits of flow, hop limit 255) when
// both addresses are IPv6, else IPv4 (TTL 64, don't fragment); the IP and
// UDP checksums are filled in. A payload longer than one UDP datagram is
// truncated to fit.
func AppendUDPFrame(b, payload []byte, flow uint32, srcMAC, dstMAC net.HardwareAddr, src, dst netip.AddrPort) []byte {
	v6 := src.Addr().Is6() && !src.Addr().Is4In6() && dst.Addr().Is6() && !dst.Addr().Is4In6()
	ipLen, maxPayload := ipv6Len, 0xffff-udpLen // IPv6's payload length field
	if !v6 {
		ipLen, maxPayload = ipv4Len, 0xffff-ipv4Len-udpLen // IPv4's total length field
	}
	if len(payload) > maxPayload {
		payload = payload[:maxPayload]
	}
	start := len(b)
	b = append(b, make([]byte, ethLen+ipLen+udpLen)...)
	h := b[start:]
	copy(h[0:6], dstMAC)
	copy(h[6:12], srcMAC)
	ip := h[ethLen:]
	udpTotal := udpLen + len(payload)
	var pseudo uint32
	if v6 {
		binary.BigEndian.PutUint16(h[12:], 0x86dd)
		binary.BigEndian.PutUint32(ip[0:], 6<<28|flow&0xfffff)
		binary.BigEndian.PutUint16(ip[4:], uint16(udpTotal))
		ip[6] = 17 // next header: UDP
		ip[7] = 255
		s16, d16 := src.Addr().As16(), dst.Addr().As16()
		copy(ip[8:24], s16[:])
		copy(ip[24:40], d16[:])
		pseudo = csumAdd(0, ip[8:40])
	} else {
		binary.BigEndian.PutUint16(h[12:], 0x0800)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(ipv4Len+udpTotal))
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // don't fragment
		ip[8] = 64
		ip[9] = 17
		s4, d4 := src.Addr().Unmap().As4(), dst.Addr().Unmap().As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		binary.BigEndian.PutUint16(ip[10:], ^fold(csumAdd(0, ip[:ipv4Len])))
		pseudo = csumAdd(0, ip[12:20])
	}
	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpTotal))
	binary.BigEndian.PutUint16(udp[6:], 0)
	b = append(b, payload...)
	// UDP checksum over the pseudo-header, UDP header and payload.
	sum := pseudo + uint32(udpTotal) + 17
	sum = csumAdd(sum, b[start+ethLen+ipLen:])
	ck := ^fold(sum)
	if ck == 0 {
		ck = 0xffff
	}
	binary.BigEndian.PutUint16(b[start+ethLen+ipLen+6:], ck)
	return b
}

const ipv4Len = 20

// fold folds a one's-complement sum to 16 bits.
func fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// csumAdd adds b as big-endian 16-bit words (odd tail zero-padded).
func csumAdd(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum
}
