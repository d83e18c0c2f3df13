package rue

import "testing"

func TestFixedPoint(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want Fixed
	}{{1, One}, {0.5, One / 2}, {32, 32 << FracBits}, {-1, 0}, {1.0 / 1024, 1}} {
		if got := FixedFrom(c.f); got != c.want {
			t.Errorf("FixedFrom(%v) = %d, want %d", c.f, got, c.want)
		}
	}
	if (3*One+One/4).String() != "3.250" || (5*One).Int() != 5 {
		t.Error("formatting")
	}
	for _, e := range []EventType{EventACK, EventNACK, EventRetx, EventUndo} {
		if e.String()[0] == 'E' {
			t.Errorf("event type %d unnamed", e)
		}
	}
}
