package wire

import (
	"errors"
	"strconv"
)

// RDMA over Falcon ULP headers [R §5]: every RDMA packet's Falcon payload
// starts with the 12-byte RDMA Base Transport Header (RBTH), followed by the
// extension headers its opcode requires, then data.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-------+-----------------------------+-+---+-+-+---------------+
//	|Version|          Reserved           |C|Pad|A|S|    Opcode     | W0
//	+-------+-----------------------------+-+---+-+-+---------------+
//	|          Destination QP (24)                  |   Reserved    | W1
//	+-----------------------------------------------+---------------+
//	|                    Sequence Number (SN)                       | W2
//	+---------------------------------------------------------------+
//
// C = CE (complete-in-error, Last/Only packets), Pad = pad count, A = AckReq,
// S = SE (solicited event). The RBTH figure of [R] labels bit 22 "R" while
// its table lists an AckReq bit without a position; this package puts
// AckReq at bit 22.

// RBTHLen is the length of the RDMA Base Transport Header.
const RBTHLen = 12

// RDMAVersion is the RBTH version.
const RDMAVersion = 1

// Extension header lengths [R §5.2].
const (
	RETHLen         = 16 // VA 64, R_Key 32, DMA Length 32
	SETHLen         = 4  // RMSN 32
	OETHLen         = 4  // Send message offset 32
	STETHLen        = 12 // initiator sink VA 64, L_Key 32
	ImmDtLen        = 4  // immediate data
	AtomicETHLen    = 28 // VA 64, R_Key 32, Swap/Add 64, Compare 64
	AtomicAckETHLen = 8  // original remote data 64
	IETHLen         = 4  // R_Key to invalidate
	XRCETHLen       = 4  // Reserved 8, XRC SRQ 24
	DETHLen         = 8  // Q_Key 32, Reserved 8, Source QP 24
)

// RBTH is a view of the RDMA Base Transport Header.
type RBTH []byte

// Version returns W0 bits 0:3.
func (h RBTH) Version() uint8 { return h[0] >> 4 }

// SetVersion sets W0 bits 0:3.
func (h RBTH) SetVersion(v uint8) { h[0] = h[0]&0x0f | v<<4 }

// CE returns the complete-in-error bit, W0 bit 19.
func (h RBTH) CE() bool { return h[2]&0x10 != 0 }

// SetCE sets W0 bit 19.
func (h RBTH) SetCE(v bool) { h[2] = h[2]&^0x10 | boolBit(v)<<4 }

// Pad returns the pad count, W0 bits 20:21.
func (h RBTH) Pad() uint8 { return h[2] >> 2 & 3 }

// SetPad sets W0 bits 20:21 (low 2 bits of n).
func (h RBTH) SetPad(n uint8) { h[2] = h[2]&^0x0c | (n&3)<<2 }

// AckReq returns W0 bit 22 (see the type's comment).
func (h RBTH) AckReq() bool { return h[2]&0x02 != 0 }

// SetAckReq sets W0 bit 22.
func (h RBTH) SetAckReq(v bool) { h[2] = h[2]&^0x02 | boolBit(v)<<1 }

// SE returns the solicited-event bit, W0 bit 23.
func (h RBTH) SE() bool { return h[2]&0x01 != 0 }

// SetSE sets W0 bit 23.
func (h RBTH) SetSE(v bool) { h[2] = h[2]&^0x01 | boolBit(v) }

// Opcode returns W0 bits 24:31 (IB/RoCEv2 encoding).
func (h RBTH) Opcode() RDMAOpcode { return RDMAOpcode(h[3]) }

// SetOpcode sets W0 bits 24:31.
func (h RBTH) SetOpcode(op RDMAOpcode) { h[3] = byte(op) }

// DestQP returns the 24-bit destination QP number, W1 bits 0:23.
func (h RBTH) DestQP() uint32 { return get24(h[4:]) }

// SetDestQP sets W1 bits 0:23.
func (h RBTH) SetDestQP(qp uint32) { put24(h[4:], qp) }

// SN returns W2, the RDMA sequence number (first packet on a connection is
// 1; responses echo the request's SN).
func (h RBTH) SN() uint32 { return be.Uint32(h[8:]) }

// SetSN sets W2.
func (h RBTH) SetSN(sn uint32) { be.PutUint32(h[8:], sn) }

// RDMAExt names one RDMA extension header.
type RDMAExt uint8

// Extension headers, in the order they follow the RBTH when present.
const (
	ExtXRCETH RDMAExt = iota
	ExtDETH
	ExtRETH
	ExtSETH
	ExtOETH
	ExtSTETH
	ExtAtomicETH
	ExtAtomicAckETH
	ExtImmDt
	ExtIETH
	numRDMAExt
)

var rdmaExtInfo = [numRDMAExt]struct {
	name string
	len  int
}{
	ExtRETH:         {"RETH", RETHLen},
	ExtDETH:         {"DETH", DETHLen},
	ExtXRCETH:       {"XRCETH", XRCETHLen},
	ExtSETH:         {"SETH", SETHLen},
	ExtOETH:         {"OETH", OETHLen},
	ExtSTETH:        {"STETH", STETHLen},
	ExtAtomicETH:    {"AtomicETH", AtomicETHLen},
	ExtAtomicAckETH: {"AtomicAckETH", AtomicAckETHLen},
	ExtImmDt:        {"ImmDt", ImmDtLen},
	ExtIETH:         {"IETH", IETHLen},
}

// Len returns the header's length in bytes.
func (e RDMAExt) Len() int {
	if e < numRDMAExt {
		return rdmaExtInfo[e].len
	}
	return 0
}

// String returns the header's name.
func (e RDMAExt) String() string {
	if e < numRDMAExt {
		return rdmaExtInfo[e].name
	}
	return "RDMAExt(" + strconv.Itoa(int(e)) + ")"
}

// RDMAExtSet is a set of extension headers, bit e for RDMAExt e.
type RDMAExtSet uint16

// Has reports whether e is in the set.
func (s RDMAExtSet) Has(e RDMAExt) bool { return s&(1<<e) != 0 }

// Len returns the total length of the headers in the set.
func (s RDMAExtSet) Len() int {
	n := 0
	for e := RDMAExt(0); e < numRDMAExt; e++ {
		if s.Has(e) {
			n += e.Len()
		}
	}
	return n
}

func exts(es ...RDMAExt) RDMAExtSet {
	var s RDMAExtSet
	for _, e := range es {
		s |= 1 << e
	}
	return s
}

// RDMAOpcode is the RBTH opcode, in the IB/RoCEv2 encoding [R §5.3].
type RDMAOpcode uint8

// RDMA opcodes used over Falcon (RC, and UD for SEND Only).
const (
	OpSendFirst          RDMAOpcode = 0x00
	OpSendMiddle         RDMAOpcode = 0x01
	OpSendLast           RDMAOpcode = 0x02
	OpSendLastImm        RDMAOpcode = 0x03
	OpSendOnly           RDMAOpcode = 0x04
	OpSendOnlyImm        RDMAOpcode = 0x05
	OpWriteFirst         RDMAOpcode = 0x06
	OpWriteMiddle        RDMAOpcode = 0x07
	OpWriteLast          RDMAOpcode = 0x08
	OpWriteLastImm       RDMAOpcode = 0x09
	OpWriteOnly          RDMAOpcode = 0x0a
	OpWriteOnlyImm       RDMAOpcode = 0x0b
	OpReadRequest        RDMAOpcode = 0x0c
	OpReadResponseFirst  RDMAOpcode = 0x0d
	OpReadResponseMiddle RDMAOpcode = 0x0e
	OpReadResponseLast   RDMAOpcode = 0x0f
	OpReadResponseOnly   RDMAOpcode = 0x10
	OpAtomicResponse     RDMAOpcode = 0x12
	OpCompareSwap        RDMAOpcode = 0x13
	OpFetchAdd           RDMAOpcode = 0x14
	OpSendLastInv        RDMAOpcode = 0x16
	OpSendOnlyInv        RDMAOpcode = 0x17
	OpUDSendOnly         RDMAOpcode = 0x64
	OpUDSendOnlyImm      RDMAOpcode = 0x65
)

// RDMAOpInfo is one row of the opcode table: the Falcon packet type that
// carries the opcode and the extension headers after the RBTH.
type RDMAOpInfo struct {
	Name   string
	Falcon PacketType
	Ext    RDMAExtSet
	// First and Last mark the segment position (both for "Only").
	First, Last bool
}

// rdmaOps is the opcode table [R §5.3, digest §9.2]. SEND carries SETH
// (RMSN) and OETH (message offset); WRITE carries RETH in every packet so
// data can be placed out of order; READ requests carry RETH, SETH and the
// sink address (STETH) that responses echo. For atomics the [R] table
// lists AtomicAckETH on requests and AtomicETH on the response, inverted
// with respect to IB; this table follows IB: requests carry SETH, STETH and
// AtomicETH, the response STETH and AtomicAckETH.
var rdmaOps = [256]RDMAOpInfo{
	OpSendFirst:          {"SendFirst", TypePushData, exts(ExtSETH, ExtOETH), true, false},
	OpSendMiddle:         {"SendMiddle", TypePushData, exts(ExtSETH, ExtOETH), false, false},
	OpSendLast:           {"SendLast", TypePushData, exts(ExtSETH, ExtOETH), false, true},
	OpSendLastImm:        {"SendLastImm", TypePushData, exts(ExtSETH, ExtOETH, ExtImmDt), false, true},
	OpSendOnly:           {"SendOnly", TypePushData, exts(ExtSETH, ExtOETH), true, true},
	OpSendOnlyImm:        {"SendOnlyImm", TypePushData, exts(ExtSETH, ExtOETH, ExtImmDt), true, true},
	OpWriteFirst:         {"WriteFirst", TypePushData, exts(ExtRETH), true, false},
	OpWriteMiddle:        {"WriteMiddle", TypePushData, exts(ExtRETH), false, false},
	OpWriteLast:          {"WriteLast", TypePushData, exts(ExtRETH), false, true},
	OpWriteLastImm:       {"WriteLastImm", TypePushData, exts(ExtRETH, ExtSETH, ExtImmDt), false, true},
	OpWriteOnly:          {"WriteOnly", TypePushData, exts(ExtRETH), true, true},
	OpWriteOnlyImm:       {"WriteOnlyImm", TypePushData, exts(ExtRETH, ExtSETH, ExtImmDt), true, true},
	OpReadRequest:        {"ReadRequest", TypePullRequest, exts(ExtRETH, ExtSETH, ExtSTETH), true, true},
	OpReadResponseFirst:  {"ReadResponseFirst", TypePullData, exts(ExtSTETH), true, false},
	OpReadResponseMiddle: {"ReadResponseMiddle", TypePullData, exts(ExtSTETH), false, false},
	OpReadResponseLast:   {"ReadResponseLast", TypePullData, exts(ExtSTETH), false, true},
	OpReadResponseOnly:   {"ReadResponseOnly", TypePullData, exts(ExtSTETH), true, true},
	OpAtomicResponse:     {"AtomicResponse", TypePullData, exts(ExtSTETH, ExtAtomicAckETH), true, true},
	OpCompareSwap:        {"CompareSwap", TypePullRequest, exts(ExtSETH, ExtSTETH, ExtAtomicETH), true, true},
	OpFetchAdd:           {"FetchAdd", TypePullRequest, exts(ExtSETH, ExtSTETH, ExtAtomicETH), true, true},
	OpSendLastInv:        {"SendLastInv", TypePushData, exts(ExtSETH, ExtOETH, ExtIETH), false, true},
	OpSendOnlyInv:        {"SendOnlyInv", TypePushData, exts(ExtSETH, ExtOETH, ExtIETH), true, true},
	OpUDSendOnly:         {"UDSendOnly", TypePushData, exts(ExtDETH), true, true},
	OpUDSendOnlyImm:      {"UDSendOnlyImm", TypePushData, exts(ExtDETH, ExtImmDt), true, true},
}

// RDMAOpcodes lists every opcode of the table.
var RDMAOpcodes = []RDMAOpcode{
	OpSendFirst, OpSendMiddle, OpSendLast, OpSendLastImm, OpSendOnly, OpSendOnlyImm,
	OpWriteFirst, OpWriteMiddle, OpWriteLast, OpWriteLastImm, OpWriteOnly, OpWriteOnlyImm,
	OpReadRequest, OpReadResponseFirst, OpReadResponseMiddle, OpReadResponseLast, OpReadResponseOnly,
	OpAtomicResponse, OpCompareSwap, OpFetchAdd, OpSendLastInv, OpSendOnlyInv, OpUDSendOnly, OpUDSendOnlyImm,
}

// Info returns op's table row and whether op is used over Falcon.
func (op RDMAOpcode) Info() (RDMAOpInfo, bool) {
	i := rdmaOps[op]
	return i, i.Name != ""
}

// Valid reports whether op is in the table.
func (op RDMAOpcode) Valid() bool { _, ok := op.Info(); return ok }

// HeaderLen returns RBTH plus extension header bytes of op (0 if unknown).
func (op RDMAOpcode) HeaderLen() int {
	i, ok := op.Info()
	if !ok {
		return 0
	}
	return RBTHLen + i.Ext.Len()
}

// String returns the opcode's name or "RDMAOpcode(0xNN)".
func (op RDMAOpcode) String() string {
	if i, ok := op.Info(); ok {
		return i.Name
	}
	return "RDMAOpcode(0x" + strconv.FormatUint(uint64(op), 16) + ")"
}

// RDMA parse errors.
var (
	ErrRDMAShort   = errors.New("falcon: RDMA headers truncated")
	ErrRDMAVersion = errors.New("falcon: unsupported RBTH version")
	ErrRDMAOpcode  = errors.New("falcon: RDMA opcode not used over Falcon")
	ErrRDMAType    = errors.New("falcon: RDMA opcode carried by the wrong Falcon packet type")
)

// RDMA is a parsed RDMA ULP payload: the RBTH, the offsets of its extension
// headers and the data after them. It holds views into the packet; parsing
// does not allocate.
type RDMA struct {
	RBTH RBTH
	Op   RDMAOpcode
	Ext  RDMAExtSet
	off  [numRDMAExt]uint8
	b    []byte
	// Data is the bytes after the last extension header (pad included).
	Data []byte
}

// ParseRDMA parses the ULP payload of a Falcon packet of type falcon as RDMA
// headers: RBTH version 1, an opcode of the table carried by that Falcon
// type, and all its extension headers present.
func ParseRDMA(payload []byte, falcon PacketType) (RDMA, error) {
	if len(payload) < RBTHLen {
		return RDMA{}, ErrRDMAShort
	}
	h := RBTH(payload[:RBTHLen])
	if h.Version() != RDMAVersion {
		return RDMA{}, ErrRDMAVersion
	}
	info, ok := h.Opcode().Info()
	if !ok {
		return RDMA{}, ErrRDMAOpcode
	}
	if info.Falcon != falcon {
		return RDMA{}, ErrRDMAType
	}
	r := RDMA{RBTH: h, Op: h.Opcode(), Ext: info.Ext, b: payload}
	off := RBTHLen
	for e := RDMAExt(0); e < numRDMAExt; e++ {
		if info.Ext.Has(e) {
			r.off[e] = uint8(off)
			off += e.Len()
		}
	}
	if len(payload) < off {
		return RDMA{}, ErrRDMAShort
	}
	r.Data = payload[off:]
	return r, nil
}

// ext returns extension header e, or nil when the opcode has none.
func (r *RDMA) ext(e RDMAExt) []byte {
	if !r.Ext.Has(e) {
		return nil
	}
	o := int(r.off[e])
	return r.b[o : o+e.Len()]
}

// RETH returns the RDMA extended transport header, if present.
func (r *RDMA) RETH() (RETH, bool) { b := r.ext(ExtRETH); return RETH(b), b != nil }

// SETH returns the sequence extension header, if present.
func (r *RDMA) SETH() (SETH, bool) { b := r.ext(ExtSETH); return SETH(b), b != nil }

// OETH returns the offset extension header, if present.
func (r *RDMA) OETH() (OETH, bool) { b := r.ext(ExtOETH); return OETH(b), b != nil }

// STETH returns the sink extension header, if present.
func (r *RDMA) STETH() (STETH, bool) { b := r.ext(ExtSTETH); return STETH(b), b != nil }

// ImmDt returns the immediate data, if present.
func (r *RDMA) ImmDt() (uint32, bool) {
	b := r.ext(ExtImmDt)
	if b == nil {
		return 0, false
	}
	return be.Uint32(b), true
}

// IETH returns the R_Key to invalidate, if present.
func (r *RDMA) IETH() (uint32, bool) {
	b := r.ext(ExtIETH)
	if b == nil {
		return 0, false
	}
	return be.Uint32(b), true
}

// DETH returns the datagram extension header, if present.
func (r *RDMA) DETH() (DETH, bool) { b := r.ext(ExtDETH); return DETH(b), b != nil }

// AtomicETH returns the atomic request header, if present.
func (r *RDMA) AtomicETH() (AtomicETH, bool) { b := r.ext(ExtAtomicETH); return AtomicETH(b), b != nil }

// AtomicAckETH returns the atomic response's original remote data, if
// present.
func (r *RDMA) AtomicAckETH() (uint64, bool) {
	b := r.ext(ExtAtomicAckETH)
	if b == nil {
		return 0, false
	}
	return be.Uint64(b), true
}

// RETH is a view of the 16-byte RDMA extended transport header.
type RETH []byte

// VA returns the remote virtual address.
func (h RETH) VA() uint64 { return be.Uint64(h) }

// SetVA sets the remote virtual address.
func (h RETH) SetVA(v uint64) { be.PutUint64(h, v) }

// RKey returns the remote key.
func (h RETH) RKey() uint32 { return be.Uint32(h[8:]) }

// SetRKey sets the remote key.
func (h RETH) SetRKey(v uint32) { be.PutUint32(h[8:], v) }

// Length returns the DMA length.
func (h RETH) Length() uint32 { return be.Uint32(h[12:]) }

// SetLength sets the DMA length.
func (h RETH) SetLength(v uint32) { be.PutUint32(h[12:], v) }

// SETH is a view of the 4-byte sequence extension header.
type SETH []byte

// RMSN returns the request message sequence number (starts at 1; its low 8
// bits index the RQ WQE or IRRQ entry).
func (h SETH) RMSN() uint32 { return be.Uint32(h) }

// SetRMSN sets the RMSN.
func (h SETH) SetRMSN(v uint32) { be.PutUint32(h, v) }

// OETH is a view of the 4-byte offset extension header.
type OETH []byte

// Offset returns the byte offset of this segment in the Send message.
func (h OETH) Offset() uint32 { return be.Uint32(h) }

// SetOffset sets the offset.
func (h OETH) SetOffset(v uint32) { be.PutUint32(h, v) }

// STETH is a view of the 12-byte sink extension header.
type STETH []byte

// VA returns the initiator's sink virtual address.
func (h STETH) VA() uint64 { return be.Uint64(h) }

// SetVA sets the sink virtual address.
func (h STETH) SetVA(v uint64) { be.PutUint64(h, v) }

// LKey returns the sink's local key.
func (h STETH) LKey() uint32 { return be.Uint32(h[8:]) }

// SetLKey sets the local key.
func (h STETH) SetLKey(v uint32) { be.PutUint32(h[8:], v) }

// DETH is a view of the 8-byte datagram extension header.
type DETH []byte

// QKey returns the queue key.
func (h DETH) QKey() uint32 { return be.Uint32(h) }

// SetQKey sets the queue key.
func (h DETH) SetQKey(v uint32) { be.PutUint32(h, v) }

// SrcQP returns the 24-bit source QP.
func (h DETH) SrcQP() uint32 { return get24(h[5:]) }

// SetSrcQP sets the source QP (low 24 bits).
func (h DETH) SetSrcQP(v uint32) { put24(h[5:], v) }

// AtomicETH is a view of the 28-byte atomic request header.
type AtomicETH []byte

// VA returns the remote address.
func (h AtomicETH) VA() uint64 { return be.Uint64(h) }

// SetVA sets the remote address.
func (h AtomicETH) SetVA(v uint64) { be.PutUint64(h, v) }

// RKey returns the remote key.
func (h AtomicETH) RKey() uint32 { return be.Uint32(h[8:]) }

// SetRKey sets the remote key.
func (h AtomicETH) SetRKey(v uint32) { be.PutUint32(h[8:], v) }

// SwapAdd returns the swap (CompareSwap) or add (FetchAdd) operand.
func (h AtomicETH) SwapAdd() uint64 { return be.Uint64(h[12:]) }

// SetSwapAdd sets the swap/add operand.
func (h AtomicETH) SetSwapAdd(v uint64) { be.PutUint64(h[12:], v) }

// Compare returns the compare operand.
func (h AtomicETH) Compare() uint64 { return be.Uint64(h[20:]) }

// SetCompare sets the compare operand.
func (h AtomicETH) SetCompare(v uint64) { be.PutUint64(h[20:], v) }

// RDMAFields holds the RBTH and extension header fields of one RDMA packet,
// for building. Fields of headers the opcode does not carry are ignored.
type RDMAFields struct {
	Op        RDMAOpcode
	CE        bool
	Pad       uint8
	AckReq    bool
	SE        bool
	DestQP    uint32
	SN        uint32
	VA        uint64 // RETH or AtomicETH remote address
	RKey      uint32 // RETH or AtomicETH remote key
	DMALength uint32 // RETH
	RMSN      uint32 // SETH
	Offset    uint32 // OETH
	SinkVA    uint64 // STETH
	SinkLKey  uint32 // STETH
	Imm       uint32 // ImmDt
	InvRKey   uint32 // IETH
	QKey      uint32 // DETH
	SrcQP     uint32 // DETH
	SwapAdd   uint64 // AtomicETH
	Compare   uint64 // AtomicETH
	AtomicOrg uint64 // AtomicAckETH
}

// AppendRDMA appends the RBTH and extension headers of f.Op to b and
// returns the extended slice; data follows. It panics on an opcode outside
// the table (a programming error). It does not allocate when b has room.
func AppendRDMA(b []byte, f *RDMAFields) []byte {
	info, ok := f.Op.Info()
	if !ok {
		panic("wire: AppendRDMA with unknown opcode " + f.Op.String())
	}
	start := len(b)
	n := RBTHLen + info.Ext.Len()
	b = grow(b, n)
	clear(b[start:])
	h := RBTH(b[start : start+RBTHLen])
	h.SetVersion(RDMAVersion)
	h.SetCE(f.CE)
	h.SetPad(f.Pad)
	h.SetAckReq(f.AckReq)
	h.SetSE(f.SE)
	h.SetOpcode(f.Op)
	h.SetDestQP(f.DestQP)
	h.SetSN(f.SN)
	off := start + RBTHLen
	for e := RDMAExt(0); e < numRDMAExt; e++ {
		if !info.Ext.Has(e) {
			continue
		}
		x := b[off : off+e.Len()]
		off += e.Len()
		switch e {
		case ExtRETH:
			RETH(x).SetVA(f.VA)
			RETH(x).SetRKey(f.RKey)
			RETH(x).SetLength(f.DMALength)
		case ExtDETH:
			DETH(x).SetQKey(f.QKey)
			DETH(x).SetSrcQP(f.SrcQP)
		case ExtSETH:
			SETH(x).SetRMSN(f.RMSN)
		case ExtOETH:
			OETH(x).SetOffset(f.Offset)
		case ExtSTETH:
			STETH(x).SetVA(f.SinkVA)
			STETH(x).SetLKey(f.SinkLKey)
		case ExtAtomicETH:
			AtomicETH(x).SetVA(f.VA)
			AtomicETH(x).SetRKey(f.RKey)
			AtomicETH(x).SetSwapAdd(f.SwapAdd)
			AtomicETH(x).SetCompare(f.Compare)
		case ExtAtomicAckETH:
			be.PutUint64(x, f.AtomicOrg)
		case ExtImmDt:
			be.PutUint32(x, f.Imm)
		case ExtIETH:
			be.PutUint32(x, f.InvRKey)
		}
	}
	return b
}

// Fields returns r's header fields.
func (r *RDMA) Fields() RDMAFields {
	f := RDMAFields{Op: r.Op, CE: r.RBTH.CE(), Pad: r.RBTH.Pad(), AckReq: r.RBTH.AckReq(), SE: r.RBTH.SE(),
		DestQP: r.RBTH.DestQP(), SN: r.RBTH.SN()}
	if h, ok := r.RETH(); ok {
		f.VA, f.RKey, f.DMALength = h.VA(), h.RKey(), h.Length()
	}
	if h, ok := r.DETH(); ok {
		f.QKey, f.SrcQP = h.QKey(), h.SrcQP()
	}
	if h, ok := r.SETH(); ok {
		f.RMSN = h.RMSN()
	}
	if h, ok := r.OETH(); ok {
		f.Offset = h.Offset()
	}
	if h, ok := r.STETH(); ok {
		f.SinkVA, f.SinkLKey = h.VA(), h.LKey()
	}
	if h, ok := r.AtomicETH(); ok {
		f.VA, f.RKey, f.SwapAdd, f.Compare = h.VA(), h.RKey(), h.SwapAdd(), h.Compare()
	}
	f.AtomicOrg, _ = r.AtomicAckETH()
	f.Imm, _ = r.ImmDt()
	f.InvRKey, _ = r.IETH()
	return f
}
