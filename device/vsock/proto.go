package vsock

import (
	"encoding/binary"
	"errors"
)

// virtio-vsock wire format (virtio 1.2 §5.10.6): every packet starts with
// a 44-byte little-endian header, followed by len payload bytes (RW only).
const (
	// VsockHdrLen is sizeof(struct virtio_vsock_hdr) (virtio 1.2 §5.10.6).
	VsockHdrLen = 44
	// VsockHostCID is the well-known CID of the host (virtio 1.2 §5.10.4).
	VsockHostCID = 2
	// VsockTypeStream is VIRTIO_VSOCK_TYPE_STREAM, the only type we serve.
	VsockTypeStream = 1
	// vsockMaxPayload caps one packet's payload: the guest's 64 KiB
	// VIRTIO_VSOCK_MAX_PKT_BUF_SIZE (Linux, vhost).
	vsockMaxPayload = 64 << 10
	// vsockMinGuestCID: CIDs 0-2 are reserved, 0xffffffff is VMADDR_CID_ANY.
	vsockMinGuestCID = 3
	vsockMaxGuestCID = 0xffffffff - 1
)

// Op is the op field (virtio 1.2 §5.10.6).
type Op uint16

// Ops (virtio 1.2 §5.10.6).
const (
	VsockOpInvalid       Op = 0
	VsockOpRequest       Op = 1
	VsockOpResponse      Op = 2
	VsockOpRst           Op = 3
	VsockOpShutdown      Op = 4
	VsockOpRW            Op = 5
	VsockOpCreditUpdate  Op = 6
	VsockOpCreditRequest Op = 7
)

// vsockOpInfo is one row of the op table: its name and the flags it may
// carry (only SHUTDOWN has flags for a stream; only RW has a payload).
type vsockOpInfo struct {
	name       string
	hasPayload bool
	flagMask   uint32
}

// vsockOps is the op table, indexed by op.
var vsockOps = [...]vsockOpInfo{
	VsockOpInvalid:       {name: "INVALID"},
	VsockOpRequest:       {name: "REQUEST"},
	VsockOpResponse:      {name: "RESPONSE"},
	VsockOpRst:           {name: "RST"},
	VsockOpShutdown:      {name: "SHUTDOWN", flagMask: VsockShutdownRcv | VsockShutdownSend},
	VsockOpRW:            {name: "RW", hasPayload: true},
	VsockOpCreditUpdate:  {name: "CREDIT_UPDATE"},
	VsockOpCreditRequest: {name: "CREDIT_REQUEST"},
}

// SHUTDOWN flags (virtio 1.2 §5.10.6.5).
const (
	VsockShutdownRcv  uint32 = 1
	VsockShutdownSend uint32 = 2
)

func (o Op) String() string {
	if int(o) < len(vsockOps) && o != VsockOpInvalid {
		return vsockOps[o].name
	}
	return "OP?"
}

// Header field offsets.
const (
	vhSrcCID  = 0
	vhDstCID  = 8
	vhSrcPort = 16
	vhDstPort = 20
	vhLen     = 24
	vhType    = 28
	vhOp      = 30
	vhFlags   = 32
	vhBufAll  = 36
	vhFwdCnt  = 40
)

// Hdr is a byte view of struct virtio_vsock_hdr. It must be at least
// VsockHdrLen bytes (ParseHdr checks).
type Hdr []byte

// SrcCID returns src_cid.
func (h Hdr) SrcCID() uint64 { return binary.LittleEndian.Uint64(h[vhSrcCID:]) }

// DstCID returns dst_cid.
func (h Hdr) DstCID() uint64 { return binary.LittleEndian.Uint64(h[vhDstCID:]) }

// SrcPort returns src_port.
func (h Hdr) SrcPort() uint32 { return binary.LittleEndian.Uint32(h[vhSrcPort:]) }

// DstPort returns dst_port.
func (h Hdr) DstPort() uint32 { return binary.LittleEndian.Uint32(h[vhDstPort:]) }

// Len returns len, the payload length.
func (h Hdr) Len() uint32 { return binary.LittleEndian.Uint32(h[vhLen:]) }

// Type returns type.
func (h Hdr) Type() uint16 { return binary.LittleEndian.Uint16(h[vhType:]) }

// Op returns op.
func (h Hdr) Op() Op { return Op(binary.LittleEndian.Uint16(h[vhOp:])) }

// Flags returns flags.
func (h Hdr) Flags() uint32 { return binary.LittleEndian.Uint32(h[vhFlags:]) }

// BufAlloc returns buf_alloc, the sender's receive buffer size.
func (h Hdr) BufAlloc() uint32 { return binary.LittleEndian.Uint32(h[vhBufAll:]) }

// FwdCnt returns fwd_cnt, the bytes the sender has consumed.
func (h Hdr) FwdCnt() uint32 { return binary.LittleEndian.Uint32(h[vhFwdCnt:]) }

// SetSrcCID sets src_cid.
func (h Hdr) SetSrcCID(v uint64) { binary.LittleEndian.PutUint64(h[vhSrcCID:], v) }

// SetDstCID sets dst_cid.
func (h Hdr) SetDstCID(v uint64) { binary.LittleEndian.PutUint64(h[vhDstCID:], v) }

// SetSrcPort sets src_port.
func (h Hdr) SetSrcPort(v uint32) { binary.LittleEndian.PutUint32(h[vhSrcPort:], v) }

// SetDstPort sets dst_port.
func (h Hdr) SetDstPort(v uint32) { binary.LittleEndian.PutUint32(h[vhDstPort:], v) }

// SetLen sets len.
func (h Hdr) SetLen(v uint32) { binary.LittleEndian.PutUint32(h[vhLen:], v) }

// SetType sets type.
func (h Hdr) SetType(v uint16) { binary.LittleEndian.PutUint16(h[vhType:], v) }

// SetOp sets op.
func (h Hdr) SetOp(v Op) { binary.LittleEndian.PutUint16(h[vhOp:], uint16(v)) }

// SetFlags sets flags.
func (h Hdr) SetFlags(v uint32) { binary.LittleEndian.PutUint32(h[vhFlags:], v) }

// SetBufAlloc sets buf_alloc.
func (h Hdr) SetBufAlloc(v uint32) { binary.LittleEndian.PutUint32(h[vhBufAll:], v) }

// SetFwdCnt sets fwd_cnt.
func (h Hdr) SetFwdCnt(v uint32) { binary.LittleEndian.PutUint32(h[vhFwdCnt:], v) }

// Errors of ParseHdr, one per cause (each has its own counter).
var (
	ErrVsockShort     = errors.New("vsock: header shorter than 44 bytes")
	ErrVsockType      = errors.New("vsock: type is not STREAM")
	ErrVsockOp        = errors.New("vsock: unknown op")
	ErrVsockFlags     = errors.New("vsock: flags not allowed for op")
	ErrVsockLen       = errors.New("vsock: len does not match the payload")
	ErrVsockTooBig    = errors.New("vsock: payload over 64 KiB")
	ErrVsockSrcCID    = errors.New("vsock: src_cid is not the guest's")
	ErrVsockDstCID    = errors.New("vsock: dst_cid is not the host")
	ErrVsockNoPayload = errors.New("vsock: RW without payload")
)

// ParseHdr checks a packet the guest sent: b holds the header and
// then exactly the payload (the readable part of a TX chain). It returns
// the header view and the payload, or one error per cause. guestCID is the
// configured CID; the destination must be the host.
func ParseHdr(b []byte, guestCID uint64) (Hdr, []byte, error) {
	if len(b) < VsockHdrLen {
		return nil, nil, ErrVsockShort
	}
	h := Hdr(b[:VsockHdrLen])
	payload := b[VsockHdrLen:]
	op := h.Op()
	if op == VsockOpInvalid || int(op) >= len(vsockOps) {
		return nil, nil, ErrVsockOp
	}
	info := vsockOps[op]
	switch {
	case h.Type() != VsockTypeStream:
		return nil, nil, ErrVsockType
	case h.SrcCID() != guestCID:
		return nil, nil, ErrVsockSrcCID
	case h.DstCID() != VsockHostCID:
		return nil, nil, ErrVsockDstCID
	case h.Flags()&^info.flagMask != 0:
		return nil, nil, ErrVsockFlags
	case h.Len() > vsockMaxPayload:
		return nil, nil, ErrVsockTooBig
	case uint64(h.Len()) != uint64(len(payload)):
		return nil, nil, ErrVsockLen
	case !info.hasPayload && h.Len() != 0:
		return nil, nil, ErrVsockLen
	case info.hasPayload && h.Len() == 0:
		return nil, nil, ErrVsockNoPayload
	}
	return h, payload, nil
}

// putVsockHdr fills a host-to-guest header.
func putVsockHdr(h Hdr, guestCID uint64, hostPort, guestPort uint32, op Op, flags, n, bufAlloc, fwdCnt uint32) {
	h.SetSrcCID(VsockHostCID)
	h.SetDstCID(guestCID)
	h.SetSrcPort(hostPort)
	h.SetDstPort(guestPort)
	h.SetLen(n)
	h.SetType(VsockTypeStream)
	h.SetOp(op)
	h.SetFlags(flags)
	h.SetBufAlloc(bufAlloc)
	h.SetFwdCnt(fwdCnt)
}
