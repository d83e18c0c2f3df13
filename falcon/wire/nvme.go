package wire

import (
	"errors"
	"strconv"
)

// NVMe over Falcon ULP headers [N §7]. Every NVMe packet's Falcon payload
// starts with the 32-byte NVMe Base Transport Header (NBTH):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-------+-------+-----------------------------------------------+
//	|Version|PktType|          Initiator Function (24)              | W0
//	+---+-+-+-+-----+-----------------------------------------------+
//	|Rsv|I|S|N| Rsv |              Target Tag (24)                  | W1
//	+---+-+-+-+-----+-----------------------------------------------+
//	| NCNT Total    |              Initiator Tag (24)               | W2
//	+---------------+-----------------------------------------------+
//	| NCNT Offset   |              iCMD Identifier (24)             | W3
//	+---------------+-----------------------------------------------+
//	|                      Reserved (W4-W7)                         |
//
// I = INV (write data invalid), S = command split, N = NG (nCMD group).
// Read and Write Requests add a 32-byte command (NVMeCmd); Read Responses
// and Write Completions add a 4-byte status word (NVMe CQE status, 15 bits)
// before any data; Write Data Requests carry the NBTH only.

// NBTHLen is the length of the NVMe Base Transport Header.
const NBTHLen = 32

// NVMeVersion is the NBTH version.
const NVMeVersion = 1

// Lengths of the NVMe headers after the NBTH.
const (
	NVMeCmdLen    = 32 // Read / Write Request command
	NVMeStatusLen = 4  // Read Response / Write Completion status word
)

// NVMePacketType is the NBTH's 4-bit packet type [N §7.1].
type NVMePacketType uint8

// NVMe packet types; 6-15 are reserved.
const (
	NVMeWriteRequest      NVMePacketType = 0 // initiator → target, push
	NVMeWriteDataRequest  NVMePacketType = 1 // target → initiator, pull request
	NVMeWriteDataResponse NVMePacketType = 2 // initiator → target, pull data (write data)
	NVMeWriteCompletion   NVMePacketType = 3 // target → initiator, push
	NVMeReadRequest       NVMePacketType = 4 // initiator → target, push
	NVMeReadResponse      NVMePacketType = 5 // target → initiator, push (read data)
)

// NVMeTypeInfo is one row of the NVMe packet type table.
type NVMeTypeInfo struct {
	Name      string
	Falcon    PacketType // Falcon packet type that carries it
	HeaderLen int        // NBTH plus command or status bytes
	Data      bool       // data follows the headers
}

var nvmeTypes = [16]NVMeTypeInfo{
	NVMeWriteRequest:      {"WriteRequest", TypePushData, NBTHLen + NVMeCmdLen, false},
	NVMeWriteDataRequest:  {"WriteDataRequest", TypePullRequest, NBTHLen, false},
	NVMeWriteDataResponse: {"WriteDataResponse", TypePullData, NBTHLen, true},
	NVMeWriteCompletion:   {"WriteCompletion", TypePushData, NBTHLen + NVMeStatusLen, false},
	NVMeReadRequest:       {"ReadRequest", TypePushData, NBTHLen + NVMeCmdLen, false},
	NVMeReadResponse:      {"ReadResponse", TypePushData, NBTHLen + NVMeStatusLen, true},
}

// NVMePacketTypes lists every defined NVMe packet type.
var NVMePacketTypes = []NVMePacketType{NVMeWriteRequest, NVMeWriteDataRequest, NVMeWriteDataResponse, NVMeWriteCompletion, NVMeReadRequest, NVMeReadResponse}

// Info returns t's row and whether t is defined.
func (t NVMePacketType) Info() (NVMeTypeInfo, bool) {
	if int(t) >= len(nvmeTypes) || nvmeTypes[t].Name == "" {
		return NVMeTypeInfo{}, false
	}
	return nvmeTypes[t], true
}

// String returns the type's name or "NVMePacketType(n)".
func (t NVMePacketType) String() string {
	if i, ok := t.Info(); ok {
		return i.Name
	}
	return "NVMePacketType(" + strconv.Itoa(int(t)) + ")"
}

// NBTH is a view of the NVMe Base Transport Header.
type NBTH []byte

// Version returns W0 bits 0:3.
func (h NBTH) Version() uint8 { return h[0] >> 4 }

// SetVersion sets W0 bits 0:3.
func (h NBTH) SetVersion(v uint8) { h[0] = h[0]&0x0f | v<<4 }

// Type returns the NVMe packet type, W0 bits 4:7.
func (h NBTH) Type() NVMePacketType { return NVMePacketType(h[0] & 0x0f) }

// SetType sets W0 bits 4:7.
func (h NBTH) SetType(t NVMePacketType) { h[0] = h[0]&0xf0 | byte(t&0x0f) }

// InitiatorFunction returns W0 bits 8:31.
func (h NBTH) InitiatorFunction() uint32 { return get24(h[1:]) }

// SetInitiatorFunction sets W0 bits 8:31.
func (h NBTH) SetInitiatorFunction(v uint32) { put24(h[1:], v) }

// INV returns W1 bit 2: the write data is invalid (e.g. a PI failure at the
// initiator).
func (h NBTH) INV() bool { return h[4]&0x20 != 0 }

// SetINV sets W1 bit 2.
func (h NBTH) SetINV(v bool) { h[4] = h[4]&^0x20 | boolBit(v)<<5 }

// Split returns W1 bit 3 (S): the iCMD was split into two tCMDs.
func (h NBTH) Split() bool { return h[4]&0x10 != 0 }

// SetSplit sets W1 bit 3.
func (h NBTH) SetSplit(v bool) { h[4] = h[4]&^0x10 | boolBit(v)<<4 }

// NG returns W1 bit 4: the nCMD group (false = first stripe, true = second).
func (h NBTH) NG() bool { return h[4]&0x08 != 0 }

// SetNG sets W1 bit 4.
func (h NBTH) SetNG(v bool) { h[4] = h[4]&^0x08 | boolBit(v)<<3 }

// TargetTag returns W1 bits 8:31, the target's tCMD state id.
func (h NBTH) TargetTag() uint32 { return get24(h[5:]) }

// SetTargetTag sets W1 bits 8:31.
func (h NBTH) SetTargetTag(v uint32) { put24(h[5:], v) }

// NCNTTotal returns W2 bits 0:7, the 0-based number of nCMDs of the iCMD.
func (h NBTH) NCNTTotal() uint8 { return h[8] }

// SetNCNTTotal sets W2 bits 0:7.
func (h NBTH) SetNCNTTotal(v uint8) { h[8] = v }

// InitiatorTag returns W2 bits 8:31, the initiator's nCMD state id.
func (h NBTH) InitiatorTag() uint32 { return get24(h[9:]) }

// SetInitiatorTag sets W2 bits 8:31.
func (h NBTH) SetInitiatorTag(v uint32) { put24(h[9:], v) }

// NCNTOffset returns W3 bits 0:7, this nCMD's index in the iCMD.
func (h NBTH) NCNTOffset() uint8 { return h[12] }

// SetNCNTOffset sets W3 bits 0:7.
func (h NBTH) SetNCNTOffset(v uint8) { h[12] = v }

// ICMD returns W3 bits 8:31, the iCMD identifier.
func (h NBTH) ICMD() uint32 { return get24(h[13:]) }

// SetICMD sets W3 bits 8:31.
func (h NBTH) SetICMD(v uint32) { put24(h[13:], v) }

// NVMeCmd is a view of the 32-byte command of a Read or Write Request. The
// field order follows [N]; bit positions inside the words are this
// package's reading of the figure:
//
//	C0  Initiator NSID(16) Target NSID(16)
//	C1-C2 Target SLBA(64)
//	C3  NLB(16) Reserved(10) PRINFO(4) FUA(1) LR(1)
//	C4  DSM(8) DTYPE(4, write) Reserved(4) DSPEC(16, write)
//	C5  EILBRT (read) / ILBRT (write)
//	C6  ELBATM / LBATM(16) ELBAT / LBAT(16)
//	C7  Reserved(24) Target SQID(8)
type NVMeCmd []byte

// InitiatorNSID returns C0 bits 0:15.
func (c NVMeCmd) InitiatorNSID() uint16 { return be.Uint16(c) }

// SetInitiatorNSID sets C0 bits 0:15.
func (c NVMeCmd) SetInitiatorNSID(v uint16) { be.PutUint16(c, v) }

// TargetNSID returns C0 bits 16:31.
func (c NVMeCmd) TargetNSID() uint16 { return be.Uint16(c[2:]) }

// SetTargetNSID sets C0 bits 16:31.
func (c NVMeCmd) SetTargetNSID(v uint16) { be.PutUint16(c[2:], v) }

// SLBA returns the target starting LBA (C1-C2).
func (c NVMeCmd) SLBA() uint64 { return be.Uint64(c[4:]) }

// SetSLBA sets the target starting LBA.
func (c NVMeCmd) SetSLBA(v uint64) { be.PutUint64(c[4:], v) }

// NLB returns the 0-based number of logical blocks (C3 bits 0:15).
func (c NVMeCmd) NLB() uint16 { return be.Uint16(c[12:]) }

// SetNLB sets C3 bits 0:15.
func (c NVMeCmd) SetNLB(v uint16) { be.PutUint16(c[12:], v) }

// PRINFO returns C3 bits 26:29, the protection information field.
func (c NVMeCmd) PRINFO() uint8 { return c[15] >> 2 & 0x0f }

// SetPRINFO sets C3 bits 26:29.
func (c NVMeCmd) SetPRINFO(v uint8) { c[15] = c[15]&^0x3c | (v&0x0f)<<2 }

// FUA returns C3 bit 30 (force unit access).
func (c NVMeCmd) FUA() bool { return c[15]&0x02 != 0 }

// SetFUA sets C3 bit 30.
func (c NVMeCmd) SetFUA(v bool) { c[15] = c[15]&^0x02 | boolBit(v)<<1 }

// LR returns C3 bit 31 (limited retry).
func (c NVMeCmd) LR() bool { return c[15]&0x01 != 0 }

// SetLR sets C3 bit 31.
func (c NVMeCmd) SetLR(v bool) { c[15] = c[15]&^0x01 | boolBit(v) }

// DSM returns C4 bits 0:7 (dataset management).
func (c NVMeCmd) DSM() uint8 { return c[16] }

// SetDSM sets C4 bits 0:7.
func (c NVMeCmd) SetDSM(v uint8) { c[16] = v }

// DTYPE returns C4 bits 8:11 (directive type, writes).
func (c NVMeCmd) DTYPE() uint8 { return c[17] >> 4 }

// SetDTYPE sets C4 bits 8:11.
func (c NVMeCmd) SetDTYPE(v uint8) { c[17] = c[17]&0x0f | (v&0x0f)<<4 }

// DSPEC returns C4 bits 16:31 (directive specific, writes).
func (c NVMeCmd) DSPEC() uint16 { return be.Uint16(c[18:]) }

// SetDSPEC sets C4 bits 16:31.
func (c NVMeCmd) SetDSPEC(v uint16) { be.PutUint16(c[18:], v) }

// RefTag returns C5: EILBRT for reads, ILBRT for writes.
func (c NVMeCmd) RefTag() uint32 { return be.Uint32(c[20:]) }

// SetRefTag sets C5.
func (c NVMeCmd) SetRefTag(v uint32) { be.PutUint32(c[20:], v) }

// AppTagMask returns C6 bits 0:15: ELBATM / LBATM.
func (c NVMeCmd) AppTagMask() uint16 { return be.Uint16(c[24:]) }

// SetAppTagMask sets C6 bits 0:15.
func (c NVMeCmd) SetAppTagMask(v uint16) { be.PutUint16(c[24:], v) }

// AppTag returns C6 bits 16:31: ELBAT / LBAT.
func (c NVMeCmd) AppTag() uint16 { return be.Uint16(c[26:]) }

// SetAppTag sets C6 bits 16:31.
func (c NVMeCmd) SetAppTag(v uint16) { be.PutUint16(c[26:], v) }

// TargetSQID returns C7 bits 24:31.
func (c NVMeCmd) TargetSQID() uint8 { return c[31] }

// SetTargetSQID sets C7 bits 24:31.
func (c NVMeCmd) SetTargetSQID(v uint8) { c[31] = v }

// NVMe parse errors.
var (
	ErrNVMeShort   = errors.New("falcon: NVMe headers truncated")
	ErrNVMeVersion = errors.New("falcon: unsupported NBTH version")
	ErrNVMeType    = errors.New("falcon: reserved NVMe packet type")
	ErrNVMeFalcon  = errors.New("falcon: NVMe packet type carried by the wrong Falcon packet type")
)

// NVMe is a parsed NVMe ULP payload.
type NVMe struct {
	NBTH NBTH
	Type NVMePacketType
	// Cmd is the command of Read and Write Requests (nil otherwise).
	Cmd NVMeCmd
	// Status is the 15-bit NVMe completion status of Read Responses and
	// Write Completions (bits 17:31 of the status word).
	Status uint16
	// Data is what follows the headers.
	Data []byte
}

// ParseNVMe parses the ULP payload of a Falcon packet of type falcon as NVMe
// headers: NBTH version 1, a defined NVMe type carried by that Falcon type,
// all its headers present.
func ParseNVMe(payload []byte, falcon PacketType) (NVMe, error) {
	if len(payload) < NBTHLen {
		return NVMe{}, ErrNVMeShort
	}
	h := NBTH(payload[:NBTHLen])
	if h.Version() != NVMeVersion {
		return NVMe{}, ErrNVMeVersion
	}
	t := h.Type()
	if int(t) >= len(nvmeTypes) || nvmeTypes[t].Name == "" {
		return NVMe{}, ErrNVMeType
	}
	info := &nvmeTypes[t] // the row in place: Info copies it
	if info.Falcon != falcon {
		return NVMe{}, ErrNVMeFalcon
	}
	if len(payload) < info.HeaderLen {
		return NVMe{}, ErrNVMeShort
	}
	return nvmeView(payload, t, info.HeaderLen), nil
}

// nvmeView is the NVMe view of payload, whose headers (NBTH of type t
// and its command or status) are headerLen bytes and valid.
func nvmeView(payload []byte, t NVMePacketType, headerLen int) NVMe {
	n := NVMe{NBTH: NBTH(payload[:NBTHLen]), Type: t, Data: payload[headerLen:]}
	switch headerLen - NBTHLen {
	case NVMeCmdLen:
		n.Cmd = NVMeCmd(payload[NBTHLen:headerLen])
	case NVMeStatusLen:
		n.Status = uint16(be.Uint32(payload[NBTHLen:]) & 0x7fff)
	}
	return n
}

// NVMeFields holds the NBTH fields and the status for building.
type NVMeFields struct {
	Type              NVMePacketType
	InitiatorFunction uint32
	INV, Split, NG    bool
	TargetTag         uint32
	NCNTTotal         uint8
	InitiatorTag      uint32
	NCNTOffset        uint8
	ICMD              uint32
	Status            uint16 // Read Response, Write Completion (15 bits)
}

// AppendNVMe appends the NBTH of f and, for Read/Write Requests, a zeroed
// 32-byte command (fill it through the returned NVMe's Cmd) or, for
// responses and completions, the status word. It returns the extended
// slice and the parsed view of the new headers. It panics on a reserved
// type (a programming error) and does not allocate when b has room.
func AppendNVMe(b []byte, f *NVMeFields) ([]byte, NVMe) {
	info, ok := f.Type.Info()
	if !ok {
		panic("wire: AppendNVMe with " + f.Type.String())
	}
	start := len(b)
	b = grow(b, info.HeaderLen)
	hb := b[start:]
	clear(hb)
	h := NBTH(hb[:NBTHLen])
	h.SetVersion(NVMeVersion)
	h.SetType(f.Type)
	h.SetInitiatorFunction(f.InitiatorFunction)
	h.SetINV(f.INV)
	h.SetSplit(f.Split)
	h.SetNG(f.NG)
	h.SetTargetTag(f.TargetTag)
	h.SetNCNTTotal(f.NCNTTotal)
	h.SetInitiatorTag(f.InitiatorTag)
	h.SetNCNTOffset(f.NCNTOffset)
	h.SetICMD(f.ICMD)
	if info.HeaderLen-NBTHLen == NVMeStatusLen {
		be.PutUint32(hb[NBTHLen:], uint32(f.Status&0x7fff))
	}
	return b, nvmeView(hb[:info.HeaderLen], f.Type, info.HeaderLen)
}

// Fields returns the NBTH fields and status of n.
func (n *NVMe) Fields() NVMeFields {
	h := n.NBTH
	return NVMeFields{Type: n.Type, InitiatorFunction: h.InitiatorFunction(), INV: h.INV(), Split: h.Split(), NG: h.NG(),
		TargetTag: h.TargetTag(), NCNTTotal: h.NCNTTotal(), InitiatorTag: h.InitiatorTag(), NCNTOffset: h.NCNTOffset(),
		ICMD: h.ICMD(), Status: n.Status}
}
