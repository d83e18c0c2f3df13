package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// vectors returns one valid packet of every type, used by the unit tests and
// as fuzz seeds.
func vectors() [][]byte {
	f := TxnFields{
		CID: 0xabcdef, DestFunction: 0x010203, Protocol: ProtoRDMA, AR: true,
		DataBase: 200, ReqBase: 100, PSN: 301, RSN: 7, RequestLength: 4096,
		ResyncCode: ResyncTargetCIE, ResyncPacketType: TypePushData, VendorDefined: 0xdeadbeef,
	}
	payload := []byte("ULP header and data")
	af := AckFields{CID: 0xabcdef, DataBase: 300, ReqBase: 100, T1: 1000, T2: 2000,
		CC: CCInfo{HopCount: 3, RxBufferLevel: 17, ECNCount: 999, RUEValue: 0x2abcde}, OWNData: true}
	af.DataAck, af.DataRx, af.Req = NewBitmap(128), NewBitmap(128), NewBitmap(64)
	af.DataRx.Set(1)
	af.DataRx.Set(127)
	af.Req.Set(63)
	nf := NackFields{CID: 0xabcdef, DataBase: 300, ReqBase: 100, T1: 5, T2: 6,
		CC:      CCInfo{HopCount: 15, RxBufferLevel: 31, ECNCount: 16383, RUEValue: 0xffffff},
		NackPSN: 301, Code: NackRNR, RNRTimeoutCode: 14, RequestWindow: false, ULPCode: 0x42}
	return [][]byte{
		AppendPullRequest(nil, &f),
		AppendPullData(nil, &f, payload),
		AppendPullData(nil, &f, nil),
		AppendPushData(nil, &f, payload),
		AppendPushData(nil, &f, nil),
		AppendResync(nil, &f),
		AppendBACK(nil, &af),
		AppendEACK(nil, &af),
		AppendNACK(nil, &nf),
	}
}

func TestParseAcceptsEveryType(t *testing.T) {
	seen := map[PacketType]bool{}
	for _, v := range vectors() {
		p, err := Parse(v)
		if err != nil {
			t.Fatalf("Parse(%v): %v", Packet(v).Type(), err)
		}
		if &p[0] != &v[0] || len(p) != len(v) {
			t.Error("Parse must return a view of its input")
		}
		seen[p.Type()] = true
	}
	for _, pt := range PacketTypes {
		if !seen[pt] {
			t.Errorf("no vector for %v", pt)
		}
	}
}

func TestParseErrors(t *testing.T) {
	push := AppendPushData(nil, &TxnFields{}, []byte("abcd"))
	withType := func(pt PacketType, n int) []byte {
		b := make([]byte, n)
		Packet(b).SetVersion(Version)
		Packet(b).SetType(pt)
		return b
	}
	cases := []struct {
		name string
		b    []byte
		err  error
	}{
		{"empty", nil, ErrShort},
		{"7 bytes", make([]byte, 7), ErrShort},
		{"version 0", make([]byte, 32), ErrVersion},
		{"version 2", func() []byte { b := withType(TypeBACK, BACKLen); Packet(b).SetVersion(2); return b }(), ErrVersion},
		{"reserved type 1 (Isekai push request)", withType(1, 64), ErrType},
		{"reserved type 2", withType(2, 64), ErrType},
		{"reserved type 4", withType(4, 64), ErrType},
		{"reserved type 7", withType(7, 64), ErrType},
		{"reserved type 15", withType(15, 64), ErrType},
		{"short pull request", withType(TypePullRequest, PullRequestLen-1), ErrShort},
		{"short pull data", withType(TypePullData, PullDataHeaderLen-1), ErrShort},
		{"short push data", withType(TypePushData, PushDataHeaderLen-1), ErrShort},
		{"short resync", withType(TypeResync, ResyncLen-1), ErrShort},
		{"short BACK", withType(TypeBACK, BACKLen-1), ErrShort},
		{"short EACK", withType(TypeEACK, EACKLen-1), ErrShort},
		{"BACK-sized EACK", withType(TypeEACK, BACKLen), ErrShort},
		{"short NACK", withType(TypeNACK, NACKLen-1), ErrShort},
		{"long BACK", withType(TypeBACK, BACKLen+4), ErrLength},
		{"long NACK", withType(TypeNACK, NACKLen+1), ErrLength},
		{"long resync", withType(TypeResync, ResyncLen+8), ErrLength},
		{"push payload shorter than request length", push[:len(push)-1], ErrLength},
		{"push payload longer than request length", append(bytes.Clone(push), 0), ErrLength},
	}
	for _, c := range cases {
		if p, err := Parse(c.b); !errors.Is(err, c.err) || p != nil {
			t.Errorf("%s: Parse = %v, %v; want %v", c.name, p, err, c.err)
		}
	}
}

func TestParseDoesNotAllocate(t *testing.T) {
	vs := vectors()
	allocs := testing.AllocsPerRun(100, func() {
		for _, v := range vs {
			if _, err := Parse(v); err != nil {
				panic(err)
			}
		}
	})
	if allocs != 0 {
		t.Errorf("Parse allocates %v times", allocs)
	}
}

func TestBuildersRoundTrip(t *testing.T) {
	f := TxnFields{CID: 0xffffff, DestFunction: 0xffffff, Protocol: ProtoNVMe, AR: true,
		DataBase: 0xffffffff, ReqBase: 1, PSN: 0x80000000, RSN: 0xfffffffe, RequestLength: 0xffff}
	pr := AppendPullRequest(nil, &f)
	if got := pr.Fields(); got != f {
		t.Errorf("pull request fields\n got %+v\nwant %+v", got, f)
	}
	if len(pr.Payload()) != 0 || len(pr) != PullRequestLen || pr.Version() != Version || pr.Type() != TypePullRequest {
		t.Error("pull request shape")
	}
	payload := bytes.Repeat([]byte{0x5a}, 1000)
	pd := AppendPushData(nil, &f, payload)
	want := f
	want.RequestLength = 1000
	if got := pd.Fields(); got != want {
		t.Errorf("push data fields %+v", got)
	}
	if !bytes.Equal(pd.Payload(), payload) || len(pd) != PushDataHeaderLen+1000 {
		t.Error("push data payload")
	}
	rf := f
	rf.RequestLength = 0
	rf.ResyncCode, rf.ResyncPacketType, rf.VendorDefined = ResyncTargetInvalidCID, TypePullRequest, 0xffffffff
	rs := AppendResync(nil, &rf)
	if got := rs.Fields(); got != rf {
		t.Errorf("resync fields %+v", got)
	}
	if rs.ResyncWindow() != WindowRequest || AppendResync(nil, &TxnFields{ResyncPacketType: TypePushData}).ResyncWindow() != WindowData {
		t.Error("ResyncWindow")
	}

	var af, back AckFields
	af.CID, af.DataBase, af.ReqBase, af.T1, af.T2 = 1, 2, 3, 4, 5
	af.CC = CCInfo{MaxHopCount, MaxRxBufferLevel, MaxECNCount, MaxAckRUEValue}
	af.OWNRequest = true
	Ack(AppendBACK(nil, &af)).Fields(&back)
	if back.CID != 1 || back.DataBase != 2 || back.ReqBase != 3 || back.T1 != 4 || back.T2 != 5 || back.CC != af.CC || !back.OWNRequest || back.OWNData {
		t.Errorf("BACK fields %+v", back)
	}
	af.DataAck, af.DataRx, af.Req = NewBitmap(128), NewBitmap(128), NewBitmap(64)
	for i := 0; i < 128; i += 3 {
		af.DataAck.Set(i)
		af.DataRx.Set(127 - i)
		af.Req.Set(i / 2)
	}
	var eack AckFields
	e := AppendEACK(make([]byte, 5, 100), &af)
	if len(e) != EACKLen || !e.IsEACK() {
		t.Fatal("EACK shape")
	}
	e.Fields(&eack)
	if eack != af {
		t.Errorf("EACK fields differ:\n got %+v\nwant %+v", eack, af)
	}

	nf := NackFields{CID: 9, DataBase: 8, ReqBase: 7, T1: 6, T2: 5,
		CC:      CCInfo{MaxHopCount, MaxRxBufferLevel, MaxECNCount, MaxNackRUEValue},
		NackPSN: 0xffffffff, Code: NackInvalidCID, RNRTimeoutCode: 31, RequestWindow: true, ULPCode: 0xff}
	n := AppendNACK(nil, &nf)
	if n.Fields() != nf || n.Window() != WindowRequest || n.RNRTimeout() != RNRTimeout(31) {
		t.Errorf("NACK fields %+v", n.Fields())
	}
}

func TestBuildersAppendAfterHeadroom(t *testing.T) {
	buf := make([]byte, 62, 2048)
	for i := range buf {
		buf[i] = 0xee
	}
	pd := AppendPushData(buf, &TxnFields{PSN: 5}, []byte{1, 2, 3})
	if &pd[0] != &buf[:63][62] {
		t.Error("packet must start after the headroom, in place")
	}
	if buf[61] != 0xee {
		t.Error("headroom overwritten")
	}
	if p, err := Parse(pd); err != nil || p.Txn().PSN() != 5 {
		t.Errorf("parse after headroom: %v", err)
	}
}

// TestBuildIntoReusedBufferDoesNotAllocate: encoding a Push Data header (and
// the acks) into a reused buffer must not allocate.
func TestBuildIntoReusedBufferDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 9000)
	payload := make([]byte, 4096)
	f := TxnFields{CID: 1, Protocol: ProtoRDMA}
	af := AckFields{DataAck: NewBitmap(128), DataRx: NewBitmap(128), Req: NewBitmap(64)}
	nf := NackFields{Code: NackRNR}
	allocs := testing.AllocsPerRun(100, func() {
		f.PSN++
		_ = AppendPushData(buf[:0], &f, payload)
		_ = AppendTxnHeader(buf[:0], TypePushData, &f, 4096)
		_ = AppendEACK(buf[:0], &af)
		_ = AppendBACK(buf[:0], &af)
		_ = AppendNACK(buf[:0], &nf)
		_ = SealICV(AppendPullRequest(buf[:0], &f))
	})
	if allocs != 0 {
		t.Errorf("builders allocate %v times", allocs)
	}
}

func TestAppendTxnHeaderRejectsMisuse(t *testing.T) {
	for _, c := range []struct {
		typ PacketType
		n   int
	}{{TypeBACK, 0}, {TypeResync, 1}, {PacketType(1), 0}, {TypePushData, 1 << 16}, {TypePushData, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendTxnHeader(%v, %d) did not panic", c.typ, c.n)
				}
			}()
			AppendTxnHeader(nil, c.typ, &TxnFields{}, c.n)
		}()
	}
}

func TestPacketPayloadAndHeader(t *testing.T) {
	for _, v := range vectors() {
		p := Packet(v)
		info, _ := p.Type().Info()
		if len(p.Header()) != info.HeaderLen {
			t.Errorf("%v: header %d bytes", p.Type(), len(p.Header()))
		}
		if pl := p.Payload(); info.Payload != (pl != nil) || len(pl) != len(p)-info.HeaderLen && info.Payload {
			t.Errorf("%v: payload %d bytes", p.Type(), len(pl))
		}
	}
}

// TestBuildersMatchSetters: the builders write each header word whole;
// the bytes are the ones the field setters place on a zeroed header, for
// every transaction type and for BACK and EACK, whatever the field
// values (bits beyond a field's width are dropped the same way).
func TestBuildersMatchSetters(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		f := TxnFields{CID: rng.Uint32(), DestFunction: rng.Uint32(), Protocol: ProtocolType(rng.Uint32()), AR: rng.IntN(2) == 1,
			DataBase: PSN(rng.Uint32()), ReqBase: PSN(rng.Uint32()), PSN: PSN(rng.Uint32()), RSN: RSN(rng.Uint32()),
			RequestLength: uint16(rng.Uint32()), ResyncCode: ResyncCode(rng.Uint32()), ResyncPacketType: PacketType(rng.Uint32()),
			VendorDefined: rng.Uint32()}
		for _, typ := range []PacketType{TypePullRequest, TypePullData, TypePushData, TypeResync} {
			n := 0
			if typ.HasPayload() {
				n = rng.IntN(40)
			}
			got := AppendTxnHeader(nil, typ, &f, n)
			want := Txn(make([]byte, typ.HeaderLen()+n))
			want.SetVersion(Version)
			want.SetType(typ)
			want.SetCID(f.CID)
			want.SetDestFunction(f.DestFunction)
			want.SetProtocol(f.Protocol)
			want.SetAR(f.AR)
			want.SetDataBase(f.DataBase)
			want.SetReqBase(f.ReqBase)
			want.SetPSN(f.PSN)
			want.SetRSN(f.RSN)
			switch typ {
			case TypePullRequest:
				want.SetRequestLength(f.RequestLength)
			case TypePushData:
				want.SetRequestLength(uint16(n))
			case TypeResync:
				want.SetResyncCode(f.ResyncCode)
				want.SetResyncPacketType(f.ResyncPacketType)
				want.SetVendorDefined(f.VendorDefined)
			}
			if !bytes.Equal(got[:typ.HeaderLen()], want[:typ.HeaderLen()]) {
				t.Fatalf("%v %+v:\n got % x\nwant % x", typ, f, got[:typ.HeaderLen()], want[:typ.HeaderLen()])
			}
		}
		af := AckFields{CID: rng.Uint32(), DataBase: PSN(rng.Uint32()), ReqBase: PSN(rng.Uint32()),
			T1: Timestamp(rng.Uint32()), T2: Timestamp(rng.Uint32()),
			CC:         CCInfo{uint8(rng.Uint32()), uint8(rng.Uint32()), uint16(rng.Uint32()), rng.Uint32()},
			OWNRequest: rng.IntN(2) == 1, OWNData: rng.IntN(2) == 1}
		got := AppendBACK(nil, &af)
		want := Ack(make([]byte, BACKLen))
		want.SetVersion(Version)
		want.SetType(TypeBACK)
		want.SetCID(af.CID)
		want.SetDataBase(af.DataBase)
		want.SetReqBase(af.ReqBase)
		want.SetT1(af.T1)
		want.SetT2(af.T2)
		want.SetHopCount(af.CC.HopCount)
		want.SetRxBufferLevel(af.CC.RxBufferLevel)
		want.SetECNCount(af.CC.ECNCount)
		want.SetRUEValue(af.CC.RUEValue)
		want.SetOWNRequest(af.OWNRequest)
		want.SetOWNData(af.OWNData)
		if !bytes.Equal(got, want) {
			t.Fatalf("BACK %+v:\n got % x\nwant % x", af, got, want)
		}
	}
}
