package clock

import (
	"testing"
	"time"
)

func TestManualFiresInDeadlineOrder(t *testing.T) {
	m := NewManual(0)
	var got []int
	var at []Time
	for i, d := range []time.Duration{30, 10, 20, 10} {
		i := i
		m.AfterFunc(d, func() { got = append(got, i); at = append(at, m.Now()) })
	}
	m.Advance(15)
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("after 15: fired %v, want [1 3]", got)
	}
	if at[0] != 10 || at[1] != 10 {
		t.Fatalf("callbacks saw times %v, want the deadline 10", at)
	}
	if m.Now() != 15 {
		t.Fatalf("Now = %v, want 15", m.Now())
	}
	m.Advance(100)
	if len(got) != 4 || got[2] != 2 || got[3] != 0 {
		t.Fatalf("fired %v, want [1 3 2 0]", got)
	}
}

func TestManualStopAndReschedule(t *testing.T) {
	m := NewManual(5)
	fired := 0
	tm := m.AfterFunc(10, func() { fired++ })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if tm.Stop() {
		t.Fatal("second Stop returned true")
	}
	// A callback that schedules another timer inside the advanced span.
	m.AfterFunc(1, func() { m.AfterFunc(1, func() { fired += 10 }) })
	m.Advance(20)
	if fired != 10 {
		t.Fatalf("fired = %d, want 10 (stopped timer must not run; nested one must)", fired)
	}
	if _, ok := m.Next(); ok {
		t.Fatal("timers left pending")
	}
}

func TestManualNeverGoesBack(t *testing.T) {
	m := NewManual(100)
	m.Set(50)
	if m.Now() != 100 {
		t.Fatalf("Now = %v after Set(50), want 100", m.Now())
	}
}
