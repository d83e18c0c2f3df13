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
	if len(pkt) > 0xffff-udpLen {
		pkt = pkt[:0xffff-udpLen]
	}
	start := len(b)
	b = append(b, make([]byte, frameHdr)...)
	h := b[start:]
	copy(h[0:6], dstMAC)
	copy(h[6:12], srcMAC)
	binary.BigEndian.PutUint16(h[12:], 0x86dd)
	ip := h[ethLen:]
	binary.BigEndian.PutUint32(ip[0:], 6<<28|flow&0xfffff)
	udpTotal := udpLen + len(pkt)
	binary.BigEndian.PutUint16(ip[4:], uint16(udpTotal))
	ip[6] = 17 // next header: UDP
	ip[7] = 255
	s16, d16 := src.As16(), dst.As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	udp := ip[ipv6Len:]
	binary.BigEndian.PutUint16(udp[0:], uint16(0xc000|flow&0x3fff))
	binary.BigEndian.PutUint16(udp[2:], FalconUDPPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpTotal))
	binary.BigEndian.PutUint16(udp[6:], 0)
	b = append(b, pkt...)
	// UDP checksum over the IPv6 pseudo-header, UDP header and payload.
	var sum uint32
	sum = csumAdd(sum, ip[8:40])
	sum += uint32(udpTotal) + 17
	sum = csumAdd(sum, b[start+ethLen+ipv6Len:])
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	ck := ^uint16(sum)
	if ck == 0 {
		ck = 0xffff
	}
	binary.BigEndian.PutUint16(b[start+ethLen+ipv6Len+6:], ck)
	return b
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
