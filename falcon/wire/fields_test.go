package wire

import (
	"bytes"
	"fmt"
	"math/bits"
	"testing"
)

// field describes one header field by its spec position (word, MSB-relative
// first and last bit) and its accessors.
type field struct {
	name        string
	typ         PacketType
	word        int
	first, last int // MSB-relative bit numbers within the word
	get         func([]byte) uint64
	set         func([]byte, uint64)
}

func (f field) width() int  { return f.last - f.first + 1 }
func (f field) max() uint64 { return 1<<f.width() - 1 }
func (f field) String() string {
	return fmt.Sprintf("%v.%s W%d[%d:%d]", f.typ, f.name, f.word, f.first, f.last)
}

// mask returns the header bytes that the field occupies, as bit masks.
func (f field) mask(n int) []byte {
	m := make([]byte, n)
	for bit := f.first; bit <= f.last; bit++ {
		pos := f.word*32 + bit // bit 0 = MSB of byte 0
		m[pos/8] |= 0x80 >> (pos % 8)
	}
	return m
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func commonFields(pt PacketType) []field {
	return []field{
		{"Version", pt, 0, 0, 3, func(b []byte) uint64 { return uint64(Packet(b).Version()) }, func(b []byte, v uint64) { Packet(b).SetVersion(uint8(v)) }},
		{"CID", pt, 0, 8, 31, func(b []byte) uint64 { return uint64(Packet(b).CID()) }, func(b []byte, v uint64) { Packet(b).SetCID(uint32(v)) }},
		{"Type", pt, 1, 27, 30, func(b []byte) uint64 { return uint64(Packet(b).Type()) }, func(b []byte, v uint64) { Packet(b).SetType(PacketType(v)) }},
		{"DataBase", pt, 2, 0, 31, func(b []byte) uint64 { return uint64(Packet(b).DataBase()) }, func(b []byte, v uint64) { Packet(b).SetDataBase(PSN(v)) }},
		{"ReqBase", pt, 3, 0, 31, func(b []byte) uint64 { return uint64(Packet(b).ReqBase()) }, func(b []byte, v uint64) { Packet(b).SetReqBase(PSN(v)) }},
	}
}

func txnFields(pt PacketType) []field {
	fs := append(commonFields(pt),
		field{"DestFunction", pt, 1, 0, 23, func(b []byte) uint64 { return uint64(Txn(b).DestFunction()) }, func(b []byte, v uint64) { Txn(b).SetDestFunction(uint32(v)) }},
		field{"Protocol", pt, 1, 24, 26, func(b []byte) uint64 { return uint64(Txn(b).Protocol()) }, func(b []byte, v uint64) { Txn(b).SetProtocol(ProtocolType(v)) }},
		field{"AR", pt, 1, 31, 31, func(b []byte) uint64 { return b2u(Txn(b).AR()) }, func(b []byte, v uint64) { Txn(b).SetAR(v != 0) }},
		field{"PSN", pt, 4, 0, 31, func(b []byte) uint64 { return uint64(Txn(b).PSN()) }, func(b []byte, v uint64) { Txn(b).SetPSN(PSN(v)) }},
		field{"RSN", pt, 5, 0, 31, func(b []byte) uint64 { return uint64(Txn(b).RSN()) }, func(b []byte, v uint64) { Txn(b).SetRSN(RSN(v)) }},
		// Txn's direct common accessors must hit the same bits as Packet's.
		field{"Txn.CID", pt, 0, 8, 31, func(b []byte) uint64 { return uint64(Txn(b).CID()) }, func(b []byte, v uint64) { Txn(b).SetCID(uint32(v)) }},
		field{"Txn.DataBase", pt, 2, 0, 31, func(b []byte) uint64 { return uint64(Txn(b).DataBase()) }, func(b []byte, v uint64) { Txn(b).SetDataBase(PSN(v)) }},
		field{"Txn.ReqBase", pt, 3, 0, 31, func(b []byte) uint64 { return uint64(Txn(b).ReqBase()) }, func(b []byte, v uint64) { Txn(b).SetReqBase(PSN(v)) }},
		field{"Txn.Type", pt, 1, 27, 30, func(b []byte) uint64 { return uint64(Txn(b).Type()) }, func(b []byte, v uint64) { Txn(b).SetType(PacketType(v)) }},
		field{"Txn.Version", pt, 0, 0, 3, func(b []byte) uint64 { return uint64(Txn(b).Version()) }, func(b []byte, v uint64) { Txn(b).SetVersion(uint8(v)) }},
	)
	switch pt {
	case TypePullRequest, TypePushData:
		fs = append(fs, field{"RequestLength", pt, 6, 16, 31, func(b []byte) uint64 { return uint64(Txn(b).RequestLength()) }, func(b []byte, v uint64) { Txn(b).SetRequestLength(uint16(v)) }})
	case TypeResync:
		fs = append(fs,
			field{"ResyncCode", pt, 6, 0, 7, func(b []byte) uint64 { return uint64(Txn(b).ResyncCode()) }, func(b []byte, v uint64) { Txn(b).SetResyncCode(ResyncCode(v)) }},
			field{"ResyncPacketType", pt, 6, 8, 11, func(b []byte) uint64 { return uint64(Txn(b).ResyncPacketType()) }, func(b []byte, v uint64) { Txn(b).SetResyncPacketType(PacketType(v)) }},
			field{"VendorDefined", pt, 7, 0, 31, func(b []byte) uint64 { return uint64(Txn(b).VendorDefined()) }, func(b []byte, v uint64) { Txn(b).SetVendorDefined(uint32(v)) }},
		)
	}
	return fs
}

func ackFields(pt PacketType) []field {
	return append(commonFields(pt),
		field{"T1", pt, 4, 0, 31, func(b []byte) uint64 { return uint64(Ack(b).T1()) }, func(b []byte, v uint64) { Ack(b).SetT1(Timestamp(v)) }},
		field{"T2", pt, 5, 0, 31, func(b []byte) uint64 { return uint64(Ack(b).T2()) }, func(b []byte, v uint64) { Ack(b).SetT2(Timestamp(v)) }},
		field{"HopCount", pt, 6, 0, 3, func(b []byte) uint64 { return uint64(Ack(b).HopCount()) }, func(b []byte, v uint64) { Ack(b).SetHopCount(uint8(v)) }},
		field{"RxBufferLevel", pt, 6, 4, 8, func(b []byte) uint64 { return uint64(Ack(b).RxBufferLevel()) }, func(b []byte, v uint64) { Ack(b).SetRxBufferLevel(uint8(v)) }},
		field{"ECNCount", pt, 6, 9, 22, func(b []byte) uint64 { return uint64(Ack(b).ECNCount()) }, func(b []byte, v uint64) { Ack(b).SetECNCount(uint16(v)) }},
		field{"RUEValue", pt, 7, 8, 29, func(b []byte) uint64 { return uint64(Ack(b).RUEValue()) }, func(b []byte, v uint64) { Ack(b).SetRUEValue(uint32(v)) }},
		field{"OWNData", pt, 7, 30, 30, func(b []byte) uint64 { return b2u(Ack(b).OWNData()) }, func(b []byte, v uint64) { Ack(b).SetOWNData(v != 0) }},
		field{"OWNRequest", pt, 7, 31, 31, func(b []byte) uint64 { return b2u(Ack(b).OWNRequest()) }, func(b []byte, v uint64) { Ack(b).SetOWNRequest(v != 0) }},
		field{"Ack.CID", pt, 0, 8, 31, func(b []byte) uint64 { return uint64(Ack(b).CID()) }, func(b []byte, v uint64) { Ack(b).SetCID(uint32(v)) }},
		field{"Ack.DataBase", pt, 2, 0, 31, func(b []byte) uint64 { return uint64(Ack(b).DataBase()) }, func(b []byte, v uint64) { Ack(b).SetDataBase(PSN(v)) }},
		field{"Ack.ReqBase", pt, 3, 0, 31, func(b []byte) uint64 { return uint64(Ack(b).ReqBase()) }, func(b []byte, v uint64) { Ack(b).SetReqBase(PSN(v)) }},
		field{"Ack.Type", pt, 1, 27, 30, func(b []byte) uint64 { return uint64(Ack(b).Type()) }, func(b []byte, v uint64) { Ack(b).SetType(PacketType(v)) }},
		field{"Ack.Version", pt, 0, 0, 3, func(b []byte) uint64 { return uint64(Ack(b).Version()) }, func(b []byte, v uint64) { Ack(b).SetVersion(uint8(v)) }},
	)
}

func nackFields() []field {
	pt := TypeNACK
	return append(commonFields(pt),
		field{"T1", pt, 4, 0, 31, func(b []byte) uint64 { return uint64(Nack(b).T1()) }, func(b []byte, v uint64) { Nack(b).SetT1(Timestamp(v)) }},
		field{"T2", pt, 5, 0, 31, func(b []byte) uint64 { return uint64(Nack(b).T2()) }, func(b []byte, v uint64) { Nack(b).SetT2(Timestamp(v)) }},
		field{"HopCount", pt, 6, 0, 3, func(b []byte) uint64 { return uint64(Nack(b).HopCount()) }, func(b []byte, v uint64) { Nack(b).SetHopCount(uint8(v)) }},
		field{"RxBufferLevel", pt, 6, 4, 8, func(b []byte) uint64 { return uint64(Nack(b).RxBufferLevel()) }, func(b []byte, v uint64) { Nack(b).SetRxBufferLevel(uint8(v)) }},
		field{"ECNCount", pt, 6, 9, 22, func(b []byte) uint64 { return uint64(Nack(b).ECNCount()) }, func(b []byte, v uint64) { Nack(b).SetECNCount(uint16(v)) }},
		field{"RUEValue", pt, 7, 8, 31, func(b []byte) uint64 { return uint64(Nack(b).RUEValue()) }, func(b []byte, v uint64) { Nack(b).SetRUEValue(uint32(v)) }},
		field{"NackPSN", pt, 8, 0, 31, func(b []byte) uint64 { return uint64(Nack(b).NackPSN()) }, func(b []byte, v uint64) { Nack(b).SetNackPSN(PSN(v)) }},
		field{"Code", pt, 9, 0, 7, func(b []byte) uint64 { return uint64(Nack(b).Code()) }, func(b []byte, v uint64) { Nack(b).SetCode(NackCode(v)) }},
		field{"RNRTimeoutCode", pt, 9, 11, 15, func(b []byte) uint64 { return uint64(Nack(b).RNRTimeoutCode()) }, func(b []byte, v uint64) { Nack(b).SetRNRTimeoutCode(uint8(v)) }},
		field{"RequestWindow", pt, 9, 16, 16, func(b []byte) uint64 { return b2u(Nack(b).RequestWindow()) }, func(b []byte, v uint64) { Nack(b).SetRequestWindow(v != 0) }},
		field{"ULPCode", pt, 9, 24, 31, func(b []byte) uint64 { return uint64(Nack(b).ULPCode()) }, func(b []byte, v uint64) { Nack(b).SetULPCode(uint8(v)) }},
		field{"Nack.CID", pt, 0, 8, 31, func(b []byte) uint64 { return uint64(Nack(b).CID()) }, func(b []byte, v uint64) { Nack(b).SetCID(uint32(v)) }},
		field{"Nack.DataBase", pt, 2, 0, 31, func(b []byte) uint64 { return uint64(Nack(b).DataBase()) }, func(b []byte, v uint64) { Nack(b).SetDataBase(PSN(v)) }},
		field{"Nack.ReqBase", pt, 3, 0, 31, func(b []byte) uint64 { return uint64(Nack(b).ReqBase()) }, func(b []byte, v uint64) { Nack(b).SetReqBase(PSN(v)) }},
		field{"Nack.Type", pt, 1, 27, 30, func(b []byte) uint64 { return uint64(Nack(b).Type()) }, func(b []byte, v uint64) { Nack(b).SetType(PacketType(v)) }},
		field{"Nack.Version", pt, 0, 0, 3, func(b []byte) uint64 { return uint64(Nack(b).Version()) }, func(b []byte, v uint64) { Nack(b).SetVersion(uint8(v)) }},
	)
}

func allFields() []field {
	var fs []field
	for _, pt := range []PacketType{TypePullRequest, TypePullData, TypePushData, TypeResync} {
		fs = append(fs, txnFields(pt)...)
	}
	fs = append(fs, ackFields(TypeBACK)...)
	fs = append(fs, ackFields(TypeEACK)...)
	return append(fs, nackFields()...)
}

// diff returns the XOR of two equal-length buffers.
func diff(a, b []byte) []byte {
	d := make([]byte, len(a))
	for i := range a {
		d[i] = a[i] ^ b[i]
	}
	return d
}

// TestFieldRoundTrip writes each field's extremes into all-zero and all-one
// headers and checks that the value reads back and that exactly the spec's
// bits changed (neighbours untouched).
func TestFieldRoundTrip(t *testing.T) {
	for _, f := range allFields() {
		n := f.typ.HeaderLen()
		mask := f.mask(n)
		if bits.OnesCount64(f.max()) != f.width() {
			t.Fatalf("%v: bad width", f)
		}
		for _, fill := range []byte{0x00, 0xff} {
			b := bytes.Repeat([]byte{fill}, n)
			orig := bytes.Clone(b)
			v := f.max()
			if fill == 0xff {
				v = 0
			}
			f.set(b, v)
			if got := f.get(b); got != v {
				t.Errorf("%v: set %#x on %#02x fill, got %#x", f, v, fill, got)
			}
			if d := diff(orig, b); !bytes.Equal(d, mask) {
				t.Errorf("%v: changed bits\n %x\nwant\n %x", f, d, mask)
			}
			// A pattern value that is neither all-ones nor zero.
			pat := uint64(0xa5a5a5a5a5a5a5a5) & f.max()
			f.set(b, pat)
			if got := f.get(b); got != pat {
				t.Errorf("%v: pattern %#x read back %#x", f, pat, got)
			}
			// Setting a too-wide value keeps the neighbours.
			f.set(b, ^uint64(0))
			restore := uint64(0)
			if fill == 0xff {
				restore = f.max()
			}
			f.set(b, restore)
			if !bytes.Equal(b, orig) {
				t.Errorf("%v: over-wide set leaked into neighbours: %x", f, diff(orig, b))
			}
		}
	}
}

// TestEACKBitmapPlacement checks where bit n of each bitmap lands: bitmaps
// are big-endian integers, W8 holding data-ack bits 127..96 and W11 bits
// 31..0 [S §7.7.2].
func TestEACKBitmapPlacement(t *testing.T) {
	type bm struct {
		name string
		size int
		off  int
		set  func(Ack, *Bitmap)
		get  func(Ack, *Bitmap)
	}
	for _, m := range []bm{
		{"DataAck", 128, 32, Ack.SetDataAckBitmap, Ack.DataAckBitmap},
		{"DataRx", 128, 48, Ack.SetDataRxBitmap, Ack.DataRxBitmap},
		{"Req", 64, 64, Ack.SetReqBitmap, Ack.ReqBitmap},
	} {
		for _, n := range []int{0, 1, 7, 8, 31, 32, 63, m.size - 1} {
			a := Ack(make([]byte, EACKLen))
			src := NewBitmap(m.size)
			src.Set(n)
			m.set(a, &src)
			wantByte := m.off + m.size/8 - 1 - n/8
			want := make([]byte, EACKLen)
			want[wantByte] = 1 << (n % 8)
			if !bytes.Equal(a, want) {
				t.Errorf("%s bit %d: got %x, want byte %d", m.name, n, []byte(a), wantByte)
			}
			var dst Bitmap
			m.get(a, &dst)
			if dst.Size() != m.size || dst.Count() != 1 || !dst.Test(n) {
				t.Errorf("%s bit %d: read back %v", m.name, n, dst.String())
			}
		}
		// A larger source bitmap: bits beyond the wire size are dropped.
		a := Ack(bytes.Repeat([]byte{0xff}, EACKLen))
		src := NewBitmap(MaxBitmapBits)
		src.Set(m.size)
		m.set(a, &src)
		for i := m.off; i < m.off+m.size/8; i++ {
			if a[i] != 0 {
				t.Errorf("%s: bit beyond the wire size leaked", m.name)
			}
		}
		if a[m.off-1] != 0xff || (m.off+m.size/8 < EACKLen && a[m.off+m.size/8] != 0xff) {
			t.Errorf("%s: neighbours touched", m.name)
		}
	}
}

// TestSpecFlow6EACK encodes the EACK of reference flow 6 [S §6.6]: pushes
// 300-303 with 300 lost ⇒ data-rx-bitmap 0b0111 relative to base 300.
func TestSpecFlow6EACK(t *testing.T) {
	f := AckFields{CID: 0x123456, DataBase: 300, ReqBase: 100}
	f.DataAck = NewBitmap(DataBitmapBits)
	f.DataRx = NewBitmap(DataBitmapBits)
	f.Req = NewBitmap(ReqBitmapBits)
	f.DataRx.Set(int(PSN(301).Sub(f.DataBase)))
	f.DataRx.Set(int(PSN(302).Sub(f.DataBase)))
	f.DataRx.Set(int(PSN(303).Sub(f.DataBase)))
	a := AppendEACK(nil, &f)
	if len(a) != EACKLen || a[63] != 0x0e {
		t.Fatalf("EACK data-rx bytes %x", []byte(a[48:64]))
	}
	var rx Bitmap
	a.DataRxBitmap(&rx)
	if rx.TrailingOnes() != 0 || !rx.HasHole() || rx.Highest() != 3 {
		t.Errorf("bitmap %s", rx.String()[124:])
	}
}
