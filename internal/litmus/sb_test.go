package litmus

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"falconnic/internal/clock"
)

// playBoth plays test t on p with the guest's rounds, each side on its own
// OS thread; guestPlain stores the guest's words without a barrier, and
// the host pauses up to hostSpread spins between rounds.
func playBoth(t testing.TB, p *Page, test Test, rounds uint64, guestPlain bool, hostSpread uint64) [2]Result {
	deadline := clock.Real.Now() + 5*time.Minute // a hang guard, not a timing assertion
	var wg sync.WaitGroup
	var res [2]Result
	var errs [2]error
	for _, s := range []Side{Guest, Host} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			o := Options{Clock: clock.Real, Deadline: deadline, Spread: hostSpread}
			if s == Guest {
				o.Rounds, o.Plain, o.Spread = rounds, guestPlain, 0
			}
			res[s], errs[s] = test.Play(p, s, o)
		}()
	}
	wg.Wait()
	for _, s := range []Side{Guest, Host} {
		if errs[s] != nil {
			t.Fatalf("%s: %v", s, errs[s])
		}
	}
	return res
}

// On real hardware XCHG is a store→load barrier: in no round do both
// sides load the other's old value.
func TestStoreBufferingNeverBothOldOnRealHardware(t *testing.T) {
	rounds := uint64(100_000)
	if testing.Short() {
		rounds = 10_000
	}
	p := newPage(t, rounds)
	res := playBoth(t, p, StoreBuffering, rounds, false, 0)
	if res[Host].Violations != 0 {
		t.Errorf("%d of %d rounds with both sides loading an old value", res[Host].Violations, rounds)
	}
	if res[Guest].Rounds != rounds || res[Host].Rounds != rounds {
		t.Errorf("rounds: guest %d, host %d; want %d each", res[Guest].Rounds, res[Host].Rounds, rounds)
	}
	if p.Result(Guest) != res[Guest] || p.Result(Host) != res[Host] {
		t.Errorf("published %+v %+v, returned %+v", p.Result(Guest), p.Result(Host), res)
	}
	t.Logf("guest %+v, host %+v", res[Guest], res[Host])
}

// The host counts a round in which it loaded an old value and the guest
// acknowledged having done the same.
func TestStoreBufferingHostCountsBothOld(t *testing.T) {
	p := newPage(t, 1)
	p.store(offAck, 2*1+1) // the guest's round 1: it loaded an old x[Host]
	c := &stepClock{step: time.Millisecond}
	res, err := PlaySB(p, Host, Options{Clock: c, Deadline: time.Millisecond})
	if !errors.Is(err, ErrTimeout) { // waiting for round 2, which never comes
		t.Fatalf("PlaySB: %v, want ErrTimeout", err)
	}
	if res != (Result{Rounds: 1, Violations: 1, Old: 1}) {
		t.Fatalf("host %+v; want 1 round, 1 old load, 1 violation", res)
	}
	if p.load(offGo) != 2 || p.load(offX+64*int(Host)) != 2 {
		t.Fatalf("go %d, x[host] %d; want round 2 started", p.load(offGo), p.load(offX+64*int(Host)))
	}
}

func TestStoreBufferingGuestAcknowledgesWhatItLoaded(t *testing.T) {
	p := newPage(t, 1)
	p.store(offGo, 1)
	c := &stepClock{step: time.Millisecond}
	res, err := PlaySB(p, Guest, Options{Rounds: 2, Clock: c, Deadline: time.Millisecond})
	if !errors.Is(err, ErrTimeout) || res != (Result{Rounds: 1, Old: 1}) {
		t.Fatalf("PlaySB = %+v, %v; want 1 round with an old load, then ErrTimeout", res, err)
	}
	if p.load(offAck) != 2*1+1 || p.load(offX+64*int(Guest)) != 1 {
		t.Fatalf("ack %d, x[guest] %d; want 3 and 1", p.load(offAck), p.load(offX+64*int(Guest)))
	}
	if p.Done(Guest) {
		t.Fatal("a timed-out guest published its result")
	}
}

func TestTests(t *testing.T) {
	for _, test := range []Test{Peterson, StoreBuffering} {
		got, err := ParseTest(test.String())
		if err != nil || got != test {
			t.Errorf("ParseTest(%q) = %v, %v", test.String(), got, err)
		}
	}
	if _, err := ParseTest("dekker"); err == nil {
		t.Error("ParseTest accepted an unknown test")
	}
	if _, err := Test(9).Play(newPage(t, 1), Guest, Options{Clock: never, Deadline: 1}); err == nil {
		t.Error("an unknown test played")
	}
}

func TestRunHostRefusesAnotherTest(t *testing.T) {
	ram := ramFile(t, 2<<20)
	g, unmap, err := MapFile(ram, PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	g.Init(testMagic, 1, StoreBuffering)
	if _, err := RunHost(ram, 2<<20, testMagic, Peterson, Options{Clock: never, Deadline: 1}); err == nil {
		t.Fatal("RunHost played Peterson on a page set up for sb")
	}
	if g.State() != StateReady {
		t.Fatalf("state %d: RunHost attached to a page it refused", g.State())
	}
}
