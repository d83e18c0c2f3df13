package wire

// Ack is a view of a BACK (32 bytes) or EACK (72 bytes) [S §7.7]:
//
//	W0      Version(4) Reserved(4) Connection ID(24)
//	W1      Reserved(27) Packet Type(4) R(1)
//	W2      Receiver Data Window Base PSN
//	W3      Receiver Request Window Base PSN
//	W4      t1: IV timestamp of the packet being acked (131.072 ns)
//	W5      t2: its local receive time
//	W6-W7   CC info (hop 4, rx level 5, ECN 14, rsvd 17, RUE 22) + OWN(2)
//	EACK only:
//	W8-W11  data-ack bitmap (128 b; W8 = bits 127..96, W11 = bits 31..0)
//	W12-W15 data-rx bitmap (128 b)
//	W16-W17 request bitmap (64 b)
//
// Bit n of a bitmap stands for PSN = window base (W2 for the data bitmaps,
// W3 for the request bitmap) + n.
//
// The bitmap accessors check the length: on a BACK they read an all-clear
// bitmap and write nothing.
type Ack []byte

// Byte offsets of the EACK bitmaps.
const (
	eackDataAckOff = 32
	eackDataRxOff  = 48
	eackReqOff     = 64
)

func tail(b []byte, off int) []byte {
	if len(b) < off {
		return nil
	}
	return b[off:]
}

// Packet returns a as a generic packet view.
func (a Ack) Packet() Packet { return Packet(a) }

// Version returns the Falcon version.
func (a Ack) Version() uint8 { return Packet(a).Version() }

// SetVersion sets the Falcon version.
func (a Ack) SetVersion(v uint8) { Packet(a).SetVersion(v) }

// CID returns the 24-bit destination connection ID.
func (a Ack) CID() uint32 { return Packet(a).CID() }

// SetCID sets the destination connection ID.
func (a Ack) SetCID(c uint32) { Packet(a).SetCID(c) }

// Type returns the packet type (TypeBACK or TypeEACK).
func (a Ack) Type() PacketType { return Packet(a).Type() }

// SetType sets the packet type.
func (a Ack) SetType(t PacketType) { Packet(a).SetType(t) }

// IsEACK reports whether a is an EACK.
func (a Ack) IsEACK() bool { return a.Type() == TypeEACK }

// DataBase returns the Receiver Data Window Base PSN (W2).
func (a Ack) DataBase() PSN { return Packet(a).DataBase() }

// SetDataBase sets W2.
func (a Ack) SetDataBase(v PSN) { Packet(a).SetDataBase(v) }

// ReqBase returns the Receiver Request Window Base PSN (W3).
func (a Ack) ReqBase() PSN { return Packet(a).ReqBase() }

// SetReqBase sets W3.
func (a Ack) SetReqBase(v PSN) { Packet(a).SetReqBase(v) }

// T1 returns W4, the IV timestamp of the most recent packet received.
func (a Ack) T1() Timestamp { return Timestamp(be.Uint32(a[16:])) }

// SetT1 sets W4.
func (a Ack) SetT1(t Timestamp) { be.PutUint32(a[16:], uint32(t)) }

// T2 returns W5, the receive time of that packet.
func (a Ack) T2() Timestamp { return Timestamp(be.Uint32(a[20:])) }

// SetT2 sets W5.
func (a Ack) SetT2(t Timestamp) { be.PutUint32(a[20:], uint32(t)) }

// HopCount returns the 4-bit forward-path hop count.
func (a Ack) HopCount() uint8 { return uint8(ccField(a, hopShift, hopWidth)) }

// SetHopCount sets the hop count (low 4 bits).
func (a Ack) SetHopCount(v uint8) { ccSet(a, hopShift, hopWidth, uint64(v)) }

// RxBufferLevel returns the 5-bit quantized rx-buffer occupancy.
func (a Ack) RxBufferLevel() uint8 { return uint8(ccField(a, levelShift, levelWidth)) }

// SetRxBufferLevel sets the rx-buffer level (low 5 bits).
func (a Ack) SetRxBufferLevel(v uint8) { ccSet(a, levelShift, levelWidth, uint64(v)) }

// ECNCount returns the 14-bit cumulative count of ECN-marked packets.
func (a Ack) ECNCount() uint16 { return uint16(ccField(a, ecnShift, ecnWidth)) }

// SetECNCount sets the ECN count (low 14 bits).
func (a Ack) SetECNCount(v uint16) { ccSet(a, ecnShift, ecnWidth, uint64(v)) }

// RUEValue returns the 22-bit RUE-driven value.
func (a Ack) RUEValue() uint32 { return uint32(ccField(a, ackRUEShift, ackRUEW)) }

// SetRUEValue sets the RUE value (low 22 bits).
func (a Ack) SetRUEValue(v uint32) { ccSet(a, ackRUEShift, ackRUEW, uint64(v)) }

// OWNRequest returns the R-OWN bit: a request-window packet was dropped for
// being beyond the receive window.
func (a Ack) OWNRequest() bool { return ccField(a, ownReqShift, 1) != 0 }

// SetOWNRequest sets the R-OWN bit.
func (a Ack) SetOWNRequest(v bool) { ccSet(a, ownReqShift, 1, uint64(boolBit(v))) }

// OWNData returns the D-OWN bit (data-window out-of-window drop).
func (a Ack) OWNData() bool { return ccField(a, ownDataShift, 1) != 0 }

// SetOWNData sets the D-OWN bit.
func (a Ack) SetOWNData(v bool) { ccSet(a, ownDataShift, 1, uint64(boolBit(v))) }

// DataAckBitmap loads the EACK's 128-bit data-ack bitmap into dst.
func (a Ack) DataAckBitmap(dst *Bitmap) { getWire(dst, tail(a, eackDataAckOff), DataBitmapBits) }

// SetDataAckBitmap stores the low 128 bits of src as the data-ack bitmap.
func (a Ack) SetDataAckBitmap(src *Bitmap) { putWire(tail(a, eackDataAckOff), src, DataBitmapBits) }

// DataRxBitmap loads the EACK's 128-bit data-rx bitmap into dst.
func (a Ack) DataRxBitmap(dst *Bitmap) { getWire(dst, tail(a, eackDataRxOff), DataBitmapBits) }

// SetDataRxBitmap stores the low 128 bits of src as the data-rx bitmap.
func (a Ack) SetDataRxBitmap(src *Bitmap) { putWire(tail(a, eackDataRxOff), src, DataBitmapBits) }

// ReqBitmap loads the EACK's 64-bit request bitmap into dst.
func (a Ack) ReqBitmap(dst *Bitmap) { getWire(dst, tail(a, eackReqOff), ReqBitmapBits) }

// SetReqBitmap stores the low 64 bits of src as the request bitmap.
func (a Ack) SetReqBitmap(src *Bitmap) { putWire(tail(a, eackReqOff), src, ReqBitmapBits) }

// CCInfo holds the congestion-control fields shared by ACKs and NACKs.
type CCInfo struct {
	HopCount      uint8
	RxBufferLevel uint8
	ECNCount      uint16
	RUEValue      uint32 // 22 bits in BACK/EACK, 24 bits in NACK
}

// AckFields holds the fields of a BACK or EACK, for building and printing.
// The bitmaps are used for EACK only.
type AckFields struct {
	CID        uint32
	DataBase   PSN
	ReqBase    PSN
	T1, T2     Timestamp
	CC         CCInfo
	OWNRequest bool
	OWNData    bool
	DataAck    Bitmap
	DataRx     Bitmap
	Req        Bitmap
}

// Fields fills f from a (the bitmaps only for an EACK; otherwise they are
// left empty).
func (a Ack) Fields(f *AckFields) {
	*f = AckFields{
		CID: a.CID(), DataBase: a.DataBase(), ReqBase: a.ReqBase(), T1: a.T1(), T2: a.T2(),
		CC:         CCInfo{HopCount: a.HopCount(), RxBufferLevel: a.RxBufferLevel(), ECNCount: a.ECNCount(), RUEValue: a.RUEValue()},
		OWNRequest: a.OWNRequest(), OWNData: a.OWNData(),
	}
	if a.IsEACK() {
		a.DataAckBitmap(&f.DataAck)
		a.DataRxBitmap(&f.DataRx)
		a.ReqBitmap(&f.Req)
	}
}

// AppendBACK appends a 32-byte BACK built from f and returns it.
func AppendBACK(b []byte, f *AckFields) Ack { return appendAck(b, TypeBACK, f) }

// AppendEACK appends a 72-byte EACK built from f and returns it.
func AppendEACK(b []byte, f *AckFields) Ack { return appendAck(b, TypeEACK, f) }

func appendAck(b []byte, t PacketType, f *AckFields) Ack {
	_, p := putHeader(b, t, 0)
	a := Ack(p)
	a.SetCID(f.CID)
	a.SetDataBase(f.DataBase)
	a.SetReqBase(f.ReqBase)
	a.SetT1(f.T1)
	a.SetT2(f.T2)
	// The CC word whole, in one store (putHeader zeroed it; the fields'
	// setters would each read, mask and write it back).
	cc := uint64(f.CC.HopCount)&MaxHopCount<<hopShift | uint64(f.CC.RxBufferLevel)&MaxRxBufferLevel<<levelShift |
		uint64(f.CC.ECNCount)&MaxECNCount<<ecnShift | uint64(f.CC.RUEValue)&MaxAckRUEValue<<ackRUEShift |
		uint64(boolBit(f.OWNData))<<ownDataShift | uint64(boolBit(f.OWNRequest))<<ownReqShift
	be.PutUint64(a[ccOff:], cc)
	if t == TypeEACK {
		a.SetDataAckBitmap(&f.DataAck)
		a.SetDataRxBitmap(&f.DataRx)
		a.SetReqBitmap(&f.Req)
	}
	return a
}
