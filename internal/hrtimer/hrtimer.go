// Package hrtimer is a one-shot timer that wakes its goroutine at its
// deadline to within the host's scheduling, where a Go timer may not.
//
// When every goroutine of a process is blocked and the process has
// network sockets, the Go runtime sleeps in its network poller, and that
// wait is in whole milliseconds (runtime/netpoll_epoll.go rounds any
// delay under 1 ms up to 1 ms). A daemon that is idle between two
// packets therefore wakes for a 20 µs or 400 µs timer about a millisecond
// later than asked: an ACK coalesced for 10 µs leaves a millisecond late.
// A Linux timerfd registered with the same poller ends that wait when it
// expires, whatever timeout the runtime chose.
//
// A Timer is owned by one goroutine: Reset, Stop and Close are not safe
// for concurrent use. Its channel may deliver a stale expiry (one read
// from the timerfd just before a Reset): a receiver checks its own
// deadline, as it must for any timer it re-arms.
package hrtimer

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Timer is a timerfd and the goroutine that turns its expiries into
// channel sends.
type Timer struct {
	// C receives one value per expiry (coalesced while unread).
	C  <-chan struct{}
	c  chan struct{}
	fd int
	f  *os.File
}

// New returns a stopped timer.
func New() (*Timer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// A non-blocking descriptor makes the File pollable: a Read parks the
	// goroutine in the runtime's poller, which the expiry wakes.
	f := os.NewFile(uintptr(fd), "timerfd")
	if f == nil {
		unix.Close(fd)
		return nil, errors.New("hrtimer: timerfd not usable")
	}
	c := make(chan struct{}, 1)
	t := &Timer{C: c, c: c, fd: fd, f: f}
	go t.read()
	return t, nil
}

// read forwards expiries until the timer is closed.
func (t *Timer) read() {
	var b [8]byte // the expiry count
	for {
		if _, err := t.f.Read(b[:]); err != nil {
			return
		}
		select {
		case t.c <- struct{}{}:
		default:
		}
	}
}

// Reset arms the timer d from now (at once for d ≤ 0), replacing any
// earlier arming and dropping an expiry not yet received.
func (t *Timer) Reset(d time.Duration) {
	if d <= 0 {
		d = 1 // an it_value of 0 would disarm
	}
	t.set(unix.NsecToTimespec(int64(d)))
}

// Stop disarms the timer and drops an expiry not yet received.
func (t *Timer) Stop() { t.set(unix.Timespec{}) }

func (t *Timer) set(v unix.Timespec) {
	// Drop first, then arm: an expiry of the new arming can come at once.
	select {
	case <-t.c:
	default:
	}
	spec := unix.ItimerSpec{Value: v}
	// The only failures are a bad descriptor (closed) or bad values,
	// neither possible here.
	unix.TimerfdSettime(t.fd, 0, &spec, nil)
}

// Close stops the timer and ends its goroutine.
func (t *Timer) Close() error { return t.f.Close() }
