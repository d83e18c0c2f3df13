package wire

import (
	"bytes"
	"errors"
	"testing"
)

func rbthFields() []field {
	pt := TypePushData // only used for naming; RBTH is 12 bytes (3 words)
	return []field{
		{"RBTH.Version", pt, 0, 0, 3, func(b []byte) uint64 { return uint64(RBTH(b).Version()) }, func(b []byte, v uint64) { RBTH(b).SetVersion(uint8(v)) }},
		{"RBTH.CE", pt, 0, 19, 19, func(b []byte) uint64 { return b2u(RBTH(b).CE()) }, func(b []byte, v uint64) { RBTH(b).SetCE(v != 0) }},
		{"RBTH.Pad", pt, 0, 20, 21, func(b []byte) uint64 { return uint64(RBTH(b).Pad()) }, func(b []byte, v uint64) { RBTH(b).SetPad(uint8(v)) }},
		{"RBTH.AckReq", pt, 0, 22, 22, func(b []byte) uint64 { return b2u(RBTH(b).AckReq()) }, func(b []byte, v uint64) { RBTH(b).SetAckReq(v != 0) }},
		{"RBTH.SE", pt, 0, 23, 23, func(b []byte) uint64 { return b2u(RBTH(b).SE()) }, func(b []byte, v uint64) { RBTH(b).SetSE(v != 0) }},
		{"RBTH.Opcode", pt, 0, 24, 31, func(b []byte) uint64 { return uint64(RBTH(b).Opcode()) }, func(b []byte, v uint64) { RBTH(b).SetOpcode(RDMAOpcode(v)) }},
		{"RBTH.DestQP", pt, 1, 0, 23, func(b []byte) uint64 { return uint64(RBTH(b).DestQP()) }, func(b []byte, v uint64) { RBTH(b).SetDestQP(uint32(v)) }},
		{"RBTH.SN", pt, 2, 0, 31, func(b []byte) uint64 { return uint64(RBTH(b).SN()) }, func(b []byte, v uint64) { RBTH(b).SetSN(uint32(v)) }},
		{"DETH.SrcQP", pt, 1, 8, 31, func(b []byte) uint64 { return uint64(DETH(b).SrcQP()) }, func(b []byte, v uint64) { DETH(b).SetSrcQP(uint32(v)) }},
		{"DETH.QKey", pt, 0, 0, 31, func(b []byte) uint64 { return uint64(DETH(b).QKey()) }, func(b []byte, v uint64) { DETH(b).SetQKey(uint32(v)) }},
	}
}

func TestRBTHFieldPositions(t *testing.T) {
	for _, f := range rbthFields() {
		for _, fill := range []byte{0, 0xff} {
			b := bytes.Repeat([]byte{fill}, RBTHLen)
			orig := bytes.Clone(b)
			v := f.max()
			if fill == 0xff {
				v = 0
			}
			f.set(b, v)
			if f.get(b) != v || !bytes.Equal(diff(orig, b), f.mask(RBTHLen)) {
				t.Errorf("%s: wrong bits %x", f.name, diff(orig, b))
			}
		}
	}
}

// TestRDMAOpcodeTable checks every opcode constant has a row matching the
// opcode → Falcon type mapping of [R] (digest §9.2).
func TestRDMAOpcodeTable(t *testing.T) {
	wantType := map[RDMAOpcode]PacketType{}
	for op := OpSendFirst; op <= OpWriteOnlyImm; op++ {
		wantType[op] = TypePushData
	}
	for _, op := range []RDMAOpcode{OpSendLastInv, OpSendOnlyInv, OpUDSendOnly, OpUDSendOnlyImm} {
		wantType[op] = TypePushData
	}
	for _, op := range []RDMAOpcode{OpReadRequest, OpCompareSwap, OpFetchAdd} {
		wantType[op] = TypePullRequest
	}
	for _, op := range []RDMAOpcode{OpReadResponseFirst, OpReadResponseMiddle, OpReadResponseLast, OpReadResponseOnly, OpAtomicResponse} {
		wantType[op] = TypePullData
	}
	if len(RDMAOpcodes) != len(wantType) {
		t.Fatalf("RDMAOpcodes has %d entries, want %d", len(RDMAOpcodes), len(wantType))
	}
	for _, op := range RDMAOpcodes {
		info, ok := op.Info()
		if !ok || info.Falcon != wantType[op] {
			t.Errorf("%v: row %+v, want Falcon type %v", op, info, wantType[op])
		}
	}
	n := 0
	for op := 0; op < 256; op++ {
		if RDMAOpcode(op).Valid() {
			n++
			if _, listed := wantType[RDMAOpcode(op)]; !listed {
				t.Errorf("row for unlisted opcode %#x", op)
			}
		}
	}
	if n != len(wantType) {
		t.Errorf("%d rows", n)
	}
	// Header stacks from [R]: a sample.
	for _, c := range []struct {
		op  RDMAOpcode
		ext RDMAExtSet
		len int
	}{
		{OpWriteMiddle, exts(ExtRETH), 12 + 16},
		{OpWriteOnlyImm, exts(ExtRETH, ExtSETH, ExtImmDt), 12 + 16 + 4 + 4},
		{OpSendOnly, exts(ExtSETH, ExtOETH), 12 + 8},
		{OpSendOnlyInv, exts(ExtSETH, ExtOETH, ExtIETH), 12 + 12},
		{OpReadRequest, exts(ExtRETH, ExtSETH, ExtSTETH), 12 + 16 + 4 + 12},
		{OpReadResponseOnly, exts(ExtSTETH), 12 + 12},
		{OpUDSendOnlyImm, exts(ExtDETH, ExtImmDt), 12 + 12},
	} {
		if i, _ := c.op.Info(); i.Ext != c.ext || c.op.HeaderLen() != c.len {
			t.Errorf("%v: ext %b len %d", c.op, i.Ext, c.op.HeaderLen())
		}
	}
	if RDMAOpcode(0x11).String() != "RDMAOpcode(0x11)" || RDMAOpcode(0x11).HeaderLen() != 0 {
		t.Error("ULP Acknowledge is not carried over Falcon")
	}
	for e := RDMAExt(0); e < numRDMAExt; e++ {
		if e.Len() == 0 || e.String() == "" {
			t.Errorf("ext %d has no row", e)
		}
	}
}

func fullRDMAFields(op RDMAOpcode) RDMAFields {
	return RDMAFields{Op: op, CE: true, Pad: 3, AckReq: true, SE: true, DestQP: 0xffffff, SN: 0xfffffffe,
		VA: 0x0102030405060708, RKey: 0x11223344, DMALength: 0xfffff, RMSN: 77, Offset: 8192,
		SinkVA: 0xa1a2a3a4a5a6a7a8, SinkLKey: 0x55667788, Imm: 0xdeadbeef, InvRKey: 0xcafe, QKey: 0x80010000,
		SrcQP: 0xabcdef, SwapAdd: 0xffffffffffffffff, Compare: 42, AtomicOrg: 0x0f0f0f0f0f0f0f0f}
}

// mask keeps the fields op carries.
func maskRDMA(f RDMAFields) RDMAFields {
	info, _ := f.Op.Info()
	m := RDMAFields{Op: f.Op, CE: f.CE, Pad: f.Pad, AckReq: f.AckReq, SE: f.SE, DestQP: f.DestQP, SN: f.SN}
	if info.Ext.Has(ExtRETH) {
		m.VA, m.RKey, m.DMALength = f.VA, f.RKey, f.DMALength
	}
	if info.Ext.Has(ExtAtomicETH) {
		m.VA, m.RKey, m.SwapAdd, m.Compare = f.VA, f.RKey, f.SwapAdd, f.Compare
	}
	if info.Ext.Has(ExtDETH) {
		m.QKey, m.SrcQP = f.QKey, f.SrcQP
	}
	if info.Ext.Has(ExtSETH) {
		m.RMSN = f.RMSN
	}
	if info.Ext.Has(ExtOETH) {
		m.Offset = f.Offset
	}
	if info.Ext.Has(ExtSTETH) {
		m.SinkVA, m.SinkLKey = f.SinkVA, f.SinkLKey
	}
	if info.Ext.Has(ExtAtomicAckETH) {
		m.AtomicOrg = f.AtomicOrg
	}
	if info.Ext.Has(ExtImmDt) {
		m.Imm = f.Imm
	}
	if info.Ext.Has(ExtIETH) {
		m.InvRKey = f.InvRKey
	}
	return m
}

func TestRDMARoundTripEveryOpcode(t *testing.T) {
	data := []byte("0123456789")
	for _, op := range RDMAOpcodes {
		f := fullRDMAFields(op)
		info, _ := op.Info()
		b := append(AppendRDMA([]byte{0xee}, &f), data...)[1:]
		if len(b) != op.HeaderLen()+len(data) {
			t.Fatalf("%v: %d bytes", op, len(b))
		}
		// Inside a Falcon packet, through Parse.
		p, err := Parse(AppendTxn(nil, info.Falcon, &TxnFields{RequestLength: 4096}, b))
		if err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		r, err := ParseRDMA(p.Payload(), p.Type())
		if err != nil {
			t.Fatalf("%v: ParseRDMA: %v", op, err)
		}
		if got, want := r.Fields(), maskRDMA(f); got != want {
			t.Errorf("%v:\n got %+v\nwant %+v", op, got, want)
		}
		if !bytes.Equal(r.Data, data) {
			t.Errorf("%v: data %q", op, r.Data)
		}
		if _, ok := r.RETH(); ok != info.Ext.Has(ExtRETH) {
			t.Errorf("%v: RETH presence", op)
		}
	}
}

func TestParseRDMAErrors(t *testing.T) {
	f := fullRDMAFields(OpWriteOnly)
	good := AppendRDMA(nil, &f)
	bad := func(mut func([]byte)) []byte { b := bytes.Clone(good); mut(b); return b }
	for _, c := range []struct {
		name string
		b    []byte
		typ  PacketType
		err  error
	}{
		{"short RBTH", good[:11], TypePushData, ErrRDMAShort},
		{"missing RETH bytes", good[:RBTHLen+RETHLen-1], TypePushData, ErrRDMAShort},
		{"version 0", bad(func(b []byte) { RBTH(b).SetVersion(0) }), TypePushData, ErrRDMAVersion},
		{"ULP ack opcode", bad(func(b []byte) { RBTH(b).SetOpcode(0x11) }), TypePushData, ErrRDMAOpcode},
		{"write in pull data", good, TypePullData, ErrRDMAType},
	} {
		if _, err := ParseRDMA(c.b, c.typ); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		r, _ := ParseRDMA(good, TypePushData)
		_ = r.Fields()
	})
	if allocs != 0 {
		t.Errorf("ParseRDMA allocates %v", allocs)
	}
}

func FuzzRDMA(f *testing.F) {
	for _, op := range RDMAOpcodes {
		fl := fullRDMAFields(op)
		info, _ := op.Info()
		f.Add(AppendRDMA(nil, &fl), uint8(info.Falcon))
	}
	f.Fuzz(func(t *testing.T, b []byte, typ uint8) {
		r, err := ParseRDMA(b, PacketType(typ))
		if err != nil {
			return
		}
		fl := r.Fields()
		re := AppendRDMA(nil, &fl)
		r2, err := ParseRDMA(append(re, r.Data...), PacketType(typ))
		if err != nil || r2.Fields() != fl || !bytes.Equal(r2.Data, r.Data) {
			t.Fatalf("rebuild differs: %v", err)
		}
	})
}
