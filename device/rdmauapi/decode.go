package rdmauapi

import (
	"encoding/binary"
	"errors"
)

// EthHdrLen is the Ethernet header in front of every control message.
const EthHdrLen = 14

// minFrame is the shortest Ethernet frame (without FCS); senders pad to it.
const minFrame = 60

// Decode errors, one per rejection cause so callers can count each.
var (
	ErrShort      = errors.New("rdmauapi: shorter than the header")
	ErrBadMagic   = errors.New("rdmauapi: bad magic")
	ErrBadVersion = errors.New("rdmauapi: unsupported version")
	ErrBadLength  = errors.New("rdmauapi: length beyond the frame or MaxBody")
	ErrBadOpcode  = errors.New("rdmauapi: unknown opcode")
	ErrBadFlags   = errors.New("rdmauapi: flags do not fit the opcode or direction")
	ErrBadReqID   = errors.New("rdmauapi: req_id zero in a request or set in an event")
	ErrBadBody    = errors.New("rdmauapi: body size is not the opcode's")
)

// Msg is a decoded control message. Hdr and Body alias the input.
type Msg struct {
	Hdr  Hdr
	Body []byte
	Info OpInfo
}

// ControlPayload returns the control message inside an Ethernet frame, or
// ok=false when the frame is not of EtherType 0x88B5.
func ControlPayload(frame []byte) (payload []byte, ok bool) {
	if len(frame) < EthHdrLen || binary.BigEndian.Uint16(frame[12:]) != EtherType {
		return nil, false
	}
	return frame[EthHdrLen:], true
}

// decodeHdr checks the parts of a header that do not depend on direction.
func decodeHdr(p []byte) (Msg, error) {
	if len(p) < HdrSize {
		return Msg{}, ErrShort
	}
	h := Hdr(p[:HdrSize:HdrSize])
	if h.Magic() != Magic {
		return Msg{}, ErrBadMagic
	}
	if h.Version() != Version {
		return Msg{Hdr: h}, ErrBadVersion
	}
	n := int(h.Length())
	if n > MaxBody || n > len(p)-HdrSize {
		return Msg{Hdr: h}, ErrBadLength
	}
	info, ok := Lookup(h.Opcode())
	if !ok {
		return Msg{Hdr: h}, ErrBadOpcode
	}
	return Msg{Hdr: h, Body: p[HdrSize : HdrSize+n : HdrSize+n], Info: info}, nil
}

// DecodeRequest decodes a message sent by the driver to the NIC: a request
// (flags 0, req_id ≠ 0) or a doorbell (FlagNoReply). The body has exactly
// the opcode's request size. On error, Msg.Hdr is set when the header was
// trustworthy enough to answer (see ReplyStatus).
func DecodeRequest(p []byte) (Msg, error) {
	m, err := decodeHdr(p)
	if err != nil {
		return m, err
	}
	switch m.Info.Kind {
	case KindRequest:
		if m.Hdr.Flags() != 0 {
			return m, ErrBadFlags
		}
		if m.Hdr.ReqID() == 0 {
			return m, ErrBadReqID
		}
	case KindDoorbell:
		if m.Hdr.Flags() != FlagNoReply {
			return m, ErrBadFlags
		}
	default:
		return m, ErrBadOpcode // events never travel towards the NIC
	}
	if m.Hdr.Status() != StatusOK {
		return m, ErrBadFlags
	}
	if len(m.Body) != m.Info.ReqSize {
		return m, ErrBadBody
	}
	return m, nil
}

// DecodeFromNIC decodes a message sent by the NIC to the driver: a reply
// (FlagReply; body empty unless the status is OK, then the reply size) or
// an event (FlagEvent, req_id 0, Event body). A Go peer of the driver (tests)
// uses it; the C driver applies the same rules.
func DecodeFromNIC(p []byte) (Msg, error) {
	m, err := decodeHdr(p)
	if err != nil {
		return m, err
	}
	switch m.Hdr.Flags() {
	case FlagReply:
		if m.Info.Kind != KindRequest {
			return m, ErrBadFlags
		}
		if m.Hdr.ReqID() == 0 {
			return m, ErrBadReqID
		}
		want := 0
		if m.Hdr.Status() == StatusOK {
			want = m.Info.ReplySize
		}
		if len(m.Body) != want {
			return m, ErrBadBody
		}
	case FlagEvent:
		if m.Info.Kind != KindEvent {
			return m, ErrBadFlags
		}
		if m.Hdr.ReqID() != 0 {
			return m, ErrBadReqID
		}
		if len(m.Body) != m.Info.ReqSize {
			return m, ErrBadBody
		}
	default:
		return m, ErrBadFlags
	}
	return m, nil
}

// ReplyStatus says how the NIC answers a request DecodeRequest rejected:
// the status to send, and ok=false when it must stay silent (the header is
// not a falconnic header, or the message is a doorbell or not a request).
func ReplyStatus(m Msg, err error) (s Status, ok bool) {
	if m.Hdr == nil || m.Hdr.ReqID() == 0 || m.Hdr.Flags()&(FlagNoReply|FlagReply|FlagEvent) != 0 {
		return 0, false
	}
	switch {
	case err == nil:
		return StatusOK, true
	case errors.Is(err, ErrBadVersion):
		return StatusBadVersion, true
	case errors.Is(err, ErrBadOpcode):
		return StatusBadOpcode, true
	case errors.Is(err, ErrBadLength), errors.Is(err, ErrBadBody):
		return StatusBadLength, true
	case errors.Is(err, ErrBadFlags):
		return StatusBadParam, true
	}
	return 0, false
}

// HdrFields are the variable fields of a header to build.
type HdrFields struct {
	Opcode   Opcode
	Flags    Flags
	Instance uint64
	ReqID    uint32
	Status   Status
}

// AppendFrame appends one control frame to dst: an Ethernet header with
// destination and source mac, the header, the body, and padding to 60 bytes.
func AppendFrame(dst []byte, mac [6]byte, f HdrFields, body []byte) []byte {
	start := len(dst)
	dst = append(dst, mac[:]...)
	dst = append(dst, mac[:]...)
	dst = binary.BigEndian.AppendUint16(dst, EtherType)
	hs := len(dst)
	dst = append(dst, make([]byte, HdrSize)...)
	h := Hdr(dst[hs:])
	h.SetMagic(Magic)
	h.SetVersion(Version)
	h.SetOpcode(f.Opcode)
	h.SetInstance(f.Instance)
	h.SetReqID(f.ReqID)
	h.SetFlags(f.Flags)
	h.SetLength(uint16(len(body)))
	h.SetStatus(f.Status)
	dst = append(dst, body...)
	for len(dst)-start < minFrame {
		dst = append(dst, 0)
	}
	return dst
}

// AppendReply appends the NIC's reply to request req (its header): same
// opcode, instance and req_id, FlagReply, the status, and body when the
// status is OK.
func AppendReply(dst []byte, mac [6]byte, req Hdr, s Status, body []byte) []byte {
	if s != StatusOK {
		body = nil
	}
	return AppendFrame(dst, mac, HdrFields{
		Opcode: req.Opcode(), Flags: FlagReply, Instance: req.Instance(),
		ReqID: req.ReqID(), Status: s,
	}, body)
}

// AppendEvent appends an event frame.
func AppendEvent(dst []byte, mac [6]byte, instance uint64, op Opcode, handle, code uint32, info uint64) []byte {
	var b [EventSize]byte
	ev := Event(b[:])
	ev.SetHandle(handle)
	ev.SetCode(code)
	ev.SetInfo(info)
	return AppendFrame(dst, mac, HdrFields{Opcode: op, Flags: FlagEvent, Instance: instance}, b[:])
}
