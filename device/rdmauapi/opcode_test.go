package rdmauapi

import (
	"sort"
	"testing"
)

func sortedOpcodes() []Opcode {
	ops := make([]Opcode, 0, len(Table))
	for o := range Table {
		ops = append(ops, o)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	return ops
}

// Every row of the table is complete and consistent with its kind.
func TestTableRows(t *testing.T) {
	names := map[string]bool{}
	for _, o := range sortedOpcodes() {
		r := Table[o]
		if r.Name == "" || names[r.Name] {
			t.Errorf("%#x: empty or duplicate name %q", uint16(o), r.Name)
		}
		names[r.Name] = true
		if o.String() != r.Name {
			t.Errorf("%#x: String() = %q", uint16(o), o.String())
		}
		switch r.Kind {
		case KindRequest:
			if o >= 0x40 {
				t.Errorf("%s: requests live below 0x40", r.Name)
			}
		case KindDoorbell:
			if r.ReqSize != DoorbellSize || r.ReplySize != 0 || o < 0x40 || o >= 0x80 {
				t.Errorf("%s: doorbell row %+v", r.Name, r)
			}
		case KindEvent:
			if r.ReqSize != EventSize || r.ReplySize != 0 || o < 0x80 {
				t.Errorf("%s: event row %+v", r.Name, r)
			}
		default:
			t.Errorf("%s: no kind", r.Name)
		}
		if r.ReqSize > MaxBody || r.ReplySize > MaxBody {
			t.Errorf("%s: body larger than MaxBody", r.Name)
		}
	}
	for op := Opcode(0); op < 0x400; op++ {
		r, ok := Lookup(op)
		want, wok := Table[op]
		if ok != wok || r != want {
			t.Errorf("Lookup(%#x) = %+v, %v; Table has %+v, %v", uint16(op), r, ok, want, wok)
		}
	}
	if got := Opcode(0x7f).String(); got != "Opcode(0x7f)" {
		t.Errorf("unknown opcode String() = %q", got)
	}
}

func TestStatusNames(t *testing.T) {
	for s := StatusOK; int(s) < len(statusNames); s++ {
		if statusNames[s] == "" {
			t.Errorf("status %d has no name", s)
		}
	}
	if got := Status(99).String(); got != "Status(99)" {
		t.Errorf("unknown status String() = %q", got)
	}
}
