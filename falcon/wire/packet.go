package wire

import (
	"encoding/binary"
	"errors"
)

var be = binary.BigEndian

// Parse errors, one per cause so a receiver can count drops by cause.
var (
	ErrShort   = errors.New("falcon: packet shorter than its header")
	ErrVersion = errors.New("falcon: unsupported version")
	ErrType    = errors.New("falcon: reserved packet type")
	ErrLength  = errors.New("falcon: length does not match header")
)

// Packet is a view of any Falcon packet: the bytes from the first byte of the
// Falcon header to the end of the payload (no ICV). Its methods read and
// write the fields common to every packet type (W0-W3). They assume the
// packet is at least as long as its type's header, which Parse checks and
// the Append builders guarantee; on shorter slices they panic like an
// out-of-range slice index.
type Packet []byte

// Parse validates untrusted bytes as a Falcon packet and returns a view of
// them. It checks, in order: at least the 8 bytes holding version and type
// (ErrShort), version 1 (ErrVersion), a packet type defined by Rev 0.9
// (ErrType), at least the type's header length (ErrShort), no trailing bytes
// after a header-only type (ErrLength) and, for Push Data, payload length ==
// Request Length (ErrLength). Reserved bits and the protocol type are not
// checked. Parse does not allocate.
func Parse(b []byte) (Packet, error) {
	if len(b) < 8 {
		return nil, ErrShort
	}
	p := Packet(b)
	if p.Version() != Version {
		return nil, ErrVersion
	}
	sh := p.Type().shapeOf()
	if sh.flags&shapeValid == 0 {
		return nil, ErrType
	}
	if n := int(sh.hdr); len(b) < n {
		return nil, ErrShort
	} else if sh.flags&shapePayload == 0 && len(b) != n {
		return nil, ErrLength
	}
	if p.Type() == TypePushData && len(b)-PushDataHeaderLen != int(Txn(b).RequestLength()) {
		return nil, ErrLength
	}
	return p, nil
}

// Version returns W0 bits 0:3.
func (p Packet) Version() uint8 { return p[0] >> 4 }

// SetVersion sets W0 bits 0:3 (low 4 bits of v).
func (p Packet) SetVersion(v uint8) { p[0] = p[0]&0x0f | v<<4 }

// CID returns the 24-bit destination connection ID, W0 bits 8:31.
func (p Packet) CID() uint32 { return get24(p[1:]) }

// SetCID sets the destination connection ID (low 24 bits of c).
func (p Packet) SetCID(c uint32) { put24(p[1:], c) }

// Type returns the packet type, W1 bits 27:30.
func (p Packet) Type() PacketType { return PacketType(p[7] >> 1 & 0x0f) }

// SetType sets the packet type (low 4 bits of t).
func (p Packet) SetType(t PacketType) { p[7] = p[7]&^0x1e | byte(t&0x0f)<<1 }

// DataBase returns W2, the Receiver Data Window Base PSN: the cumulative
// acknowledgement of the reverse direction's data window.
func (p Packet) DataBase() PSN { return PSN(be.Uint32(p[8:])) }

// SetDataBase sets W2.
func (p Packet) SetDataBase(v PSN) { be.PutUint32(p[8:], uint32(v)) }

// ReqBase returns W3, the Receiver Request Window Base PSN.
func (p Packet) ReqBase() PSN { return PSN(be.Uint32(p[12:])) }

// SetReqBase sets W3.
func (p Packet) SetReqBase(v PSN) { be.PutUint32(p[12:], uint32(v)) }

// Txn returns p as a transaction packet view (Pull Request, Pull Data, Push
// Data, Resync).
func (p Packet) Txn() Txn { return Txn(p) }

// Ack returns p as a BACK/EACK view.
func (p Packet) Ack() Ack { return Ack(p) }

// Nack returns p as a NACK view.
func (p Packet) Nack() Nack { return Nack(p) }

// Header returns the bytes of p's Falcon header (the whole packet for types
// without payload). A reserved type yields the whole packet.
func (p Packet) Header() []byte {
	if n := p.Type().HeaderLen(); n > 0 && n <= len(p) {
		return p[:n]
	}
	return p
}

// Payload returns the bytes after the header for Pull Request (ULP request
// headers), Pull Data and Push Data (ULP headers and data); nil for every
// other type.
func (p Packet) Payload() []byte {
	sh := p.Type().shapeOf()
	if sh.flags&shapePayload == 0 || len(p) < int(sh.hdr) {
		return nil
	}
	return p[sh.hdr:]
}

// putHeader grows b by the header of type t, zeroes it and sets version and
// type. It returns the extended slice and the new header's view.
func putHeader(b []byte, t PacketType, extra int) ([]byte, Packet) {
	n := t.HeaderLen()
	start := len(b)
	b = grow(b, n+extra)
	h := b[start : start+n]
	clear(h)
	p := Packet(b[start:])
	p.SetVersion(Version)
	p.SetType(t)
	return b, p
}

// grow extends b by n bytes, reallocating only when its capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*len(b)+n)
	copy(nb, b)
	return nb
}

func get24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }

func put24(b []byte, v uint32) {
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}

func boolBit(v bool) byte {
	if v {
		return 1
	}
	return 0
}
