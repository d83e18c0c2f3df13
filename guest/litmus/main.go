// Command litmus is the guest side of the store→load ordering litmus
// (internal/litmus): it maps and locks one page, writes the header with the
// magic from its command line, says "litmus: ready" on standard output,
// waits for the host to attach, plays Peterson's lock against it for
// -rounds rounds (or the store-buffering test, -test sb), waits for the
// host to collect the results and prints
//
//	litmus: TEST guest rounds=N violations=V old=O host rounds=N violations=V old=O counter=C
//
// Every wait has a deadline; past one it exits with status 1 and says which.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"falconnic/internal/clock"
	"falconnic/internal/litmus"
)

func main() {
	magicS := flag.String("magic", "", "the page's magic, 16 hex digits (the host scans guest RAM for it)")
	testS := flag.String("test", "peterson", "the litmus: peterson (Peterson's lock) or sb (store buffering, round by round)")
	rounds := flag.Uint64("rounds", 100_000, "rounds to play")
	timeout := flag.Duration("timeout", 60*time.Second, "deadline of each phase: the host attaching, the rounds, the host collecting")
	flag.Parse()
	magic, err := strconv.ParseUint(*magicS, 16, 64)
	test, terr := litmus.ParseTest(*testS)
	if err != nil || terr != nil || magic == 0 || *rounds == 0 || *timeout <= 0 {
		fmt.Fprintln(os.Stderr, "usage: litmus -magic HEX16 (non-zero) [-test peterson|sb] [-rounds N (>0)] [-timeout D]")
		os.Exit(2)
	}
	if err := run(magic, test, *rounds, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "litmus:", err)
		os.Exit(1)
	}
}

func run(magic uint64, test litmus.Test, rounds uint64, timeout time.Duration) error {
	runtime.LockOSThread()
	p, unmap, err := litmus.MapAnon()
	if err != nil {
		return err
	}
	p.Init(magic, rounds, test)
	fmt.Println("litmus: ready")
	if err := waitState(p, litmus.StateAttached, timeout); err != nil {
		return fmt.Errorf("the host did not attach: %w", err)
	}
	g, err := test.Play(p, litmus.Guest, litmus.Options{Rounds: rounds, Clock: clock.Real, Deadline: clock.Real.Now() + timeout})
	if err != nil {
		// The host stops before its own deadline, which is earlier: wait
		// for it to leave the page before freeing it.
		waitState(p, litmus.StateCollected, timeout)
		return err
	}
	if err := waitState(p, litmus.StateCollected, timeout); err != nil {
		// The page stays mapped: the host may still write to it.
		return fmt.Errorf("the host did not collect the results after %d rounds (%d violations): %w", g.Rounds, g.Violations, err)
	}
	h, counter := p.Result(litmus.Host), p.Counter()
	fmt.Printf("litmus: %v guest rounds=%d violations=%d old=%d host rounds=%d violations=%d old=%d counter=%d\n",
		test, g.Rounds, g.Violations, g.Old, h.Rounds, h.Violations, h.Old, counter)
	return unmap()
}

// waitState waits until the page's state is at least want.
func waitState(p *litmus.Page, want uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for p.State() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%v)", litmus.ErrTimeout, timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
