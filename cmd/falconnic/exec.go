package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"falconnic/guest/agentproto"
	"falconnic/qemu"
)

// Exec deadlines: no command of ours waits for a guest without one. A
// command that overruns its limit is a stall: the host and guest state is
// dumped (stallReport) and the exec fails.
const (
	// defaultExecLimit bounds a command whose run time we cannot read
	// from its arguments (setup commands, perftest programs, a shell).
	defaultExecLimit = 10 * time.Minute
	// execMargin is added to the run time a command announces (fio's
	// --runtime and --ramp_time): its start, its exit and a slow host.
	execMargin = 60 * time.Second
)

// errStall is the cause of an exec that overran its limit.
var errStall = errors.New("no answer within the exec's deadline")

// execSpec is one guest command and what to do if it stalls.
type execSpec struct {
	via   string
	stdin io.Reader
	// limit is the deadline; 0 derives it from argv (execLimit).
	limit time.Duration
	// diag adds the caller's own view to a stall report (e.g. the
	// in-process daemon's rings and counters); nil: none.
	diag func() string
	// report receives the stall report (nil: the caller's stderr).
	report io.Writer
}

// execLimit derives a command's deadline from what it runs: fio's run and
// ramp time plus a margin when it gives them, defaultExecLimit otherwise.
func execLimit(argv []string) time.Duration {
	if len(argv) == 0 || argv[0] != "fio" {
		return defaultExecLimit
	}
	run, ramp, timeBased := fioTimes(argv)
	if !timeBased || run <= 0 {
		// fio ends when its size is done; --runtime is only a cap.
		return max(defaultExecLimit, run+ramp+execMargin)
	}
	return run + ramp + execMargin
}

// fioTimes reads fio's --runtime, --ramp_time and --time_based.
func fioTimes(argv []string) (run, ramp time.Duration, timeBased bool) {
	for _, a := range argv[1:] {
		k, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch k {
		case "runtime":
			run = fioDuration(v)
		case "ramp_time":
			ramp = fioDuration(v)
		case "time_based":
			timeBased = true
		}
	}
	return run, ramp, timeBased
}

// errGuestClock is the cause of a timed command that ended sooner, by the
// host's clock, than it ran by the guest's.
var errGuestClock = errors.New("the guest's clock runs fast")

// checkGuestClock compares a time-based fio run's length by the guest's
// clock (its run and ramp time) with wall, the host's time for the whole
// exec: a guest whose clock runs fast (a TSC miscalibrated at boot on a
// loaded TCG host: seen once at ≥ 1.9×) reports rates over too few
// seconds, so its figures would be inflated. Slack of 10 % covers the
// clocks' granularity; a slow guest clock cannot be told from a slow exec
// and passes.
func checkGuestClock(argv []string, wall time.Duration) error {
	if len(argv) == 0 || argv[0] != "fio" {
		return nil
	}
	run, ramp, timeBased := fioTimes(argv)
	guest := run + ramp
	if !timeBased || run <= 0 || wall >= guest*9/10 {
		return nil
	}
	return fmt.Errorf("%w: fio ran %v by the guest's clock in %v of the host's (%.2f×): its figures would be inflated",
		errGuestClock, guest, wall.Round(time.Millisecond), guest.Seconds()/wall.Seconds())
}

// fioDuration reads a fio time value: seconds by default, or with an
// s/m/h suffix (0 when unreadable).
func fioDuration(v string) time.Duration {
	unit := time.Second
	switch {
	case strings.HasSuffix(v, "ms"):
		unit, v = time.Millisecond, strings.TrimSuffix(v, "ms")
	case strings.HasSuffix(v, "s"):
		v = strings.TrimSuffix(v, "s")
	case strings.HasSuffix(v, "m"):
		unit, v = time.Minute, strings.TrimSuffix(v, "m")
	case strings.HasSuffix(v, "h"):
		unit, v = time.Hour, strings.TrimSuffix(v, "h")
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0
	}
	return time.Duration(n) * unit
}

// execIn runs argv in the guest through its agent, with the deadline
// execLimit derives from it.
func execIn(ctx context.Context, vm *qemu.VM, via string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return execSpecIn(ctx, vm, argv, execSpec{via: via, stdin: stdin}, stdout, stderr)
}

// execSpecIn runs argv in the guest. When the command overruns its
// deadline, it writes a stall report (the guest's and QEMU's view, and
// sp.diag's) before the command is killed, and fails with errStall.
func execSpecIn(ctx context.Context, vm *qemu.VM, argv []string, sp execSpec, stdout, stderr io.Writer) error {
	limit := sp.limit
	if limit <= 0 {
		limit = execLimit(argv)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	conn, err := vm.DialAgent(dctx, sp.via)
	cancel()
	if err != nil {
		return fmt.Errorf("vm %s: agent: %w", vm.Name, err)
	}
	defer conn.Close()
	c := agentproto.NewClient(conn)
	if err := hello(c, conn); err != nil {
		return fmt.Errorf("vm %s: agent: %w (is another vm exec still running on it?)", vm.Name, err)
	}
	xctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var reported sync.WaitGroup
	reported.Add(1)
	timer := time.AfterFunc(limit, func() {
		defer reported.Done()
		w := sp.report
		if w == nil {
			w = stderr
		}
		// The report has its own deadlines: the caller's context often
		// ends with this limit (a perftest program's), and a report read
		// through it would find every channel "timed out".
		fmt.Fprintf(w, "vm %s: `%s` gave no answer within %v: stall report follows\n%s",
			vm.Name, strings.Join(argv, " "), limit, stallReport(context.WithoutCancel(ctx), vm, sp.diag))
		stop(errStall)
	})
	t0 := time.Now()
	x, err := c.Run(xctx, agentproto.Exec{Argv: argv}, sp.stdin, stdout, stderr)
	wall := time.Since(t0)
	if timer.Stop() {
		reported.Done()
	} else {
		reported.Wait()
		return fmt.Errorf("vm %s: `%s`: %w (%v)", vm.Name, strings.Join(argv, " "), errStall, limit)
	}
	if err != nil {
		return fmt.Errorf("vm %s: %w", vm.Name, err)
	}
	if x.Code != 0 {
		msg := ""
		if x.Message != "" {
			msg = ": " + x.Message
		}
		return &guestExit{code: int(x.Code), err: fmt.Errorf("vm %s: %s exited with status %d%s", vm.Name, argv[0], x.Code, msg)}
	}
	if err := checkGuestClock(argv, wall); err != nil {
		return fmt.Errorf("vm %s: %w", vm.Name, err)
	}
	return nil
}

// guestDiagScript is what the stall report runs in the guest over the
// agent's diagnosis port: each virtio disk's requests in flight and I/O
// counters with its PCI path (sysfs: no request to the disk — reading its
// serial is a GET_ID request, which a stalled disk does not answer, and a
// task blocked on it outlives any timeout), blk-mq's view of each hardware
// queue (debugfs: stopped or not, requests held back or dispatched), the interrupt counts (twice, 2 s apart, to see whether any
// arrive), the tasks that wait (fio and the agent: state, wait channel,
// kernel stacks) and the kernel log's tail.
const guestDiagScript = `for d in /sys/block/vd*; do echo "$d $(readlink $d) inflight $(cat $d/inflight) stat $(cat $d/stat)"; done
echo "-- blk-mq state (debugfs: queue state, per hardware queue its state, requests dispatched and busy)"
grep -q debugfs /proc/mounts || mount -t debugfs none /sys/kernel/debug 2>/dev/null
for d in /sys/kernel/debug/block/vd*; do
  echo "$d state $(cat $d/state 2>/dev/null)"
  for h in $d/hctx*; do
    echo $h state $(cat $h/state 2>/dev/null) "|" dispatch $(head -n 5 $h/dispatch 2>/dev/null) "|" busy $(head -n 5 $h/busy 2>/dev/null)
  done
done
echo "-- interrupts"; cat /proc/interrupts
sleep 2
echo "-- interrupts 2 s later"; cat /proc/interrupts
echo "-- tasks (pid comm state wchan; kernel stacks of fio and of tasks in D)"
for t in /proc/[0-9]*/task/[0-9]*; do
  read -r pid comm state rest < $t/stat
  [ "$state" = I ] && continue
  w=$(cat $t/wchan)
  echo "$t $comm $state $w"
  case "$comm$state" in
  "(fio)"*|*D) cat $t/stack;;
  esac
done
echo "-- dmesg"; dmesg | tail -n 30
`

// stallReport gathers what a stalled exec needs to be understood: the
// guest's view over the diagnosis port (a second channel the stalled
// command does not hold), QEMU's threads, eventfds and virtio queues, and
// the caller's own diagnosis. Each part has its own deadline.
func stallReport(ctx context.Context, vm *qemu.VM, diag func() string) string {
	var s strings.Builder
	s.WriteString("== guest (diagnosis port)\n")
	s.WriteString(guestDiag(ctx, vm))
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s.WriteString(vm.Diagnose(qctx))
	cancel()
	if diag != nil {
		s.WriteString("== daemon\n")
		s.WriteString(diag())
		s.WriteString("\n")
	}
	return s.String()
}

// guestDiag runs guestDiagScript over the agent's diagnosis port, within
// 30 s.
func guestDiag(ctx context.Context, vm *qemu.VM) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", vm.DiagSock())
	if err != nil {
		return fmt.Sprintf("diagnosis port: %v\n", err)
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	c := agentproto.NewClient(conn)
	if _, err := c.Hello(uint64(time.Now().UnixNano())); err != nil {
		return fmt.Sprintf("diagnosis port: %v (the guest does not answer on a second channel either)\n", err)
	}
	var out bytes.Buffer
	x, err := c.Run(ctx, agentproto.Exec{Argv: []string{"sh", "-c", guestDiagScript}}, nil, &out, &out)
	if err != nil {
		fmt.Fprintf(&out, "diagnosis script: %v\n", err)
	} else if x.Code != 0 {
		fmt.Fprintf(&out, "diagnosis script exited %d %s\n", x.Code, x.Message)
	}
	return out.String()
}
