package fabric

import (
	"encoding/binary"
	"strconv"
)

// Fabric wire format: the header constants and its layout.
//
// Every UDP datagram between daemons carries one fabric header followed by
// one payload. All fields are big-endian:
//
//	offset size field
//	0      2    magic      0xFA1C
//	2      1    version    1
//	3      1    kind       1 Ethernet frame, 2 Falcon packet, 3 connection-manager message
//	4      4    flow label chosen by the sender per packet (multipath entropy)
//	8      2    length     payload length; must equal datagram length - 12
//	10     2    reserved   must be zero
//	12     ...  payload    one Ethernet frame (no FCS), Falcon packet or CM message
//
// A receiver drops, and counts by cause, a datagram that is shorter than the
// header, has another magic or version, an unknown kind, a length that
// disagrees with the datagram, reserved bits set, or a payload shorter than
// its kind's minimum. The flow label also picks the sender's UDP source port
// (path = flow % paths), so ECMP hashing in an IP network sees entropy.
const (
	Magic     = 0xFA1C
	Version   = 1
	HeaderLen = 12
	// MaxPayload is the largest payload one datagram carries: the
	// IPv4 UDP payload limit (65,535 - 20 - 8) minus the fabric header.
	MaxPayload = 65507 - HeaderLen
)

// Kind says what a fabric datagram's payload is.
type Kind uint8

// Fabric payload kinds. Zero is invalid on the wire.
const (
	KindEthernet Kind = 1 // an Ethernet frame for the peer's switch
	KindFalcon   Kind = 2 // a Falcon transport packet
	KindCM       Kind = 3 // a connection-manager message
	numKinds          = 4
)

// fabricKinds is the kind table: name and shortest valid payload.
var fabricKinds = [numKinds]struct {
	name       string
	minPayload int
}{
	KindEthernet: {"ethernet", ethHeaderLen},
	KindFalcon:   {"falcon", 1},
	KindCM:       {"cm", 1},
}

func (k Kind) valid() bool { return k > 0 && int(k) < numKinds }

// String names the kind ("ethernet", "falcon", "cm", or "kind(N)").
func (k Kind) String() string {
	if k.valid() {
		return fabricKinds[k].name
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Header is a view of the 12-byte fabric header at the start of a
// datagram. The getters and setters do not check length; Decode does.
type Header []byte

// Magic returns the magic field (Magic in a valid header).
func (h Header) Magic() uint16 { return binary.BigEndian.Uint16(h[0:]) }

// Version returns the format version (Version).
func (h Header) Version() uint8 { return h[2] }

// Kind returns what the payload is.
func (h Header) Kind() Kind { return Kind(h[3]) }

// FlowLabel returns the sender's flow label.
func (h Header) FlowLabel() uint32 { return binary.BigEndian.Uint32(h[4:]) }

// Length returns the payload length.
func (h Header) Length() uint16 { return binary.BigEndian.Uint16(h[8:]) }

// Reserved returns the reserved field (zero in a valid header).
func (h Header) Reserved() uint16 { return binary.BigEndian.Uint16(h[10:]) }

// SetMagic sets the magic field.
func (h Header) SetMagic(v uint16) { binary.BigEndian.PutUint16(h[0:], v) }

// SetVersion sets the format version.
func (h Header) SetVersion(v uint8) { h[2] = v }

// SetKind sets the payload kind.
func (h Header) SetKind(k Kind) { h[3] = uint8(k) }

// SetFlowLabel sets the flow label.
func (h Header) SetFlowLabel(v uint32) { binary.BigEndian.PutUint32(h[4:], v) }

// SetLength sets the payload length.
func (h Header) SetLength(v uint16) { binary.BigEndian.PutUint16(h[8:], v) }

// SetReserved sets the reserved field.
func (h Header) SetReserved(v uint16) { binary.BigEndian.PutUint16(h[10:], v) }

// Encode writes a header for a payload of length n and kind k with
// flow label flow into b[:HeaderLen].
func Encode(b []byte, k Kind, flow uint32, n int) {
	h := Header(b[:HeaderLen])
	h.SetMagic(Magic)
	h.SetVersion(Version)
	h.SetKind(k)
	h.SetFlowLabel(flow)
	h.SetLength(uint16(n))
	h.SetReserved(0)
}

// fabricDrop is why a received datagram was dropped.
type fabricDrop uint8

// Receive drop causes. dropNone means the datagram is good.
const (
	dropNone fabricDrop = iota
	dropShort
	dropBadMagic
	dropBadVersion
	dropBadKind
	dropBadLength
	dropReserved
	dropRunt
	dropUnknownPeer
	dropNoReceiver
	dropControl
	dropTruncated
	dropBadSource
	numFabricDrops
)

// fabricDrops is the receive drop table: counter name and help text.
var fabricDrops = [numFabricDrops]struct{ name, help string }{
	dropNone:        {"rx_delivered", "datagrams accepted and handed to their kind's receiver"},
	dropShort:       {"rx_short", "datagrams dropped: shorter than the fabric header"},
	dropBadMagic:    {"rx_bad_magic", "datagrams dropped: wrong magic"},
	dropBadVersion:  {"rx_bad_version", "datagrams dropped: unsupported version"},
	dropBadKind:     {"rx_bad_kind", "datagrams dropped: unknown payload kind"},
	dropBadLength:   {"rx_bad_length", "datagrams dropped: length field disagrees with the datagram"},
	dropReserved:    {"rx_reserved", "datagrams dropped: reserved field not zero"},
	dropRunt:        {"rx_runt", "datagrams dropped: payload shorter than its kind's minimum"},
	dropUnknownPeer: {"rx_unknown_peer", "datagrams dropped: sender is not a configured peer"},
	dropNoReceiver:  {"rx_no_receiver", "datagrams dropped: no receiver registered for the kind"},
	dropControl:     {"rx_control", "Ethernet frames dropped: control-channel EtherType never crosses the fabric"},
	dropTruncated:   {"rx_truncated", "datagrams dropped: longer than the receive buffer (cut short by the socket)"},
	dropBadSource:   {"rx_bad_source", "datagrams dropped: the socket reported a source address that is not IPv4 or IPv6"},
}

// Decode checks datagram b strictly and returns its header and
// payload (a subslice of b). It never panics and does not allocate; an
// invalid datagram yields ok == false.
func Decode(b []byte) (h Header, payload []byte, ok bool) {
	h, payload, cause := decodeFabric(b)
	return h, payload, cause == dropNone
}

func decodeFabric(b []byte) (Header, []byte, fabricDrop) {
	if len(b) < HeaderLen {
		return nil, nil, dropShort
	}
	h := Header(b[:HeaderLen])
	switch {
	case h.Magic() != Magic:
		return nil, nil, dropBadMagic
	case h.Version() != Version:
		return nil, nil, dropBadVersion
	case !h.Kind().valid():
		return nil, nil, dropBadKind
	case int(h.Length()) != len(b)-HeaderLen:
		return nil, nil, dropBadLength
	case h.Reserved() != 0:
		return nil, nil, dropReserved
	case int(h.Length()) < fabricKinds[h.Kind()].minPayload:
		return nil, nil, dropRunt
	}
	return h, b[HeaderLen:], dropNone
}
