package stats

import "testing"

func TestSetSnapshot(t *testing.T) {
	var a, b Counter
	s := Set{{"RxDup", "duplicate packets", &a}, {"TxOK", "sent", &b}}
	a.Inc()
	a.Add(2)
	got := s.Snapshot()
	if got["RxDup"] != 3 || got["TxOK"] != 0 {
		t.Fatalf("snapshot %v", got)
	}
	if nz := s.NonZero(); len(nz) != 1 || nz[0] != "RxDup" {
		t.Fatalf("NonZero = %v", nz)
	}
}
