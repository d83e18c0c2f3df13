package wire

import (
	"bytes"
	"testing"
)

func seedVectors(f *testing.F) {
	for _, v := range vectors() {
		f.Add(v)
	}
	f.Add([]byte{})
	f.Add([]byte{0x10, 0, 0, 1, 0, 0, 0, 0x02})
}

// FuzzParse feeds arbitrary bytes to Parse; whatever it accepts must be
// readable through its type's view and survive a rebuild from its fields.
func FuzzParse(f *testing.F) {
	seedVectors(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			if p != nil {
				t.Fatal("error with a packet")
			}
			return
		}
		if p.Version() != Version || !p.Type().Valid() || len(p) < p.Type().HeaderLen() {
			t.Fatalf("accepted bad packet %x", b)
		}
		_ = p.CID() + uint32(p.DataBase()) + uint32(p.ReqBase())
		switch p.Type() {
		case TypePullRequest, TypePullData, TypePushData, TypeResync:
			tx := p.Txn()
			fl := tx.Fields()
			re := AppendTxn(nil, tx.Type(), &fl, tx.Payload())
			if re.Fields() != fl || !bytes.Equal(re.Payload(), tx.Payload()) {
				t.Fatalf("txn rebuild differs")
			}
			if _, err := Parse(re); err != nil {
				t.Fatalf("rebuilt txn does not parse: %v", err)
			}
		case TypeBACK, TypeEACK:
			checkAck(t, p.Ack())
		case TypeNACK:
			checkNack(t, p.Nack())
		}
	})
}

func checkAck(t *testing.T, a Ack) {
	var fl, back AckFields
	a.Fields(&fl)
	var re Ack
	if a.IsEACK() {
		re = AppendEACK(nil, &fl)
	} else {
		re = AppendBACK(nil, &fl)
	}
	re.Fields(&back)
	if back != fl {
		t.Fatalf("ack rebuild differs")
	}
	if _, err := Parse(re); err != nil {
		t.Fatalf("rebuilt ack does not parse: %v", err)
	}
}

func checkNack(t *testing.T, n Nack) {
	fl := n.Fields()
	re := AppendNACK(nil, &fl)
	if re.Fields() != fl {
		t.Fatalf("nack rebuild differs")
	}
	if _, err := Parse(re); err != nil {
		t.Fatalf("rebuilt nack does not parse: %v", err)
	}
	_ = n.RNRTimeout()
}

// FuzzAck reads arbitrary 72-byte bodies as BACK and EACK.
func FuzzAck(f *testing.F) {
	seedVectors(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < EACKLen {
			b = append(b, make([]byte, EACKLen-len(b))...)
		}
		for _, typ := range []PacketType{TypeBACK, TypeEACK} {
			h := bytes.Clone(b[:typ.HeaderLen()])
			Packet(h).SetVersion(Version)
			Packet(h).SetType(typ)
			if _, err := Parse(h); err != nil {
				t.Fatalf("%v: %v", typ, err)
			}
			checkAck(t, Ack(h))
		}
	})
}

// FuzzNack reads arbitrary 40-byte bodies as NACKs.
func FuzzNack(f *testing.F) {
	seedVectors(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < NACKLen {
			b = append(b, make([]byte, NACKLen-len(b))...)
		}
		h := bytes.Clone(b[:NACKLen])
		Packet(h).SetVersion(Version)
		Packet(h).SetType(TypeNACK)
		if _, err := Parse(h); err != nil {
			t.Fatal(err)
		}
		checkNack(t, Nack(h))
		if n := Nack(h); !n.Code().Valid() && n.Code().String() == "" {
			t.Fatal("unnamed code")
		}
	})
}

// FuzzTxn reads arbitrary bytes as each transaction type.
func FuzzTxn(f *testing.F) {
	seedVectors(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, typ := range []PacketType{TypePullRequest, TypePullData, TypePushData, TypeResync} {
			if len(b) < typ.HeaderLen() {
				continue
			}
			h := bytes.Clone(b)
			Packet(h).SetVersion(Version)
			Packet(h).SetType(typ)
			p, err := Parse(h)
			if err != nil {
				continue
			}
			tx := p.Txn()
			_ = tx.ResyncCode().String() + tx.ResyncPacketType().String() + tx.Protocol().String()
			_ = tx.ResyncWindow()
			fl := tx.Fields()
			if re := AppendTxn(nil, typ, &fl, tx.Payload()); re.Fields() != fl {
				t.Fatal("rebuild differs")
			}
		}
	})
}

// FuzzOpenICV checks that OpenICV never accepts a buffer whose checksum does
// not match and always accepts what SealICV produced.
func FuzzOpenICV(f *testing.F) {
	for _, v := range vectors() {
		f.Add(v)
		f.Add(SealICV(bytes.Clone(v)))
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		body, ok := OpenICV(b)
		if ok && !bytes.Equal(SealICV(bytes.Clone(body)), b) {
			t.Fatal("accepted a wrong ICV")
		}
		sealed := SealICV(bytes.Clone(b))
		if got, ok := OpenICV(sealed); !ok || !bytes.Equal(got, b) {
			t.Fatal("rejected its own seal")
		}
	})
}

// FuzzBitmap drives a bitmap with arbitrary operations; it must never panic
// and keep bits beyond its size clear.
func FuzzBitmap(f *testing.F) {
	f.Add(uint16(128), []byte{0, 1, 2, 3, 200, 7})
	f.Add(uint16(1024), []byte{255, 255, 0, 9})
	f.Fuzz(func(t *testing.T, size uint16, ops []byte) {
		b := NewBitmap(int(size))
		for i := 0; i+1 < len(ops); i += 2 {
			arg := int(int8(ops[i+1])) * 9
			switch ops[i] % 5 {
			case 0:
				b.Set(arg)
			case 1:
				b.Clear(arg)
			case 2:
				b.ShiftDown(arg)
			case 3:
				_ = b.Test(arg)
			case 4:
				o := NewBitmap(arg)
				o.Set(arg - 1)
				b.Or(&o)
			}
			if h := b.Highest(); h >= b.Size() || b.TrailingOnes() > b.Count() || b.Count() > b.Size() {
				t.Fatalf("invariant broken: size %d high %d", b.Size(), h)
			}
		}
	})
}
