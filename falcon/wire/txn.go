package wire

import "strconv"

// Txn is a view of a transaction packet — Pull Request, Pull Data, Push Data
// or Resync — which all start with the 24-byte base header [S §7.2]:
//
//	W0  Version(4) Reserved(4) Destination CID(24)
//	W1  Destination Function(24) Protocol(3) Packet Type(4) AR(1)
//	W2  Receiver Data Window Base PSN
//	W3  Receiver Request Window Base PSN
//	W4  PSN
//	W5  RSN
//
// Pull Request and Push Data add W6 = Reserved(16) Request Length(16); Pull
// Request adds a reserved W7; Resync adds W6 = Resync Code(8) Resync Packet
// Type(4) Reserved(20) and W7 = Vendor Defined(32).
//
// The base-header accessors assume at least BaseLen bytes (Parse checks
// that). The W6/W7 accessors check the length themselves: on a packet too
// short to hold the field (a Pull Data read as a Resync) getters return 0
// and setters do nothing.
type Txn []byte

// Packet returns t as a generic packet view.
func (t Txn) Packet() Packet { return Packet(t) }

// Version returns the Falcon version (W0 bits 0:3).
func (t Txn) Version() uint8 { return Packet(t).Version() }

// SetVersion sets the Falcon version.
func (t Txn) SetVersion(v uint8) { Packet(t).SetVersion(v) }

// CID returns the 24-bit destination connection ID.
func (t Txn) CID() uint32 { return Packet(t).CID() }

// SetCID sets the destination connection ID.
func (t Txn) SetCID(c uint32) { Packet(t).SetCID(c) }

// Type returns the packet type.
func (t Txn) Type() PacketType { return Packet(t).Type() }

// SetType sets the packet type.
func (t Txn) SetType(v PacketType) { Packet(t).SetType(v) }

// DataBase returns the piggy-backed Receiver Data Window Base PSN (W2).
func (t Txn) DataBase() PSN { return Packet(t).DataBase() }

// SetDataBase sets W2.
func (t Txn) SetDataBase(v PSN) { Packet(t).SetDataBase(v) }

// ReqBase returns the piggy-backed Receiver Request Window Base PSN (W3).
func (t Txn) ReqBase() PSN { return Packet(t).ReqBase() }

// SetReqBase sets W3.
func (t Txn) SetReqBase(v PSN) { Packet(t).SetReqBase(v) }

// DestFunction returns the 24-bit Destination Function, W1 bits 0:23 (the
// receiving <Host, PF, VF>; the split of the bits is not specified).
func (t Txn) DestFunction() uint32 { return get24(t[4:]) }

// SetDestFunction sets W1 bits 0:23 (low 24 bits of f).
func (t Txn) SetDestFunction(f uint32) { put24(t[4:], f) }

// Protocol returns the ULP protocol type, W1 bits 24:26.
func (t Txn) Protocol() ProtocolType { return ProtocolType(t[7] >> 5) }

// SetProtocol sets W1 bits 24:26 (low 3 bits of p).
func (t Txn) SetProtocol(p ProtocolType) { t[7] = t[7]&0x1f | byte(p&7)<<5 }

// AR returns the Ack Request bit, W1 bit 31: the sender asks for an
// immediate ACK of this packet.
func (t Txn) AR() bool { return t[7]&1 != 0 }

// SetAR sets W1 bit 31.
func (t Txn) SetAR(v bool) { t[7] = t[7]&^1 | boolBit(v) }

// PSN returns W4: the request-window PSN of a Pull Request, the data-window
// PSN of Push Data and Pull Data, the original packet's PSN in a Resync.
func (t Txn) PSN() PSN { return PSN(be.Uint32(t[16:])) }

// SetPSN sets W4.
func (t Txn) SetPSN(v PSN) { be.PutUint32(t[16:], uint32(v)) }

// RSN returns W5, the transaction's request sequence number.
func (t Txn) RSN() RSN { return RSN(be.Uint32(t[20:])) }

// SetRSN sets W5.
func (t Txn) SetRSN(v RSN) { be.PutUint32(t[20:], uint32(v)) }

// RequestLength returns W6 bits 16:31 of a Pull Request (exact size of the
// expected Pull Data payload) or Push Data (size of its own payload).
func (t Txn) RequestLength() uint16 {
	if len(t) < 28 {
		return 0
	}
	return be.Uint16(t[26:])
}

// SetRequestLength sets W6 bits 16:31.
func (t Txn) SetRequestLength(n uint16) {
	if len(t) >= 28 {
		be.PutUint16(t[26:], n)
	}
}

// ResyncCode returns a Resync's reason, W6 bits 0:7.
func (t Txn) ResyncCode() ResyncCode {
	if len(t) < 25 {
		return 0
	}
	return ResyncCode(t[24])
}

// SetResyncCode sets W6 bits 0:7.
func (t Txn) SetResyncCode(c ResyncCode) {
	if len(t) >= 25 {
		t[24] = byte(c)
	}
}

// ResyncPacketType returns the type of the packet a Resync replaces, W6
// bits 8:11.
func (t Txn) ResyncPacketType() PacketType {
	if len(t) < 26 {
		return 0
	}
	return PacketType(t[25] >> 4)
}

// SetResyncPacketType sets W6 bits 8:11 (low 4 bits of p).
func (t Txn) SetResyncPacketType(p PacketType) {
	if len(t) >= 26 {
		t[25] = t[25]&0x0f | byte(p&0x0f)<<4
	}
}

// ResyncWindow returns the window a Resync's PSN belongs to: the window of
// its Resync Packet Type (the data window when that type names none).
func (t Txn) ResyncWindow() Window {
	if w := t.ResyncPacketType().Window(); w != WindowNone {
		return w
	}
	return WindowData
}

// VendorDefined returns a Resync's W7 (0 when unused).
func (t Txn) VendorDefined() uint32 {
	if len(t) < 32 {
		return 0
	}
	return be.Uint32(t[28:])
}

// SetVendorDefined sets a Resync's W7.
func (t Txn) SetVendorDefined(v uint32) {
	if len(t) >= 32 {
		be.PutUint32(t[28:], v)
	}
}

// Payload returns the bytes after the type's header: the ULP headers (and
// data) of Pull Request, Pull Data and Push Data; nil for Resync.
func (t Txn) Payload() []byte { return Packet(t).Payload() }

// TxnFields holds the header fields of a transaction packet, for building
// and for printing. RequestLength is used for Pull Requests only (Push Data
// takes its payload's length); the Resync fields for Resync only.
type TxnFields struct {
	CID              uint32
	DestFunction     uint32
	Protocol         ProtocolType
	AR               bool
	DataBase         PSN
	ReqBase          PSN
	PSN              PSN
	RSN              RSN
	RequestLength    uint16
	ResyncCode       ResyncCode
	ResyncPacketType PacketType
	VendorDefined    uint32
}

// Fields returns t's header fields (RequestLength for Pull Request and Push
// Data, the Resync fields for Resync).
func (t Txn) Fields() TxnFields {
	f := TxnFields{
		CID: t.CID(), DestFunction: t.DestFunction(), Protocol: t.Protocol(), AR: t.AR(),
		DataBase: t.DataBase(), ReqBase: t.ReqBase(), PSN: t.PSN(), RSN: t.RSN(),
	}
	switch t.Type() {
	case TypePullRequest, TypePushData:
		f.RequestLength = t.RequestLength()
	case TypeResync:
		f.ResyncCode, f.ResyncPacketType, f.VendorDefined = t.ResyncCode(), t.ResyncPacketType(), t.VendorDefined()
	}
	return f
}

// AppendTxnHeader appends a transaction packet of type typ with room for
// payloadLen bytes of payload (left as they were in b's spare capacity) and
// returns the new packet — header plus payload space — as a view into the
// extended b. For Push Data it sets Request Length to payloadLen. It
// allocates only when b lacks capacity; typ must be a transaction type and
// payloadLen must be 0 for types without payload (otherwise it panics: that
// is a programming error, not bad input).
func AppendTxnHeader(b []byte, typ PacketType, f *TxnFields, payloadLen int) Txn {
	sh := typ.shapeOf()
	if sh.flags&shapeTxn == 0 || (sh.flags&shapePayload == 0 && payloadLen != 0) || payloadLen < 0 || payloadLen > 0xffff {
		panic("wire: AppendTxnHeader(" + typ.String() + ", payload " + strconv.Itoa(payloadLen) + ")")
	}
	// Every header word is written whole (reserved bits zero), the bits
	// the setters place, in one store each rather than a clear and a
	// read-modify-write per field: this runs once per packet sent.
	n := int(sh.hdr)
	start := len(b)
	b = grow(b, n+payloadLen)
	t := Txn(b[start : start+n+payloadLen])
	be.PutUint32(t[0:], uint32(Version)<<28|f.CID&(1<<24-1))
	be.PutUint32(t[4:], f.DestFunction<<8|uint32(f.Protocol&7)<<5|uint32(typ&0x0f)<<1|uint32(boolBit(f.AR)))
	be.PutUint32(t[8:], uint32(f.DataBase))
	be.PutUint32(t[12:], uint32(f.ReqBase))
	be.PutUint32(t[16:], uint32(f.PSN))
	be.PutUint32(t[20:], uint32(f.RSN))
	switch typ {
	case TypePullRequest:
		be.PutUint32(t[24:], uint32(f.RequestLength))
		be.PutUint32(t[28:], 0)
	case TypePushData:
		be.PutUint32(t[24:], uint32(uint16(payloadLen)))
	case TypeResync:
		be.PutUint32(t[24:], uint32(f.ResyncCode)<<24|uint32(f.ResyncPacketType&0x0f)<<20)
		be.PutUint32(t[28:], f.VendorDefined)
	}
	return t
}

// AppendTxn appends a transaction packet of type typ carrying payload (ULP
// headers and data; nil for Resync) and returns it as a view into the extended b.
// To build into a reused buffer without allocating, pass buf[:0] (or
// buf[:headroom]) with enough capacity.
func AppendTxn(b []byte, typ PacketType, f *TxnFields, payload []byte) Txn {
	t := AppendTxnHeader(b, typ, f, len(payload))
	copy(t.Payload(), payload)
	return t
}

// AppendPushData appends a Push Data packet carrying payload.
func AppendPushData(b []byte, f *TxnFields, payload []byte) Txn {
	return AppendTxn(b, TypePushData, f, payload)
}

// AppendPullData appends a Pull Data packet carrying payload.
func AppendPullData(b []byte, f *TxnFields, payload []byte) Txn {
	return AppendTxn(b, TypePullData, f, payload)
}

// AppendPullRequest appends a Pull Request asking for f.RequestLength bytes
// of Pull Data, without ULP headers (see AppendTxn to add them).
func AppendPullRequest(b []byte, f *TxnFields) Txn { return AppendTxn(b, TypePullRequest, f, nil) }

// AppendResync appends a Resync for the packet f.PSN/f.RSN of type
// f.ResyncPacketType with reason f.ResyncCode.
func AppendResync(b []byte, f *TxnFields) Txn { return AppendTxn(b, TypeResync, f, nil) }
