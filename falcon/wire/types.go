package wire

import (
	"strconv"
	"time"
)

// Header lengths in bytes [S §7.2-§7.8].
const (
	BaseLen           = 24 // Falcon base header (Pull Data carries only this)
	PullRequestLen    = 32 // base + W6 (Request Length) + W7 (reserved)
	PushDataHeaderLen = 28 // base + W6 (Request Length); payload follows
	PullDataHeaderLen = 24 // base; payload follows
	ResyncLen         = 32 // base + W6 (code, original type) + W7 (vendor defined)
	BACKLen           = 32 // base ACK
	EACKLen           = 72 // BACK + 128 + 128 + 64 bitmap bits
	NACKLen           = 40 // BACK-like prefix + NACK PSN + code word

	// MaxHeaderLen is the longest Falcon header of any type.
	MaxHeaderLen = EACKLen
)

// Version is the only Falcon version this package speaks [S §7.2].
const Version = 1

// PacketType is the 4-bit Falcon packet type, W1 bits 27:30 of every packet
// [S §7.2].
type PacketType uint8

// Packet types of Rev 0.9. Codes 1, 2, 4, 7 and 11-15 are reserved (Isekai
// uses 1, 2 and 4 for push solicitation, which Rev 0.9 does not define).
const (
	TypePullRequest PacketType = 0
	TypePullData    PacketType = 3
	TypePushData    PacketType = 5
	TypeResync      PacketType = 6
	TypeNACK        PacketType = 8
	TypeBACK        PacketType = 9
	TypeEACK        PacketType = 10
)

// Window names the sliding window whose PSN space a packet consumes.
type Window uint8

// Windows [S §9]: Pull Requests use the request window (RX size 64); Push
// Data, Pull Data and (data) Resync use the data window (RX size 128); ACKs
// and NACKs use no PSN.
const (
	WindowNone Window = iota
	WindowRequest
	WindowData
)

var windowNames = [...]string{WindowNone: "none", WindowRequest: "request", WindowData: "data"}

// String returns "none", "request" or "data".
func (w Window) String() string {
	if int(w) < len(windowNames) {
		return windowNames[w]
	}
	return "Window(" + strconv.Itoa(int(w)) + ")"
}

// TypeInfo is one row of the packet type table.
type TypeInfo struct {
	Name      string
	HeaderLen int    // bytes of Falcon header before any payload
	Window    Window // PSN space the packet consumes
	Payload   bool   // bytes after the header are ULP headers and/or data
	Txn       bool   // the packet carries the base header's PSN/RSN (Txn view)
}

// typeTable maps every defined packet type to its row; a zero row (empty
// Name) means reserved. A Pull Request carries no data, but it does carry
// the ULP's request headers (an RDMA READ's RBTH+RETH+SETH+STETH, an NVMe
// Write Data Request's NBTH) after its 32-byte header, so it is listed with
// a payload. Resync is listed under the data window: a Resync
// carries the PSN of the original packet and the receiver places it in the
// window of its Resync Packet Type (see ResyncWindow).
var typeTable = [16]TypeInfo{
	TypePullRequest: {Name: "PullRequest", HeaderLen: PullRequestLen, Window: WindowRequest, Payload: true, Txn: true},
	TypePullData:    {Name: "PullData", HeaderLen: PullDataHeaderLen, Window: WindowData, Payload: true, Txn: true},
	TypePushData:    {Name: "PushData", HeaderLen: PushDataHeaderLen, Window: WindowData, Payload: true, Txn: true},
	TypeResync:      {Name: "Resync", HeaderLen: ResyncLen, Window: WindowData, Txn: true},
	TypeNACK:        {Name: "NACK", HeaderLen: NACKLen, Window: WindowNone},
	TypeBACK:        {Name: "BACK", HeaderLen: BACKLen, Window: WindowNone},
	TypeEACK:        {Name: "EACK", HeaderLen: EACKLen, Window: WindowNone},
}

// PacketTypes lists every defined packet type in code order.
var PacketTypes = []PacketType{TypePullRequest, TypePullData, TypePushData, TypeResync, TypeNACK, TypeBACK, TypeEACK}

// Info returns t's row of the packet type table and whether t is defined.
func (t PacketType) Info() (TypeInfo, bool) {
	if int(t) >= len(typeTable) || typeTable[t].Name == "" {
		return TypeInfo{}, false
	}
	return typeTable[t], true
}

// shape is the part of a type's row the per-packet paths read (Parse,
// Payload, the builders), packed so that it is loaded in one word and
// stays in registers; TypeInfo, with its name, is copied to the stack
// whole. shapes is derived from typeTable, so the two cannot disagree.
type shape struct {
	hdr   uint8 // HeaderLen (every header is under 256 bytes)
	win   Window
	flags uint8 // shapeValid, shapePayload, shapeTxn
}

const (
	shapeValid = 1 << iota
	shapePayload
	shapeTxn
)

var shapes = func() (s [16]shape) {
	for t, i := range typeTable {
		if i.Name == "" {
			continue
		}
		s[t] = shape{hdr: uint8(i.HeaderLen), win: i.Window, flags: shapeValid}
		if i.Payload {
			s[t].flags |= shapePayload
		}
		if i.Txn {
			s[t].flags |= shapeTxn
		}
	}
	return s
}()

// shapeOf returns t's shape (the zero shape for a reserved type).
func (t PacketType) shapeOf() shape {
	if int(t) < len(shapes) {
		return shapes[t]
	}
	return shape{}
}

// Valid reports whether t is a packet type defined by Rev 0.9.
func (t PacketType) Valid() bool { return t.shapeOf().flags&shapeValid != 0 }

// HeaderLen returns the Falcon header length of t, 0 for a reserved type.
func (t PacketType) HeaderLen() int { return int(t.shapeOf().hdr) }

// Window returns the PSN window t consumes (WindowNone for ACKs, NACKs and
// reserved types).
func (t PacketType) Window() Window { return t.shapeOf().win }

// HasPayload reports whether bytes after t's header are ULP payload.
func (t PacketType) HasPayload() bool { return t.shapeOf().flags&shapePayload != 0 }

// String returns the type's name, or "PacketType(n)" for a reserved code.
func (t PacketType) String() string {
	if i, ok := t.Info(); ok {
		return i.Name
	}
	return "PacketType(" + strconv.Itoa(int(t)) + ")"
}

// ProtocolType is the 3-bit ULP protocol of a transaction packet, W1 bits
// 24:26 [S §7.2]. 0, 1 and 4-7 are reserved.
type ProtocolType uint8

// Protocol types.
const (
	ProtoRDMA ProtocolType = 2
	ProtoNVMe ProtocolType = 3
)

// Valid reports whether p is RDMA or NVMe.
func (p ProtocolType) Valid() bool { return p == ProtoRDMA || p == ProtoNVMe }

// String returns "RDMA", "NVMe" or "ProtocolType(n)".
func (p ProtocolType) String() string {
	switch p {
	case ProtoRDMA:
		return "RDMA"
	case ProtoNVMe:
		return "NVMe"
	}
	return "ProtocolType(" + strconv.Itoa(int(p)) + ")"
}

// NackCode is the 8-bit NACK reason, W9 bits 0:7 of a NACK [S §7.8].
type NackCode uint8

// NACK codes. 0, 3 and 9-255 are reserved in Rev 0.9; 5 is reserved in Rev
// 0.9 but Isekai uses it for a sliding-window (out-of-window) drop.
const (
	NackInsufficientResources NackCode = 1
	NackRNR                   NackCode = 2
	NackXLR                   NackCode = 4
	NackOutOfWindow           NackCode = 5
	NackCIE                   NackCode = 6
	NackNRE                   NackCode = 7
	NackInvalidCID            NackCode = 8
)

var nackNames = [...]string{
	NackInsufficientResources: "InsufficientResources",
	NackRNR:                   "RNR",
	NackXLR:                   "XLR",
	NackOutOfWindow:           "OutOfWindow",
	NackCIE:                   "CIE",
	NackNRE:                   "NRE",
	NackInvalidCID:            "InvalidCID",
}

// NackCodes lists every NACK code this package names.
var NackCodes = []NackCode{NackInsufficientResources, NackRNR, NackXLR, NackOutOfWindow, NackCIE, NackNRE, NackInvalidCID}

// Valid reports whether c is a NACK code this package names.
func (c NackCode) Valid() bool { return int(c) < len(nackNames) && nackNames[c] != "" }

// String returns the code's name or "NackCode(n)".
func (c NackCode) String() string {
	if c.Valid() {
		return nackNames[c]
	}
	return "NackCode(" + strconv.Itoa(int(c)) + ")"
}

// ResyncCode is the 8-bit reason of a Resync packet, W6 bits 0:7 [S §7.6].
type ResyncCode uint8

// Resync codes; 0 and 8-255 are reserved.
const (
	ResyncTargetCIE        ResyncCode = 1 // target ULP complete-in-error
	ResyncLocalXLR         ResyncCode = 2 // local xLR flow
	ResyncRetransmitError  ResyncCode = 3 // packet retransmissions exhausted
	ResyncTxnTimeout       ResyncCode = 4 // transaction timed out
	ResyncRemoteXLR        ResyncCode = 5 // remote xLR flow
	ResyncTargetNRE        ResyncCode = 6 // target ULP non-recoverable error
	ResyncTargetInvalidCID ResyncCode = 7 // target ULP invalid-CID error
)

var resyncNames = [...]string{
	ResyncTargetCIE:        "TargetCIE",
	ResyncLocalXLR:         "LocalXLR",
	ResyncRetransmitError:  "RetransmitError",
	ResyncTxnTimeout:       "TxnTimeout",
	ResyncRemoteXLR:        "RemoteXLR",
	ResyncTargetNRE:        "TargetNRE",
	ResyncTargetInvalidCID: "TargetInvalidCID",
}

// ResyncCodes lists every defined Resync code.
var ResyncCodes = []ResyncCode{ResyncTargetCIE, ResyncLocalXLR, ResyncRetransmitError, ResyncTxnTimeout, ResyncRemoteXLR, ResyncTargetNRE, ResyncTargetInvalidCID}

// Valid reports whether c is a defined Resync code (1..7).
func (c ResyncCode) Valid() bool { return int(c) < len(resyncNames) && resyncNames[c] != "" }

// String returns the code's name or "ResyncCode(n)".
func (c ResyncCode) String() string {
	if c.Valid() {
		return resyncNames[c]
	}
	return "ResyncCode(" + strconv.Itoa(int(c)) + ")"
}

// rnrTimeoutMicros is the RNR NACK timeout table in units of 10 µs, indexed
// by the 5-bit code [S §7.8] (the InfiniBand RNR NAK timer encoding).
var rnrTimeoutMicros = [32]uint32{
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
}

// RNRTimeout returns the delay a 5-bit RNR NACK timeout code stands for:
// code 0 is 655.36 ms, 1 is 10 µs, ..., 31 is 491.52 ms. Only the low 5 bits
// of code are used.
func RNRTimeout(code uint8) time.Duration {
	return time.Duration(rnrTimeoutMicros[code&31]) * 10 * time.Microsecond
}

// RNRTimeoutCode returns the smallest code whose delay is at least d (code 0,
// the longest, when d exceeds 491.52 ms).
func RNRTimeoutCode(d time.Duration) uint8 {
	best := uint8(0)
	for c := uint8(1); c < 32; c++ {
		if RNRTimeout(c) >= d {
			return c
		}
	}
	return best
}
