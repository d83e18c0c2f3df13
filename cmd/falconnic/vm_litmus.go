package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"falconnic/internal/clock"
	"falconnic/internal/litmus"
	"falconnic/qemu"
)

// litmusReady is what guest/litmus prints once its page is in place.
const litmusReady = "litmus: ready"

// vmLitmus boots a guest, runs guest/litmus in it and plays the host's side
// of a store→load ordering litmus (internal/litmus: Peterson's lock or the
// store-buffering test) against it through the guest's RAM file, then
// prints both sides' figures on one line.
func vmLitmus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newVMFlags("litmus", stderr)
	name := f.fs.String("name", fmt.Sprintf("litmus%d", os.Getpid()), "VM name")
	maxcpus := f.fs.Int("maxcpus", 0, "the guest's -smp maxcpus (0: the default, max(1, 2)); 1 is QEMU 7.2's TCG without the guest's barriers")
	testS := f.fs.String("test", "peterson", "peterson (Peterson's lock) or sb (the store-buffering litmus, round by round)")
	rounds := f.fs.Uint64("rounds", 200_000, "rounds the guest plays")
	timeout := f.fs.Duration("timeout", 2*time.Minute, "deadline of the rounds (and of the guest's wait for the host)")
	mem := f.fs.String("mem", "1G", "guest memory")
	spread := f.fs.Uint64("spread", 0, "the host's delay range, in loads of one of its words: sb's jitter around its adaptive delay before its store (0: "+strconv.Itoa(litmus.DefaultSpread)+"); peterson's wait between rounds (0: none)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *maxcpus < 0 || *rounds == 0 || *timeout < 10*time.Second {
		return fmt.Errorf("%w: vm litmus needs --maxcpus ≥ 0, --rounds > 0, --timeout ≥ 10s", errUsage)
	}
	test, err := litmus.ParseTest(*testS)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	memMiB, err := parseMem(*mem)
	if err != nil {
		return err
	}
	im, err := qemu.LoadImage(*f.cache)
	if err != nil {
		return err
	}
	vm, err := qemu.Start(*f.state, qemu.Machine{Name: *name, Kernel: im.KernelPath(), Initrd: im.InitrdPath(), MemMiB: memMiB, MaxCPUs: *maxcpus})
	if err != nil {
		return err
	}
	defer vm.Stop()
	fmt.Fprintf(stderr, "vm %s: booting (console: %s)\n", *name, vm.ConsoleLog())
	if err := vm.WaitReady(ctx, 5*time.Minute); err != nil {
		return err
	}
	pid, ok := vm.Pid()
	if !ok {
		return fmt.Errorf("vm %s: QEMU is not running", *name)
	}
	ram, err := qemu.OpenRAM(pid, int64(memMiB)<<20)
	if err != nil {
		return err
	}
	defer ram.Close()

	var mb [8]byte
	rand.Read(mb[:])
	magic := binary.LittleEndian.Uint64(mb[:]) | 1 // never 0
	out := &lineWatch{want: []byte(litmusReady), ready: make(chan struct{}), echo: stderr}
	guestDone := make(chan error, 1)
	argv := []string{"litmus", "-magic", fmt.Sprintf("%016x", magic), "-test", test.String(), "-rounds", strconv.FormatUint(*rounds, 10), "-timeout", timeout.String()}
	go func() {
		guestDone <- execSpecIn(ctx, vm, argv, execSpec{limit: 3**timeout + time.Minute}, out, stderr)
	}()
	select {
	case <-out.ready:
	case err := <-guestDone:
		return fmt.Errorf("vm %s: litmus ended before its page was ready: %v", *name, err)
	case <-time.After(*timeout):
		return fmt.Errorf("vm %s: litmus not ready after %v", *name, *timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	// The host's deadline comes before the guest's, which starts only
	// once the host has attached: the host leaves the page first.
	start := time.Now()
	rep, herr := litmus.RunHost(ram, int64(memMiB)<<20, magic, test,
		litmus.Options{Clock: clock.Real, Deadline: clock.Real.Now() + *timeout - 5*time.Second, Spread: *spread})
	secs := time.Since(start).Seconds()
	gerr := <-guestDone
	if herr != nil {
		return fmt.Errorf("vm %s: host side: %w (guest: %v)", *name, herr, gerr)
	}
	if gerr != nil {
		return fmt.Errorf("vm %s: guest side: %w", *name, gerr)
	}
	mc := *maxcpus
	if mc == 0 {
		mc = 2
	}
	switch test {
	case litmus.Peterson:
		fmt.Fprintf(stdout, "litmus test=peterson maxcpus=%d spread=%d guest_rounds=%d guest_violations=%d host_rounds=%d host_violations=%d counter=%d lost=%d seconds=%.1f\n",
			mc, *spread, rep.Guest.Rounds, rep.Guest.Violations, rep.Host.Rounds, rep.Host.Violations, rep.Counter, rep.Lost(), secs)
	case litmus.StoreBuffering:
		if *spread == 0 {
			*spread = litmus.DefaultSpread
		}
		fmt.Fprintf(stdout, "litmus test=sb maxcpus=%d spread=%d rounds=%d guest_old=%d host_old=%d both_old=%d seconds=%.1f\n",
			mc, *spread, rep.Guest.Rounds, rep.Guest.Old, rep.Host.Old, rep.Host.Violations, secs)
	}
	return nil
}

// lineWatch passes a guest command's output on to echo and closes ready
// when a line starting with want has arrived.
type lineWatch struct {
	want  []byte
	ready chan struct{}
	echo  io.Writer

	mu   sync.Mutex
	line []byte
	seen bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range p {
		if c != '\n' {
			if len(w.line) < 256 {
				w.line = append(w.line, c)
			}
			continue
		}
		if !w.seen && bytes.HasPrefix(w.line, w.want) {
			w.seen = true
			close(w.ready)
		}
		w.line = w.line[:0]
	}
	if _, err := w.echo.Write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}
