package wire

import "time"

// Nack is a view of a 40-byte NACK [S §7.8]:
//
//	W0     Version(4) Reserved(4) Connection ID(24)
//	W1     Reserved(27) Packet Type = 1000 (4) R(1)
//	W2/W3  Receiver Data / Request Window Base PSN
//	W4/W5  t1 / t2 (131.072 ns)
//	W6-W7  CC info: hop 4, rx level 5, ECN 14, rsvd 17, RUE value 24
//	W8     NACK PSN
//	W9     NACK Code(8) Reserved(3) RNR Timeout(5) W(1) Reserved(7) ULP NACK Code(8)
type Nack []byte

// Packet returns n as a generic packet view.
func (n Nack) Packet() Packet { return Packet(n) }

// Version returns the Falcon version.
func (n Nack) Version() uint8 { return Packet(n).Version() }

// SetVersion sets the Falcon version.
func (n Nack) SetVersion(v uint8) { Packet(n).SetVersion(v) }

// CID returns the 24-bit destination connection ID.
func (n Nack) CID() uint32 { return Packet(n).CID() }

// SetCID sets the destination connection ID.
func (n Nack) SetCID(c uint32) { Packet(n).SetCID(c) }

// Type returns the packet type (TypeNACK).
func (n Nack) Type() PacketType { return Packet(n).Type() }

// SetType sets the packet type.
func (n Nack) SetType(t PacketType) { Packet(n).SetType(t) }

// DataBase returns the Receiver Data Window Base PSN (W2).
func (n Nack) DataBase() PSN { return Packet(n).DataBase() }

// SetDataBase sets W2.
func (n Nack) SetDataBase(v PSN) { Packet(n).SetDataBase(v) }

// ReqBase returns the Receiver Request Window Base PSN (W3).
func (n Nack) ReqBase() PSN { return Packet(n).ReqBase() }

// SetReqBase sets W3.
func (n Nack) SetReqBase(v PSN) { Packet(n).SetReqBase(v) }

// T1 returns W4, the IV timestamp of the packet that triggered the NACK.
func (n Nack) T1() Timestamp { return Timestamp(be.Uint32(n[16:])) }

// SetT1 sets W4.
func (n Nack) SetT1(t Timestamp) { be.PutUint32(n[16:], uint32(t)) }

// T2 returns W5, that packet's receive time.
func (n Nack) T2() Timestamp { return Timestamp(be.Uint32(n[20:])) }

// SetT2 sets W5.
func (n Nack) SetT2(t Timestamp) { be.PutUint32(n[20:], uint32(t)) }

// HopCount returns the 4-bit forward-path hop count.
func (n Nack) HopCount() uint8 { return uint8(ccField(n, hopShift, hopWidth)) }

// SetHopCount sets the hop count (low 4 bits).
func (n Nack) SetHopCount(v uint8) { ccSet(n, hopShift, hopWidth, uint64(v)) }

// RxBufferLevel returns the 5-bit rx-buffer level.
func (n Nack) RxBufferLevel() uint8 { return uint8(ccField(n, levelShift, levelWidth)) }

// SetRxBufferLevel sets the rx-buffer level (low 5 bits).
func (n Nack) SetRxBufferLevel(v uint8) { ccSet(n, levelShift, levelWidth, uint64(v)) }

// ECNCount returns the 14-bit ECN-marked packet count.
func (n Nack) ECNCount() uint16 { return uint16(ccField(n, ecnShift, ecnWidth)) }

// SetECNCount sets the ECN count (low 14 bits).
func (n Nack) SetECNCount(v uint16) { ccSet(n, ecnShift, ecnWidth, uint64(v)) }

// RUEValue returns the 24-bit RUE-driven value.
func (n Nack) RUEValue() uint32 { return uint32(ccField(n, nackRUEShift, nackRUEW)) }

// SetRUEValue sets the RUE value (low 24 bits).
func (n Nack) SetRUEValue(v uint32) { ccSet(n, nackRUEShift, nackRUEW, uint64(v)) }

// NackPSN returns W8, the PSN of the packet being NACKed.
func (n Nack) NackPSN() PSN { return PSN(be.Uint32(n[32:])) }

// SetNackPSN sets W8.
func (n Nack) SetNackPSN(p PSN) { be.PutUint32(n[32:], uint32(p)) }

// Code returns the NACK code, W9 bits 0:7.
func (n Nack) Code() NackCode { return NackCode(n[36]) }

// SetCode sets W9 bits 0:7.
func (n Nack) SetCode(c NackCode) { n[36] = byte(c) }

// RNRTimeoutCode returns the 5-bit RNR timeout code, W9 bits 11:15 (see
// RNRTimeout for its meaning).
func (n Nack) RNRTimeoutCode() uint8 { return n[37] & 0x1f }

// SetRNRTimeoutCode sets W9 bits 11:15 (low 5 bits of c).
func (n Nack) SetRNRTimeoutCode(c uint8) { n[37] = n[37]&^0x1f | c&0x1f }

// RNRTimeout returns the delay the RNR timeout code stands for.
func (n Nack) RNRTimeout() time.Duration { return RNRTimeout(n.RNRTimeoutCode()) }

// RequestWindow returns the W bit, W9 bit 16: true when the NACKed packet is
// in the request window, false for the data window.
func (n Nack) RequestWindow() bool { return n[38]&0x80 != 0 }

// SetRequestWindow sets the W bit.
func (n Nack) SetRequestWindow(v bool) { n[38] = n[38]&^0x80 | boolBit(v)<<7 }

// Window returns the window of the NACKed packet.
func (n Nack) Window() Window {
	if n.RequestWindow() {
		return WindowRequest
	}
	return WindowData
}

// ULPCode returns the ULP NACK code, W9 bits 24:31 (opaque to Falcon).
func (n Nack) ULPCode() uint8 { return n[39] }

// SetULPCode sets W9 bits 24:31.
func (n Nack) SetULPCode(c uint8) { n[39] = c }

// NackFields holds the fields of a NACK, for building and printing.
type NackFields struct {
	CID            uint32
	DataBase       PSN
	ReqBase        PSN
	T1, T2         Timestamp
	CC             CCInfo
	NackPSN        PSN
	Code           NackCode
	RNRTimeoutCode uint8
	RequestWindow  bool
	ULPCode        uint8
}

// Fields returns n's fields.
func (n Nack) Fields() NackFields {
	return NackFields{
		CID: n.CID(), DataBase: n.DataBase(), ReqBase: n.ReqBase(), T1: n.T1(), T2: n.T2(),
		CC:      CCInfo{HopCount: n.HopCount(), RxBufferLevel: n.RxBufferLevel(), ECNCount: n.ECNCount(), RUEValue: n.RUEValue()},
		NackPSN: n.NackPSN(), Code: n.Code(), RNRTimeoutCode: n.RNRTimeoutCode(),
		RequestWindow: n.RequestWindow(), ULPCode: n.ULPCode(),
	}
}

// AppendNACK appends a 40-byte NACK built from f and returns it.
func AppendNACK(b []byte, f *NackFields) Nack {
	_, p := putHeader(b, TypeNACK, 0)
	n := Nack(p)
	n.SetCID(f.CID)
	n.SetDataBase(f.DataBase)
	n.SetReqBase(f.ReqBase)
	n.SetT1(f.T1)
	n.SetT2(f.T2)
	n.SetHopCount(f.CC.HopCount)
	n.SetRxBufferLevel(f.CC.RxBufferLevel)
	n.SetECNCount(f.CC.ECNCount)
	n.SetRUEValue(f.CC.RUEValue)
	n.SetNackPSN(f.NackPSN)
	n.SetCode(f.Code)
	n.SetRNRTimeoutCode(f.RNRTimeoutCode)
	n.SetRequestWindow(f.RequestWindow)
	n.SetULPCode(f.ULPCode)
	return n
}
