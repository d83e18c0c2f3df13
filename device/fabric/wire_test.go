package fabric

import (
	"bytes"
	"testing"
)

func fabricDatagram(k Kind, flow uint32, payload []byte) []byte {
	b := make([]byte, HeaderLen+len(payload))
	Encode(b, k, flow, len(payload))
	copy(b[HeaderLen:], payload)
	return b
}

func TestFabricHeaderLayout(t *testing.T) {
	b := fabricDatagram(KindFalcon, 0x01020304, []byte{0xaa, 0xbb})
	want := []byte{0xFA, 0x1C, 1, 2, 1, 2, 3, 4, 0, 2, 0, 0, 0xaa, 0xbb}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	h, payload, ok := Decode(b)
	if !ok || h.Kind() != KindFalcon || h.FlowLabel() != 0x01020304 || h.Length() != 2 || !bytes.Equal(payload, want[12:]) {
		t.Fatalf("decode: ok=%v kind=%v flow=%#x len=%d payload=% x", ok, h.Kind(), h.FlowLabel(), h.Length(), payload)
	}
}

func TestFabricDecodeRejects(t *testing.T) {
	eth := testFrame(bcastMAC, testMAC(1), 0x0800, 20)
	good := fabricDatagram(KindEthernet, 7, eth)
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, c := range []struct {
		name string
		b    []byte
		want fabricDrop
	}{
		{"good", good, dropNone},
		{"empty", nil, dropShort},
		{"header minus one", good[:HeaderLen-1], dropShort},
		{"magic", mutate(func(b []byte) []byte { b[0] = 0xFB; return b }), dropBadMagic},
		{"version 0", mutate(func(b []byte) []byte { b[2] = 0; return b }), dropBadVersion},
		{"version 2", mutate(func(b []byte) []byte { b[2] = 2; return b }), dropBadVersion},
		{"kind 0", mutate(func(b []byte) []byte { b[3] = 0; return b }), dropBadKind},
		{"kind 4", mutate(func(b []byte) []byte { b[3] = numKinds; return b }), dropBadKind},
		{"kind 255", mutate(func(b []byte) []byte { b[3] = 255; return b }), dropBadKind},
		{"truncated", good[:len(good)-1], dropBadLength},
		{"trailing byte", append(append([]byte(nil), good...), 0), dropBadLength},
		{"length too big", mutate(func(b []byte) []byte { b[8] = 0xff; return b }), dropBadLength},
		{"reserved", mutate(func(b []byte) []byte { b[11] = 1; return b }), dropReserved},
		{"ethernet runt", fabricDatagram(KindEthernet, 0, eth[:13]), dropRunt},
		{"empty falcon", fabricDatagram(KindFalcon, 0, nil), dropRunt},
		{"empty cm", fabricDatagram(KindCM, 0, nil), dropRunt},
	} {
		_, _, got := decodeFabric(c.b)
		if got != c.want {
			t.Errorf("%s: cause %s, want %s", c.name, fabricDrops[got].name, fabricDrops[c.want].name)
		}
	}
}

func TestFabricTablesHaveEveryRow(t *testing.T) {
	names := map[string]bool{}
	for i, d := range fabricDrops {
		if d.name == "" || d.help == "" {
			t.Errorf("drop cause %d has no row", i)
		}
		if names[d.name] {
			t.Errorf("drop cause name %s used twice", d.name)
		}
		names[d.name] = true
	}
	for k := Kind(1); k < numKinds; k++ {
		if fabricKinds[k].name == "" || fabricKinds[k].minPayload < 1 {
			t.Errorf("kind %d has no row", k)
		}
	}
	if got := Kind(9).String(); got != "kind(9)" {
		t.Errorf("String of an unknown kind = %q", got)
	}
}

func FuzzFabricDecode(f *testing.F) {
	f.Add(fabricDatagram(KindEthernet, 7, testFrame(bcastMAC, testMAC(1), 0x0800, 20)))
	f.Add(fabricDatagram(KindFalcon, 0xffffffff, []byte{1, 2, 3}))
	f.Add(fabricDatagram(KindCM, 0, []byte{9}))
	f.Add([]byte{0xFA, 0x1C, 1, 1, 0, 0, 0, 0, 0xff, 0xff, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, payload, ok := Decode(b)
		if !ok {
			return
		}
		if int(h.Length()) != len(payload) || len(payload)+HeaderLen != len(b) {
			t.Fatalf("accepted length %d with payload %d of datagram %d", h.Length(), len(payload), len(b))
		}
		again := fabricDatagram(h.Kind(), h.FlowLabel(), payload)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n% x\n% x", again, b)
		}
	})
}
