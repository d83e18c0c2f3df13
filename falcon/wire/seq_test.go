package wire

import (
	"math"
	"testing"
)

func TestPSNSerialArithmeticAcrossWrap(t *testing.T) {
	cases := []struct {
		a, b PSN
		diff int32
	}{
		{5, 3, 2},
		{3, 5, -2},
		{0, math.MaxUint32, 1},
		{math.MaxUint32, 0, -1},
		{2, math.MaxUint32 - 1, 4},
		{0x7fffffff, 0, math.MaxInt32},
		{0x80000000, 0, math.MinInt32},
		{7, 7, 0},
	}
	for _, c := range cases {
		if got := c.a.Sub(c.b); got != c.diff {
			t.Errorf("PSN(%v).Sub(%v) = %d, want %d", c.a, c.b, got, c.diff)
		}
		if got := c.a.Less(c.b); got != (c.diff < 0) {
			t.Errorf("PSN(%v).Less(%v) = %v", c.a, c.b, got)
		}
		if got := c.a.LessEq(c.b); got != (c.diff <= 0) {
			t.Errorf("PSN(%v).LessEq(%v) = %v", c.a, c.b, got)
		}
		r, rb := RSN(c.a), RSN(c.b)
		if r.Sub(rb) != c.diff || r.Less(rb) != (c.diff < 0) || r.LessEq(rb) != (c.diff <= 0) {
			t.Errorf("RSN(%v) vs %v disagrees with PSN", r, rb)
		}
	}
}

func TestPSNAddWraps(t *testing.T) {
	p := PSN(math.MaxUint32 - 1)
	if got := p.Add(3); got != 1 {
		t.Errorf("Add across wrap = %v, want 1", got)
	}
	if got := p.Add(3).Sub(p); got != 3 {
		t.Errorf("distance after Add(3) = %d", got)
	}
	if !p.Less(p.Add(1)) || !p.Less(p.Add(1<<31-1)) || p.Less(p.Add(1<<31+1)) {
		t.Error("Less must hold for forward distances below 2^31 and fail beyond")
	}
	if RSN(math.MaxUint32).Add(1) != 0 {
		t.Error("RSN Add does not wrap")
	}
}

func TestSeqString(t *testing.T) {
	if PSN(4294967295).String() != "4294967295" || RSN(17).String() != "17" {
		t.Error("String must print decimal")
	}
}
