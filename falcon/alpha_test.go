package falcon

import (
	"errors"
	"testing"
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/internal/clock"
)

// TestRUEAlphaLimitsAConnectionsRequests [RM-8]: a response's AlphaRequest
// becomes the connection's dynamic threshold — it may hold at most alpha ×
// the NIC's free Tx request packets — while another connection keeps the
// NIC's (none here).
func TestRUEAlphaLimitsAConnectionsRequests(t *testing.T) {
	l := tl.DefaultLimits()
	l.TxReqPkts, l.TxReqCells = 8, 8*17
	e := New(Config{Clock: clock.NewManual(time.Millisecond), Link: &capLink{}, ULP: &recULP{name: "A"}, Limits: l})
	limited, err := e.Connect(ConnConfig{SCID: 1, DCID: 2})
	if err != nil {
		t.Fatal(err)
	}
	free, err := e.Connect(ConnConfig{SCID: 3, DCID: 4})
	if err != nil {
		t.Fatal(err)
	}
	e.ApplyRUE(rue.Response{Conn: 1, Fcwnd: 32 * rue.One, Ncwnd: 64, AlphaRequest: rue.FixedFrom(0.25)})
	n := 0
	for ; n < 8; n++ {
		if _, err := limited.Push(uint64(n), pattern(0, 64)); err != nil {
			if !errors.Is(err, ErrXoff) {
				t.Fatal(err)
			}
			break
		}
	}
	// held 0 < 0.25·8, held 1 < 0.25·7; held 2 ≥ 0.25·6.
	if n != 2 {
		t.Fatalf("alpha 0.25 admitted %d pushes, want 2", n)
	}
	m := 0
	for ; m < 8; m++ {
		if _, err := free.Push(uint64(m), pattern(0, 64)); err != nil {
			break
		}
	}
	if m != 6 {
		t.Errorf("the other connection took %d of the 6 packets left, want all", m)
	}
}
