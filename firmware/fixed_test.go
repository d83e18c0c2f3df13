package firmware

import (
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/rue"
	"falconnic/falcon/sim"
	"falconnic/falcon/tl"
)

type pushULP struct{ done int }

func (u *pushULP) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if r.Kind == tl.Push {
		c.AckPush(r.RSN)
	}
}
func (u *pushULP) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) { u.done++ }
func (u *pushULP) OnXon(c *falcon.Conn)                                {}

func runPushes(t *testing.T, eng rue.Engine, drain func(p *sim.Pair)) *sim.Pair {
	t.Helper()
	ua, ub := &pushULP{}, &pushULP{}
	p, err := sim.NewPair(sim.PairConfig{
		AB: link.MemConfig{Delay: 10 * time.Microsecond}, BA: link.MemConfig{Delay: 10 * time.Microsecond},
		Conn: falcon.ConnConfig{SCID: 1, DCID: 2}, ULPA: ua, ULPB: ub, RUEA: eng})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 256)
	sent := 0
	ok := p.RunUntil(func() bool {
		for sent < 500 {
			if _, err := p.CA.Push(0, payload); err != nil {
				break
			}
			sent++
		}
		if drain != nil {
			drain(p)
		}
		return ua.done == 500
	}, time.Second)
	if !ok {
		t.Fatalf("completed %d of 500", ua.done)
	}
	return p
}

// The fixed-window RUE keeps the windows and derives the RTO from the
// measured fabric delay: 2 × ~20 µs is below the 250 µs floor.
func TestFixedSetsRTOFromRTT(t *testing.T) {
	f := NewFixed(FixedConfig{Fcwnd: 16 * rue.One, Ncwnd: 16})
	p := runPushes(t, f, nil)
	if f.Samples == 0 {
		t.Fatal("no delay samples reached the RUE")
	}
	rtt, rto := f.Smoothed()
	if rtt < 19*time.Microsecond || rtt > 40*time.Microsecond {
		t.Errorf("smoothed fabric delay %v, want ≈ 20 µs", rtt)
	}
	if rto != 250*time.Microsecond || p.CA.RTO() != rto {
		t.Errorf("RTO %v (datapath %v), want the 250 µs floor", rto, p.CA.RTO())
	}
	if p.CA.Fcwnd() != 16*rue.One {
		t.Errorf("fcwnd %v, want 16", p.CA.Fcwnd())
	}
}

// Fixed takes its delay samples by the rule Swift does: an ACK with no
// fabric delay (two ports of one daemon) is a sample, smoothed as one
// unit so that the RTO still follows it; a negative delay is none.
func TestFixedZeroDelayIsASample(t *testing.T) {
	f := NewFixed(FixedConfig{})
	ev := rue.Event{Type: rue.EventACK, T1: 100, T2: 100, T3: 103, T4: 103} // the ACK held 3 units, no fabric delay
	r, _ := f.Handle(&ev)
	if f.Samples != 1 || r.RTTState != 1 {
		t.Fatalf("zero delay: samples %d, smoothed delay %d; want a sample of one unit", f.Samples, r.RTTState)
	}
	ev.T1 = 110 // sent after it was acknowledged
	if f.Handle(&ev); f.Samples != 1 {
		t.Errorf("a negative round trip was taken as a sample (%d samples)", f.Samples)
	}
}

// An asynchronous RUE answers later; the datapath keeps one event
// outstanding and applies responses when they come.
func TestAsyncRUE(t *testing.T) {
	a := &Async{Engine: NewFixed(FixedConfig{Fcwnd: 8 * rue.One}), Limit: 4}
	applied := 0
	p := runPushes(t, a, func(p *sim.Pair) {
		applied += a.Drain(p.A.ApplyRUE)
	})
	if applied == 0 {
		t.Fatal("no asynchronous responses applied")
	}
	if p.CA.Fcwnd() != 8*rue.One {
		t.Errorf("fcwnd %v, want 8 from the async RUE", p.CA.Fcwnd())
	}
	if p.CA.Stats.RUESuppressed.Load() == 0 {
		t.Error("no events folded while one was outstanding")
	}
}
