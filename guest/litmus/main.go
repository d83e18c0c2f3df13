// Command litmus is the guest side of the store→load ordering litmus
// (internal/litmus): it maps and locks one page, writes the header with the
// magic from its command line, says "litmus: ready" on standard output,
// waits for the host to attach, plays Peterson's lock against it for
// -rounds rounds, waits for the host to collect the results and prints
//
//	litmus: guest rounds=N violations=V host rounds=N violations=V counter=C lost=L
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
	rounds := flag.Uint64("rounds", 100_000, "rounds of the lock to play")
	timeout := flag.Duration("timeout", 60*time.Second, "deadline of each phase: the host attaching, the rounds, the host collecting")
	flag.Parse()
	magic, err := strconv.ParseUint(*magicS, 16, 64)
	if err != nil || magic == 0 || *rounds == 0 || *timeout <= 0 {
		fmt.Fprintln(os.Stderr, "usage: litmus -magic HEX16 (non-zero) [-rounds N (>0)] [-timeout D]")
		os.Exit(2)
	}
	if err := run(magic, *rounds, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "litmus:", err)
		os.Exit(1)
	}
}

func run(magic, rounds uint64, timeout time.Duration) error {
	runtime.LockOSThread()
	p, unmap, err := litmus.MapAnon()
	if err != nil {
		return err
	}
	p.Init(magic, rounds)
	fmt.Println("litmus: ready")
	if err := waitState(p, litmus.StateAttached, timeout); err != nil {
		return fmt.Errorf("the host did not attach: %w", err)
	}
	g, err := litmus.Play(p, litmus.Guest, litmus.Options{Rounds: rounds, Clock: clock.Real, Deadline: clock.Real.Now() + timeout})
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
	fmt.Printf("litmus: guest rounds=%d violations=%d host rounds=%d violations=%d counter=%d lost=%d\n",
		g.Rounds, g.Violations, h.Rounds, h.Violations, counter, int64(g.Rounds+h.Rounds-counter))
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
