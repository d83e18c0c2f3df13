package wire

import (
	"testing"
	"time"
)

func TestTimestampUnit(t *testing.T) {
	// One tick is 131.072 ns = 2^17 ps.
	cases := []struct {
		d    time.Duration
		want Timestamp
	}{
		{0, 0},
		{131 * time.Nanosecond, 0},
		{132 * time.Nanosecond, 1},
		{16384 * time.Nanosecond, 125},
		{time.Millisecond, 7629},            // 1e6/131.072 = 7629.39
		{time.Second, 7629394},              // 1e9/131.072 = 7629394.5
		{562949953422 * time.Nanosecond, 0}, // 2^32 ticks = 562.949953421312 s wraps
		{562949953421 * time.Nanosecond, 0xffffffff},
	}
	for _, c := range cases {
		if got := TimestampAt(c.d); got != c.want {
			t.Errorf("TimestampAt(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	if Timestamp(125).Duration() != 16384*time.Nanosecond {
		t.Error("Duration of 125 ticks")
	}
	// Far clock readings (days) do not overflow the conversion.
	d := 40 * 24 * time.Hour
	if got := TimestampAt(d + time.Millisecond).Sub(TimestampAt(d)); got < 999*time.Microsecond || got > time.Millisecond {
		t.Errorf("1 ms at day 40 measured as %v", got)
	}
}

func TestTimestampSubAcrossWrap(t *testing.T) {
	a := Timestamp(0xffffff00)
	b := a + 0x200 // wrapped
	if got := b.Sub(a); got != Timestamp(0x200).Duration() {
		t.Errorf("Sub across wrap = %v", got)
	}
	if got := a.Sub(b); got != -Timestamp(0x200).Duration() {
		t.Errorf("negative Sub = %v", got)
	}
	t1 := TimestampAt(10 * time.Second)
	t4 := TimestampAt(10*time.Second + 25*time.Microsecond)
	if rtt := t4.Sub(t1); rtt < 25*time.Microsecond-132*time.Nanosecond || rtt > 25*time.Microsecond+132*time.Nanosecond {
		t.Errorf("rtt = %v", rtt)
	}
}
