package vhostuser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Server serves one Device on one unix socket, one session at a time. In
// listen mode QEMU connects (chardev reconnect=N); in dial mode we connect
// to QEMU's server socket and redial after a disconnect. The Device and the
// Counters outlive sessions.
type Server struct {
	Path   string
	Dial   bool
	Device Device
	// RedialInterval is the pause between dial attempts (default 200 ms).
	RedialInterval time.Duration
	// Trace, if set, receives one line per front-end message (tests, debugging).
	Trace func(string)
	// Log, if set, receives warnings: every act of the ring watchdog, with
	// the ring's state before and after (a lost notification to explain).
	Log *slog.Logger
	// WatchdogObserve makes the ring watchdog count and log what it finds
	// without acting (diagnosis: the stall it would have cured stays for a
	// stall report to show).
	WatchdogObserve bool

	Counters Counters

	mu   sync.Mutex
	cur  *Session
	conn *net.UnixConn
}

// Status returns the current session's snapshot ("idle" without one).
func (s *Server) Status() SessionStatus {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return SessionStatus{State: "idle"}
	}
	return cur.Status()
}

// Disconnect drops the current session (tests; operators).
func (s *Server) Disconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
	}
}

// Serve listens (or dials) until ctx is done, running sessions one after
// another. It returns nil when ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	if s.Dial {
		return s.serveDial(ctx)
	}
	return s.serveListen(ctx)
}

func (s *Server) serveListen(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return err
	}
	if fi, err := os.Lstat(s.Path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		// Remove a stale socket, but never one somebody still serves.
		if c, err := net.Dial("unix", s.Path); err == nil {
			c.Close()
			return fmt.Errorf("vhostuser: %s is in use by another back-end", s.Path)
		}
		os.Remove(s.Path)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.Path, Net: "unix"})
	if err != nil {
		return err
	}
	l.SetUnlinkOnClose(true)
	stop := context.AfterFunc(ctx, func() { l.Close(); s.Disconnect() })
	defer stop()
	defer l.Close()
	// One connection may wait while a session winds down (a QEMU
	// reconnect right after a drop); more are refused.
	conns := make(chan *net.UnixConn, 1)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				acceptErr <- err
				return
			}
			select {
			case conns <- c:
			default:
				// A session runs and one is waiting: one front-end per socket.
				s.Counters.ExtraConnections.Inc()
				c.Close()
			}
		}
	}()
	for {
		select {
		case c := <-conns:
			s.ServeConn(c)
		case err := <-acceptErr:
			select {
			case c := <-conns:
				c.Close()
			default:
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

func (s *Server) serveDial(ctx context.Context) error {
	iv := s.RedialInterval
	if iv <= 0 {
		iv = 200 * time.Millisecond
	}
	stop := context.AfterFunc(ctx, s.Disconnect)
	defer stop()
	for ctx.Err() == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", s.Path)
		if err != nil {
			t := time.NewTimer(iv)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			continue
		}
		s.ServeConn(c.(*net.UnixConn))
	}
	return nil
}

// ServeConn runs one session on an established connection until it ends.
// Bad input that breaks the stream ends the session (counted); the device
// and other sockets are untouched.
func (s *Server) ServeConn(c *net.UnixConn) error {
	sess := newSession(s.Device, &s.Counters, NewConn(c))
	sess.trace, sess.log, sess.watchObserve = s.Trace, s.Log, s.WatchdogObserve
	s.mu.Lock()
	s.cur, s.conn = sess, c
	s.mu.Unlock()
	s.Counters.Sessions.Inc()
	err := sess.Run()
	c.Close()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.Counters.SessionResets.Inc()
	}
	s.mu.Lock()
	s.conn = nil
	s.mu.Unlock()
	return err
}
