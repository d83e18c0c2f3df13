package vhostuser

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Request is a vhost-user front-end → back-end request code
// (vhost-user spec, "Front-end message types").
type Request uint32

// Request codes used by QEMU 7.2 (vhost-user spec numbering).
const (
	ReqGetFeatures         Request = 1
	ReqSetFeatures         Request = 2
	ReqSetOwner            Request = 3
	ReqResetOwner          Request = 4
	ReqSetMemTable         Request = 5
	ReqSetLogBase          Request = 6
	ReqSetLogFD            Request = 7
	ReqSetVringNum         Request = 8
	ReqSetVringAddr        Request = 9
	ReqSetVringBase        Request = 10
	ReqGetVringBase        Request = 11
	ReqSetVringKick        Request = 12
	ReqSetVringCall        Request = 13
	ReqSetVringErr         Request = 14
	ReqGetProtocolFeatures Request = 15
	ReqSetProtocolFeatures Request = 16
	ReqGetQueueNum         Request = 17
	ReqSetVringEnable      Request = 18
	ReqSendRARP            Request = 19
	ReqNetSetMTU           Request = 20
	ReqSetBackendReqFD     Request = 21
	ReqIOTLBMsg            Request = 22
	ReqSetVringEndian      Request = 23
	ReqGetConfig           Request = 24
	ReqSetConfig           Request = 25
	ReqGetInflightFD       Request = 31
	ReqSetInflightFD       Request = 32
	ReqResetDevice         Request = 34
	ReqGetMaxMemSlots      Request = 36
	ReqAddMemReg           Request = 37
	ReqRemMemReg           Request = 38
	ReqSetStatus           Request = 39
	ReqGetStatus           Request = 40
)

// Protocol feature bits (vhost-user spec, "Protocol features").
const (
	ProtoMQ                uint64 = 1 << 0
	ProtoLogSHMFD          uint64 = 1 << 1
	ProtoRARP              uint64 = 1 << 2
	ProtoReplyAck          uint64 = 1 << 3
	ProtoMTU               uint64 = 1 << 4
	ProtoBackendReq        uint64 = 1 << 5
	ProtoConfig            uint64 = 1 << 9
	ProtoInflightSHMFD     uint64 = 1 << 12
	ProtoResetDevice       uint64 = 1 << 13
	ProtoConfigureMemSlots uint64 = 1 << 15
	ProtoStatus            uint64 = 1 << 16
)

// Virtio feature bits the transport layer itself cares about (virtio 1.2 §6).
const (
	FeatureIndirectDesc     uint64 = 1 << 28
	FeatureEventIdx         uint64 = 1 << 29
	FeatureProtocolFeatures uint64 = 1 << 30 // VHOST_USER_F_PROTOCOL_FEATURES
	FeatureVersion1         uint64 = 1 << 32
)

// Header flags (vhost-user spec, "Header").
const (
	FlagVersion     uint32 = 0x1
	FlagReply       uint32 = 0x4
	FlagNeedReply   uint32 = 0x8
	flagVersionMask        = 0x3
)

// HeaderSize is the size of the fixed message header.
const HeaderSize = 12

// MaxPayload caps any payload we accept; larger frames reset the session.
const MaxPayload = 4096

// MaxMemRegions is the region count limit of SET_MEM_TABLE (VHOST_MEMORY_BASELINE_NREGIONS).
const MaxMemRegions = 8

// MaxConfigSize caps GET/SET_CONFIG (VHOST_USER_MAX_CONFIG_SIZE).
const MaxConfigSize = 256

// VringNoFD is bit 8 of a vring file payload: no fd is passed.
const VringNoFD = 1 << 8

// Header is a byte view of the 12-byte message header.
type Header []byte

// Request returns the request code.
func (h Header) Request() Request { return Request(binary.LittleEndian.Uint32(h[0:])) }

// Flags returns the flags word.
func (h Header) Flags() uint32 { return binary.LittleEndian.Uint32(h[4:]) }

// Size returns the payload size.
func (h Header) Size() uint32 { return binary.LittleEndian.Uint32(h[8:]) }

// SetRequest sets the request code.
func (h Header) SetRequest(r Request) { binary.LittleEndian.PutUint32(h[0:], uint32(r)) }

// SetFlags sets the flags word.
func (h Header) SetFlags(f uint32) { binary.LittleEndian.PutUint32(h[4:], f) }

// SetSize sets the payload size.
func (h Header) SetSize(n uint32) { binary.LittleEndian.PutUint32(h[8:], n) }

// sizeRule says which payload sizes and fd counts a request accepts.
type sizeRule struct {
	name     string
	min, max uint32 // payload size bounds (inclusive)
	minFDs   int
	maxFDs   int
	reply    bool // the back-end always answers (GET_* requests)
}

// requests is the table of every request we understand. Requests not in the
// table are answered with a failed ack (if one is asked for) and counted.
var requests = map[Request]sizeRule{
	ReqGetFeatures:         {"GET_FEATURES", 0, 8, 0, 0, true},
	ReqSetFeatures:         {"SET_FEATURES", 8, 8, 0, 0, false},
	ReqSetOwner:            {"SET_OWNER", 0, 8, 0, 0, false},
	ReqResetOwner:          {"RESET_OWNER", 0, 8, 0, 0, false},
	ReqSetMemTable:         {"SET_MEM_TABLE", 8, 8 + 32*MaxMemRegions, 0, MaxMemRegions, false},
	ReqSetLogBase:          {"SET_LOG_BASE", 8, 16, 0, 1, false},
	ReqSetLogFD:            {"SET_LOG_FD", 0, 8, 0, 1, false},
	ReqSetVringNum:         {"SET_VRING_NUM", 8, 8, 0, 0, false},
	ReqSetVringAddr:        {"SET_VRING_ADDR", 40, 40, 0, 0, false},
	ReqSetVringBase:        {"SET_VRING_BASE", 8, 8, 0, 0, false},
	ReqGetVringBase:        {"GET_VRING_BASE", 8, 8, 0, 0, true},
	ReqSetVringKick:        {"SET_VRING_KICK", 8, 8, 0, 1, false},
	ReqSetVringCall:        {"SET_VRING_CALL", 8, 8, 0, 1, false},
	ReqSetVringErr:         {"SET_VRING_ERR", 8, 8, 0, 1, false},
	ReqGetProtocolFeatures: {"GET_PROTOCOL_FEATURES", 0, 8, 0, 0, true},
	ReqSetProtocolFeatures: {"SET_PROTOCOL_FEATURES", 8, 8, 0, 0, false},
	ReqGetQueueNum:         {"GET_QUEUE_NUM", 0, 8, 0, 0, true},
	ReqSetVringEnable:      {"SET_VRING_ENABLE", 8, 8, 0, 0, false},
	ReqSendRARP:            {"SEND_RARP", 8, 8, 0, 0, false},
	ReqNetSetMTU:           {"NET_SET_MTU", 8, 8, 0, 0, false},
	ReqSetBackendReqFD:     {"SET_BACKEND_REQ_FD", 0, 8, 0, 1, false},
	ReqIOTLBMsg:            {"IOTLB_MSG", 0, 64, 0, 0, false},
	ReqSetVringEndian:      {"SET_VRING_ENDIAN", 8, 8, 0, 0, false},
	ReqGetConfig:           {"GET_CONFIG", 12, 12 + MaxConfigSize, 0, 0, true},
	ReqSetConfig:           {"SET_CONFIG", 12, 12 + MaxConfigSize, 0, 0, false},
	ReqGetInflightFD:       {"GET_INFLIGHT_FD", 24, 24, 0, 0, true},
	ReqSetInflightFD:       {"SET_INFLIGHT_FD", 24, 24, 1, 1, false},
	ReqResetDevice:         {"RESET_DEVICE", 0, 8, 0, 0, false},
	ReqGetMaxMemSlots:      {"GET_MAX_MEM_SLOTS", 0, 8, 0, 0, true},
	ReqAddMemReg:           {"ADD_MEM_REG", 40, 40, 1, 1, false},
	ReqRemMemReg:           {"REM_MEM_REG", 40, 40, 0, 1, false},
	ReqSetStatus:           {"SET_STATUS", 8, 8, 0, 0, false},
	ReqGetStatus:           {"GET_STATUS", 0, 8, 0, 0, true},
}

// String names the request as the spec does.
func (r Request) String() string {
	if rule, ok := requests[r]; ok {
		return rule.name
	}
	return fmt.Sprintf("REQUEST_%d", uint32(r))
}

// Codec errors. Each has its own counter in Counters.
var (
	ErrBadVersion     = errors.New("vhostuser: bad header version")
	ErrReplyFlag      = errors.New("vhostuser: front-end message with REPLY flag")
	ErrPayloadTooBig  = errors.New("vhostuser: payload too big")
	ErrBadSize        = errors.New("vhostuser: bad payload size for request")
	ErrBadFDCount     = errors.New("vhostuser: wrong number of fds for request")
	ErrUnknownRequest = errors.New("vhostuser: unknown request")
	ErrBadPayload     = errors.New("vhostuser: malformed payload")
)

// Msg is one decoded front-end message. Payload aliases the read buffer.
type Msg struct {
	Request Request
	Flags   uint32
	Payload []byte
	FDs     []int
}

// NeedReply reports whether the front-end asked for a REPLY_ACK.
func (m *Msg) NeedReply() bool { return m.Flags&FlagNeedReply != 0 }

// CheckHeader validates a header before its payload is read: version, no
// REPLY flag, size within MaxPayload.
func CheckHeader(h Header) error {
	if h.Flags()&flagVersionMask != FlagVersion {
		return ErrBadVersion
	}
	if h.Flags()&FlagReply != 0 {
		return ErrReplyFlag
	}
	if h.Size() > MaxPayload {
		return ErrPayloadTooBig
	}
	return nil
}

// Validate checks a whole message against the request table: payload size
// and fd count, plus the request-specific shape (SET_MEM_TABLE region count
// against its fds, vring file fd bit, GET/SET_CONFIG size field). It never
// keeps references and never panics.
func Validate(m *Msg) error {
	rule, ok := requests[m.Request]
	if !ok {
		return ErrUnknownRequest
	}
	n := uint32(len(m.Payload))
	if n < rule.min || n > rule.max {
		return ErrBadSize
	}
	if len(m.FDs) < rule.minFDs || len(m.FDs) > rule.maxFDs {
		return ErrBadFDCount
	}
	switch m.Request {
	case ReqSetMemTable:
		nr := binary.LittleEndian.Uint32(m.Payload)
		if nr > MaxMemRegions || n != 8+32*nr {
			return ErrBadSize
		}
		if len(m.FDs) != int(nr) {
			return ErrBadFDCount
		}
	case ReqSetVringKick, ReqSetVringCall, ReqSetVringErr:
		v := binary.LittleEndian.Uint64(m.Payload)
		if v&^uint64(0x1ff) != 0 {
			return ErrBadPayload
		}
		want := 1
		if v&VringNoFD != 0 {
			want = 0
		}
		if len(m.FDs) != want {
			return ErrBadFDCount
		}
	case ReqGetConfig, ReqSetConfig:
		c := ConfigMsg(m.Payload)
		if c.Size() > MaxConfigSize || n != 12+c.Size() && !(m.Request == ReqGetConfig && n == 12) {
			return ErrBadSize
		}
	}
	return nil
}

// U64 reads a u64 payload.
func U64(p []byte) uint64 { return binary.LittleEndian.Uint64(p) }

// VringState is a byte view of {u32 index, u32 num}.
type VringState []byte

// Index returns the ring index.
func (v VringState) Index() uint32 { return binary.LittleEndian.Uint32(v[0:]) }

// Num returns the number (size or base).
func (v VringState) Num() uint32 { return binary.LittleEndian.Uint32(v[4:]) }

// VringAddr is a byte view of {u32 index, u32 flags, u64 desc, u64 used, u64 avail, u64 log}.
// Ring addresses are front-end (QEMU) virtual addresses.
type VringAddr []byte

// Index returns the ring index.
func (v VringAddr) Index() uint32 { return binary.LittleEndian.Uint32(v[0:]) }

// Flags returns the flags (bit 0: log).
func (v VringAddr) Flags() uint32 { return binary.LittleEndian.Uint32(v[4:]) }

// Desc returns the descriptor table address.
func (v VringAddr) Desc() uint64 { return binary.LittleEndian.Uint64(v[8:]) }

// Used returns the used ring address.
func (v VringAddr) Used() uint64 { return binary.LittleEndian.Uint64(v[16:]) }

// Avail returns the available ring address.
func (v VringAddr) Avail() uint64 { return binary.LittleEndian.Uint64(v[24:]) }

// MemRegion is a byte view of {u64 gpa, u64 size, u64 uva, u64 mmap_offset}.
type MemRegion []byte

// GPA returns the guest-physical start.
func (r MemRegion) GPA() uint64 { return binary.LittleEndian.Uint64(r[0:]) }

// Size returns the region size.
func (r MemRegion) Size() uint64 { return binary.LittleEndian.Uint64(r[8:]) }

// UVA returns the front-end virtual start.
func (r MemRegion) UVA() uint64 { return binary.LittleEndian.Uint64(r[16:]) }

// MmapOffset returns the offset of the region in its fd.
func (r MemRegion) MmapOffset() uint64 { return binary.LittleEndian.Uint64(r[24:]) }

// Regions returns the region views of a validated SET_MEM_TABLE payload.
func MemTableRegions(p []byte) []MemRegion {
	nr := binary.LittleEndian.Uint32(p)
	out := make([]MemRegion, nr)
	for i := range out {
		out[i] = MemRegion(p[8+32*i : 8+32*(i+1)])
	}
	return out
}

// ConfigMsg is a byte view of {u32 offset, u32 size, u32 flags, u8 data[size]}.
type ConfigMsg []byte

// Offset returns the config space offset.
func (c ConfigMsg) Offset() uint32 { return binary.LittleEndian.Uint32(c[0:]) }

// Size returns the data size.
func (c ConfigMsg) Size() uint32 { return binary.LittleEndian.Uint32(c[4:]) }

// Flags returns the flags.
func (c ConfigMsg) Flags() uint32 { return binary.LittleEndian.Uint32(c[8:]) }

// Data returns the data bytes (valid after Validate).
func (c ConfigMsg) Data() []byte { return c[12:] }

// InflightMsg is a byte view of {u64 mmap_size, u64 mmap_offset, u16 num_queues, u16 queue_size, pad}.
type InflightMsg []byte

// MmapSize returns the region size.
func (m InflightMsg) MmapSize() uint64 { return binary.LittleEndian.Uint64(m[0:]) }

// MmapOffset returns the region offset in its fd.
func (m InflightMsg) MmapOffset() uint64 { return binary.LittleEndian.Uint64(m[8:]) }

// NumQueues returns the queue count.
func (m InflightMsg) NumQueues() uint16 { return binary.LittleEndian.Uint16(m[16:]) }

// QueueSize returns the queue size.
func (m InflightMsg) QueueSize() uint16 { return binary.LittleEndian.Uint16(m[18:]) }

// PutInflight encodes an inflight payload into p (24 bytes).
func PutInflight(p []byte, size, off uint64, nq, qs uint16) {
	binary.LittleEndian.PutUint64(p[0:], size)
	binary.LittleEndian.PutUint64(p[8:], off)
	binary.LittleEndian.PutUint16(p[16:], nq)
	binary.LittleEndian.PutUint16(p[18:], qs)
	clear(p[20:24])
}
