package hrtimer

import (
	"net"
	"slices"
	"testing"
	"time"
)

// failsafe bounds every wait of these tests: a timer that does not fire
// is a failure, never a hang.
const failsafe = 10 * time.Second

func TestTimerFiresOnceAfterReset(t *testing.T) {
	tm, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	start := time.Now()
	tm.Reset(2 * time.Millisecond)
	select {
	case <-tm.C:
	case <-time.After(failsafe):
		t.Fatal("the timer did not fire")
	}
	if d := time.Since(start); d < 2*time.Millisecond {
		t.Fatalf("fired after %v, before its deadline", d)
	}
	// One arming, one expiry.
	select {
	case <-tm.C:
		t.Fatal("a second expiry of a one-shot timer")
	case <-time.After(20 * time.Millisecond):
	}
	tm.Reset(0) // at once
	select {
	case <-tm.C:
	case <-time.After(failsafe):
		t.Fatal("Reset(0) did not fire")
	}
}

func TestStopAndResetReplaceTheArming(t *testing.T) {
	tm, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	tm.Reset(200 * time.Millisecond)
	tm.Stop()
	tm.Reset(300 * time.Millisecond)
	tm.Reset(time.Hour) // replaces both
	select {
	case <-tm.C:
		t.Fatal("a stopped or replaced arming fired")
	case <-time.After(500 * time.Millisecond):
	}
	tm.Reset(time.Millisecond) // replaces the hour
	select {
	case <-tm.C:
	case <-time.After(failsafe):
		t.Fatal("the re-armed timer did not fire")
	}
}

func TestCloseEndsTheReader(t *testing.T) {
	tm, err := New()
	if err != nil {
		t.Fatal(err)
	}
	tm.Reset(time.Hour)
	if err := tm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tm.Close(); err == nil {
		t.Fatal("a second Close did not fail")
	}
}

// BenchmarkWakeLateness measures how late a goroutine waiting for a timer
// wakes, in a process whose runtime sleeps in the network poller (a UDP
// socket is open, every goroutine idle): a Go timer against this
// package's. It reports the median and 99th percentile lateness (µs).
func BenchmarkWakeLateness(b *testing.B) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, d := range []time.Duration{20 * time.Microsecond, 200 * time.Microsecond} {
		b.Run("go/"+d.String(), func(b *testing.B) {
			tm := time.NewTimer(time.Hour)
			defer tm.Stop()
			lateness(b, d, func() { tm.Reset(d); <-tm.C })
		})
		b.Run("hrtimer/"+d.String(), func(b *testing.B) {
			tm, err := New()
			if err != nil {
				b.Fatal(err)
			}
			defer tm.Close()
			lateness(b, d, func() { tm.Reset(d); <-tm.C })
		})
	}
}

func lateness(b *testing.B, d time.Duration, wait func()) {
	late := make([]time.Duration, 0, b.N)
	for b.Loop() {
		s := time.Now()
		wait()
		late = append(late, time.Since(s)-d)
	}
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)/2])/1e3, "p50-late-µs")
	b.ReportMetric(float64(late[len(late)*99/100])/1e3, "p99-late-µs")
}
