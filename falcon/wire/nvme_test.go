package wire

import (
	"bytes"
	"errors"
	"testing"
)

func nbthFields() []field {
	pt := TypePushData
	return []field{
		{"NBTH.Version", pt, 0, 0, 3, func(b []byte) uint64 { return uint64(NBTH(b).Version()) }, func(b []byte, v uint64) { NBTH(b).SetVersion(uint8(v)) }},
		{"NBTH.Type", pt, 0, 4, 7, func(b []byte) uint64 { return uint64(NBTH(b).Type()) }, func(b []byte, v uint64) { NBTH(b).SetType(NVMePacketType(v)) }},
		{"NBTH.InitiatorFunction", pt, 0, 8, 31, func(b []byte) uint64 { return uint64(NBTH(b).InitiatorFunction()) }, func(b []byte, v uint64) { NBTH(b).SetInitiatorFunction(uint32(v)) }},
		{"NBTH.INV", pt, 1, 2, 2, func(b []byte) uint64 { return b2u(NBTH(b).INV()) }, func(b []byte, v uint64) { NBTH(b).SetINV(v != 0) }},
		{"NBTH.S", pt, 1, 3, 3, func(b []byte) uint64 { return b2u(NBTH(b).Split()) }, func(b []byte, v uint64) { NBTH(b).SetSplit(v != 0) }},
		{"NBTH.NG", pt, 1, 4, 4, func(b []byte) uint64 { return b2u(NBTH(b).NG()) }, func(b []byte, v uint64) { NBTH(b).SetNG(v != 0) }},
		{"NBTH.TargetTag", pt, 1, 8, 31, func(b []byte) uint64 { return uint64(NBTH(b).TargetTag()) }, func(b []byte, v uint64) { NBTH(b).SetTargetTag(uint32(v)) }},
		{"NBTH.NCNTTotal", pt, 2, 0, 7, func(b []byte) uint64 { return uint64(NBTH(b).NCNTTotal()) }, func(b []byte, v uint64) { NBTH(b).SetNCNTTotal(uint8(v)) }},
		{"NBTH.InitiatorTag", pt, 2, 8, 31, func(b []byte) uint64 { return uint64(NBTH(b).InitiatorTag()) }, func(b []byte, v uint64) { NBTH(b).SetInitiatorTag(uint32(v)) }},
		{"NBTH.NCNTOffset", pt, 3, 0, 7, func(b []byte) uint64 { return uint64(NBTH(b).NCNTOffset()) }, func(b []byte, v uint64) { NBTH(b).SetNCNTOffset(uint8(v)) }},
		{"NBTH.ICMD", pt, 3, 8, 31, func(b []byte) uint64 { return uint64(NBTH(b).ICMD()) }, func(b []byte, v uint64) { NBTH(b).SetICMD(uint32(v)) }},
		{"Cmd.InitiatorNSID", pt, 0, 0, 15, func(b []byte) uint64 { return uint64(NVMeCmd(b).InitiatorNSID()) }, func(b []byte, v uint64) { NVMeCmd(b).SetInitiatorNSID(uint16(v)) }},
		{"Cmd.TargetNSID", pt, 0, 16, 31, func(b []byte) uint64 { return uint64(NVMeCmd(b).TargetNSID()) }, func(b []byte, v uint64) { NVMeCmd(b).SetTargetNSID(uint16(v)) }},
		{"Cmd.NLB", pt, 3, 0, 15, func(b []byte) uint64 { return uint64(NVMeCmd(b).NLB()) }, func(b []byte, v uint64) { NVMeCmd(b).SetNLB(uint16(v)) }},
		{"Cmd.PRINFO", pt, 3, 26, 29, func(b []byte) uint64 { return uint64(NVMeCmd(b).PRINFO()) }, func(b []byte, v uint64) { NVMeCmd(b).SetPRINFO(uint8(v)) }},
		{"Cmd.FUA", pt, 3, 30, 30, func(b []byte) uint64 { return b2u(NVMeCmd(b).FUA()) }, func(b []byte, v uint64) { NVMeCmd(b).SetFUA(v != 0) }},
		{"Cmd.LR", pt, 3, 31, 31, func(b []byte) uint64 { return b2u(NVMeCmd(b).LR()) }, func(b []byte, v uint64) { NVMeCmd(b).SetLR(v != 0) }},
		{"Cmd.DSM", pt, 4, 0, 7, func(b []byte) uint64 { return uint64(NVMeCmd(b).DSM()) }, func(b []byte, v uint64) { NVMeCmd(b).SetDSM(uint8(v)) }},
		{"Cmd.DTYPE", pt, 4, 8, 11, func(b []byte) uint64 { return uint64(NVMeCmd(b).DTYPE()) }, func(b []byte, v uint64) { NVMeCmd(b).SetDTYPE(uint8(v)) }},
		{"Cmd.DSPEC", pt, 4, 16, 31, func(b []byte) uint64 { return uint64(NVMeCmd(b).DSPEC()) }, func(b []byte, v uint64) { NVMeCmd(b).SetDSPEC(uint16(v)) }},
		{"Cmd.RefTag", pt, 5, 0, 31, func(b []byte) uint64 { return uint64(NVMeCmd(b).RefTag()) }, func(b []byte, v uint64) { NVMeCmd(b).SetRefTag(uint32(v)) }},
		{"Cmd.AppTagMask", pt, 6, 0, 15, func(b []byte) uint64 { return uint64(NVMeCmd(b).AppTagMask()) }, func(b []byte, v uint64) { NVMeCmd(b).SetAppTagMask(uint16(v)) }},
		{"Cmd.AppTag", pt, 6, 16, 31, func(b []byte) uint64 { return uint64(NVMeCmd(b).AppTag()) }, func(b []byte, v uint64) { NVMeCmd(b).SetAppTag(uint16(v)) }},
		{"Cmd.TargetSQID", pt, 7, 24, 31, func(b []byte) uint64 { return uint64(NVMeCmd(b).TargetSQID()) }, func(b []byte, v uint64) { NVMeCmd(b).SetTargetSQID(uint8(v)) }},
	}
}

func TestNVMeFieldPositions(t *testing.T) {
	for _, f := range nbthFields() {
		for _, fill := range []byte{0, 0xff} {
			b := bytes.Repeat([]byte{fill}, 32)
			orig := bytes.Clone(b)
			v := f.max()
			if fill == 0xff {
				v = 0
			}
			f.set(b, v)
			if f.get(b) != v || !bytes.Equal(diff(orig, b), f.mask(32)) {
				t.Errorf("%s: wrong bits %x", f.name, diff(orig, b))
			}
		}
	}
	c := NVMeCmd(make([]byte, NVMeCmdLen))
	c.SetSLBA(0x0102030405060708)
	if c.SLBA() != 0x0102030405060708 || c[4] != 1 || c[11] != 8 {
		t.Errorf("SLBA at C1-C2: %x", []byte(c))
	}
}

// TestNVMeTypeTable checks the NVMe → Falcon mapping of [N] (digest §9.3).
func TestNVMeTypeTable(t *testing.T) {
	want := map[NVMePacketType]PacketType{
		NVMeWriteRequest: TypePushData, NVMeWriteDataRequest: TypePullRequest, NVMeWriteDataResponse: TypePullData,
		NVMeWriteCompletion: TypePushData, NVMeReadRequest: TypePushData, NVMeReadResponse: TypePushData,
	}
	if len(NVMePacketTypes) != len(want) {
		t.Fatal("NVMePacketTypes incomplete")
	}
	for _, nt := range NVMePacketTypes {
		i, ok := nt.Info()
		if !ok || i.Falcon != want[nt] {
			t.Errorf("%v: %+v", nt, i)
		}
	}
	for nt := NVMePacketType(6); nt < 16; nt++ {
		if _, ok := nt.Info(); ok {
			t.Errorf("%d is reserved", nt)
		}
	}
	if NVMePacketType(9).String() != "NVMePacketType(9)" {
		t.Error("reserved name")
	}
}

func TestNVMeRoundTrip(t *testing.T) {
	for _, nt := range NVMePacketTypes {
		info, _ := nt.Info()
		f := NVMeFields{Type: nt, InitiatorFunction: 0xffffff, INV: true, Split: true, NG: true, TargetTag: 0xabcdef,
			NCNTTotal: 255, InitiatorTag: 0x123456, NCNTOffset: 7, ICMD: 0xfedcba, Status: 0x7fff}
		b, n := AppendNVMe([]byte{1, 2}, &f)
		if len(b) != 2+info.HeaderLen {
			t.Fatalf("%v: %d bytes", nt, len(b))
		}
		if n.Cmd != nil {
			n.Cmd.SetSLBA(1 << 40)
			n.Cmd.SetNLB(7)
		}
		data := []byte("4 KiB of blocks")
		pkt := AppendTxn(nil, info.Falcon, &TxnFields{RequestLength: 4224}, append(b[2:], data...))
		p, err := Parse(pkt)
		if err != nil {
			t.Fatalf("%v: %v", nt, err)
		}
		got, err := ParseNVMe(p.Payload(), p.Type())
		if err != nil {
			t.Fatalf("%v: %v", nt, err)
		}
		wantF := f
		if info.HeaderLen != NBTHLen+NVMeStatusLen {
			wantF.Status = 0
		}
		if got.Fields() != wantF || !bytes.Equal(got.Data, data) {
			t.Errorf("%v: %+v data %q", nt, got.Fields(), got.Data)
		}
		if (got.Cmd != nil) != (info.HeaderLen == NBTHLen+NVMeCmdLen) || got.Cmd != nil && (got.Cmd.SLBA() != 1<<40 || got.Cmd.NLB() != 7) {
			t.Errorf("%v: command %x", nt, []byte(got.Cmd))
		}
	}
}

func TestParseNVMeErrors(t *testing.T) {
	good, _ := AppendNVMe(nil, &NVMeFields{Type: NVMeReadRequest})
	bad := func(mut func(NBTH)) []byte { b := bytes.Clone(good); mut(NBTH(b)); return b }
	for _, c := range []struct {
		name string
		b    []byte
		typ  PacketType
		err  error
	}{
		{"short NBTH", good[:NBTHLen-1], TypePushData, ErrNVMeShort},
		{"short command", good[:NBTHLen+NVMeCmdLen-1], TypePushData, ErrNVMeShort},
		{"version 2", bad(func(h NBTH) { h.SetVersion(2) }), TypePushData, ErrNVMeVersion},
		{"reserved type", bad(func(h NBTH) { h.SetType(6) }), TypePushData, ErrNVMeType},
		{"read request in pull data", good, TypePullData, ErrNVMeFalcon},
	} {
		if _, err := ParseNVMe(c.b, c.typ); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
}

func FuzzNVMe(f *testing.F) {
	for _, nt := range NVMePacketTypes {
		info, _ := nt.Info()
		b, _ := AppendNVMe(nil, &NVMeFields{Type: nt, ICMD: 5, Status: 3})
		f.Add(b, uint8(info.Falcon))
	}
	f.Fuzz(func(t *testing.T, b []byte, typ uint8) {
		n, err := ParseNVMe(b, PacketType(typ))
		if err != nil {
			return
		}
		fl := n.Fields()
		re, n2 := AppendNVMe(nil, &fl)
		if n2.Fields() != fl || len(re)+len(n.Data) != len(b) {
			t.Fatal("rebuild differs")
		}
	})
}

// TestAppendNVMeViewIsTheParsedOne: the view AppendNVMe returns is the
// one ParseNVMe reads from the bytes it appended, for every type.
func TestAppendNVMeViewIsTheParsedOne(t *testing.T) {
	for _, nt := range NVMePacketTypes {
		info, _ := nt.Info()
		f := NVMeFields{Type: nt, InitiatorFunction: 0x123, TargetTag: 9, NCNTTotal: 3, InitiatorTag: 0x42,
			NCNTOffset: 1, ICMD: 77, Status: 0x7abc}
		b, n := AppendNVMe([]byte{9}, &f)
		got, err := ParseNVMe(b[1:], info.Falcon)
		if err != nil {
			t.Fatalf("%v: %v", nt, err)
		}
		if n.Fields() != got.Fields() || n.Type != got.Type || len(n.Data) != 0 || len(got.Data) != 0 ||
			!bytes.Equal(n.NBTH, got.NBTH) || !bytes.Equal(n.Cmd, got.Cmd) || (n.Cmd == nil) != (got.Cmd == nil) {
			t.Errorf("%v: appended view %+v, parsed %+v", nt, n.Fields(), got.Fields())
		}
	}
}
