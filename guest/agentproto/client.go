package agentproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Client is the host's side of a session.
type Client struct {
	rw       io.ReadWriter
	rd       *Reader
	w        *Writer
	Counters *Counters
	// StaleLimit bounds how many frames Hello discards while looking for
	// its Ready.
	StaleLimit int
}

// ErrNoReady means the agent never answered Hello with a matching Ready.
var ErrNoReady = errors.New("agentproto: no Ready from the agent")

// NewClient returns a client over rw. It resynchronises on garbage, since
// a virtio-serial port may hold the tail of an earlier session.
func NewClient(rw io.ReadWriter) *Client {
	c := &Client{rw: rw, Counters: new(Counters), StaleLimit: 10000}
	c.rd = NewReader(rw, c.Counters)
	c.rd.Resync = true
	c.w = NewWriter(rw, c.Counters)
	return c
}

// Hello opens a session and returns the agent's Ready. Frames before the
// Ready that echoes nonce are discarded.
func (c *Client) Hello(nonce uint64) (Ready, error) {
	if err := c.w.Send(TypeHello, AppendHello(nil, Hello{Version: Version, Nonce: nonce})); err != nil {
		return Ready{}, err
	}
	for i := 0; i < c.StaleLimit; i++ {
		t, p, err := c.rd.Next()
		if err != nil {
			return Ready{}, fmt.Errorf("%w: %v", ErrNoReady, err)
		}
		if t != TypeReady {
			continue
		}
		r, err := ParseReady(p)
		if err != nil {
			c.Counters.BadPayload.Inc()
			continue
		}
		if r.Nonce != nonce {
			continue
		}
		if r.Version != Version {
			return r, fmt.Errorf("agentproto: agent speaks version %d, want %d", r.Version, Version)
		}
		return r, nil
	}
	return Ready{}, fmt.Errorf("%w after %d stale frames", ErrNoReady, c.StaleLimit)
}

// deadliner is what net.Conn offers to unblock a read.
type deadliner interface{ SetReadDeadline(time.Time) error }

// KillGrace is how long Run waits for Exit after sending Kill before it
// gives up on the stream (when the stream supports read deadlines).
var KillGrace = 5 * time.Second

// Run runs e, copying its output to stdout and stderr, and returns its
// Exit. With a non-nil stdin, its bytes are sent as the command's standard
// input, then end of file. When ctx ends first, the command is killed.
func (c *Client) Run(ctx context.Context, e Exec, stdin io.Reader, stdout, stderr io.Writer) (Exit, error) {
	if stdin != nil {
		e.Flags |= ExecStdin
	}
	if err := c.w.Send(TypeExec, AppendExec(nil, e)); err != nil {
		return Exit{}, err
	}
	finished := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(finished); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			c.w.Send(TypeKill, nil)
			if d, ok := c.rw.(deadliner); ok {
				d.SetReadDeadline(time.Now().Add(KillGrace))
			}
		case <-finished:
		}
	}()
	if stdin != nil {
		go func() {
			io.Copy(streamWriter{c.w, TypeStdin}, stdin)
			c.w.Send(TypeStdinEOF, nil)
		}()
	}
	for {
		t, p, err := c.rd.Next()
		if err != nil {
			if ctx.Err() != nil {
				return Exit{}, fmt.Errorf("agentproto: %w (agent did not confirm the kill: %v)", ctx.Err(), err)
			}
			return Exit{}, err
		}
		switch t {
		case TypeStdout:
			if _, err := stdout.Write(p); err != nil {
				return Exit{}, err
			}
		case TypeStderr:
			if _, err := stderr.Write(p); err != nil {
				return Exit{}, err
			}
		case TypeExit:
			x, err := ParseExit(p)
			if err != nil {
				c.Counters.BadPayload.Inc()
				return Exit{}, err
			}
			if d, ok := c.rw.(deadliner); ok && ctx.Err() != nil {
				d.SetReadDeadline(time.Time{})
			}
			return x, nil
		default:
			c.Counters.WrongSide.Inc()
		}
	}
}
