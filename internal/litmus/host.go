package litmus

import (
	"fmt"
	"os"
	"runtime"
)

// Report is the host's view of a finished run.
type Report struct {
	Offset  int64  // the page's offset in the RAM file
	Guest   Result // as the guest published it (untrusted)
	Host    Result
	Counter uint64 // the shared counter at the end
}

// Lost is how many increments of the shared counter overlapping critical
// sections lost: both sides' rounds minus the counter (negative only if the
// guest lies).
func (r Report) Lost() int64 { return int64(r.Guest.Rounds + r.Host.Rounds - r.Counter) }

// Violations is both sides' violations.
func (r Report) Violations() uint64 { return r.Guest.Violations + r.Host.Violations }

// RunHost plays the host's side of test t against the guest page with magic in ram
// (size bytes of guest RAM): it finds the page, maps it, marks it attached,
// plays on its own OS thread until the guest is done or the deadline
// passes (o's Rounds are ignored), reads the results and marks the page collected before unmapping
// it. It does not touch the page after that.
func RunHost(ram *os.File, size int64, magic uint64, t Test, o Options) (Report, error) {
	var rep Report
	off, err := Scan(ram, size, magic)
	if err != nil {
		return rep, err
	}
	rep.Offset = off
	p, unmap, err := MapFile(ram, off)
	if err != nil {
		return rep, err
	}
	defer unmap()
	if s := p.State(); s != StateReady {
		return rep, fmt.Errorf("litmus: the guest page at %#x is in state %d, not ready", off, s)
	}
	if g := p.Test(); g != t {
		return rep, fmt.Errorf("litmus: the guest set its page up for %v, not %v", g, t)
	}
	p.Attach()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var err error
		o.Rounds, o.Plain = 0, false
		rep.Host, err = t.Play(p, Host, o)
		done <- err
	}()
	err = <-done
	rep.Guest, rep.Counter = p.Result(Guest), p.Counter()
	if err == nil && !p.Done(Guest) {
		err = fmt.Errorf("litmus: the host stopped but the guest has not published its result")
	}
	p.Collect()
	return rep, err
}
