package agentproto

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Server is the agent's side of a session: it runs the commands a client
// asks for, one at a time.
type Server struct {
	Hostname string
	// Env is the environment every command starts with; Exec.Env adds to it.
	Env []string
	// Resync makes the server skip garbage instead of ending the session,
	// for virtio-serial ports.
	Resync   bool
	Counters *Counters
	// Commands maps a command name to the program run in its place (in
	// u-root's busybox, "sh" is a link whose name is no command: the agent
	// maps it to "gosh").
	Commands map[string]string
	// WaitDelay bounds how long output is still collected after a command
	// exits while something it started keeps its stdout open.
	WaitDelay time.Duration
}

// session is the state of one Serve call.
type session struct {
	s     *Server
	w     *Writer
	hello bool
	mu    sync.Mutex
	run   *running // nil when no command runs
}

// running is a started command.
type running struct {
	cmd   *exec.Cmd
	stdin *os.File // write end, nil without ExecStdin
	feed  chan []byte
	done  chan struct{}
}

// Serve runs one session over rw until the stream ends. A running command
// is killed when it does. It returns nil at a clean end of stream.
func (s *Server) Serve(rw io.ReadWriter) error {
	if s.Counters == nil {
		s.Counters = new(Counters)
	}
	rd := NewReader(rw, s.Counters)
	rd.Resync = s.Resync
	ss := &session{s: s, w: NewWriter(rw, s.Counters)}
	defer ss.stop()
	for {
		t, p, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if !t.FromClient() {
			s.Counters.WrongSide.Inc()
			continue
		}
		if err := ss.handle(t, p); err != nil {
			return err
		}
	}
}

// handle acts on one client frame. Only write failures end the session.
func (ss *session) handle(t Type, p []byte) error {
	c := ss.s.Counters
	if t == TypeHello {
		h, err := ParseHello(p)
		if err != nil {
			c.BadPayload.Inc()
			return nil
		}
		ss.stop()
		ss.hello = true
		return ss.w.Send(TypeReady, AppendReady(nil, Ready{Version: Version, Nonce: h.Nonce, Hostname: ss.s.Hostname}))
	}
	if !ss.hello {
		c.WrongSide.Inc()
		return nil
	}
	switch t {
	case TypeExec:
		e, err := ParseExec(p)
		if err != nil {
			c.BadPayload.Inc()
			return ss.w.Send(TypeExit, AppendExit(nil, Exit{Code: 126, Message: err.Error()}))
		}
		return ss.start(e)
	case TypeStdin, TypeStdinEOF:
		ss.mu.Lock()
		r := ss.run
		ss.mu.Unlock()
		if r == nil || r.feed == nil {
			return nil
		}
		if t == TypeStdinEOF {
			close(r.feed)
			r.feed = nil
			return nil
		}
		select {
		case r.feed <- append([]byte(nil), p...):
		case <-r.done:
		}
	case TypeKill:
		ss.mu.Lock()
		if ss.run != nil {
			kill(ss.run.cmd)
		}
		ss.mu.Unlock()
	}
	return nil
}

// start runs e; a goroutine reports its Exit.
func (ss *session) start(e Exec) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.run != nil {
		ss.s.Counters.Busy.Inc()
		return ss.w.Send(TypeExit, AppendExit(nil, Exit{Code: 126, Message: "agent: a command is already running"}))
	}
	name := e.Argv[0]
	if alt, ok := ss.s.Commands[name]; ok {
		name = alt
	}
	cmd := exec.Command(name, e.Argv[1:]...)
	cmd.Dir = e.Dir
	cmd.Env = append(append([]string(nil), ss.s.Env...), e.Env...)
	cmd.Stdout = streamWriter{ss.w, TypeStdout}
	cmd.Stderr = streamWriter{ss.w, TypeStderr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = ss.s.WaitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = time.Second
	}
	r := &running{cmd: cmd, done: make(chan struct{})}
	var stdinR *os.File
	if e.Flags&ExecStdin != 0 {
		pr, pw, err := os.Pipe()
		if err != nil {
			return ss.w.Send(TypeExit, AppendExit(nil, Exit{Code: 126, Message: err.Error()}))
		}
		cmd.Stdin, stdinR, r.stdin = pr, pr, pw
		r.feed = make(chan []byte, 16)
	}
	err := cmd.Start()
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		if r.stdin != nil {
			r.stdin.Close()
		}
		code := int32(126)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return ss.w.Send(TypeExit, AppendExit(nil, Exit{Code: code, Message: err.Error()}))
	}
	ss.run = r
	if r.feed != nil {
		go feedStdin(r, r.feed)
	}
	go ss.wait(r)
	return nil
}

// feedStdin copies Stdin frames into the command's stdin until StdinEOF or
// the command ends.
func feedStdin(r *running, feed <-chan []byte) {
	defer r.stdin.Close()
	for {
		select {
		case b, ok := <-feed:
			if !ok {
				return
			}
			if _, err := r.stdin.Write(b); err != nil {
				return
			}
		case <-r.done:
			return
		}
	}
}

func (ss *session) wait(r *running) {
	err := r.cmd.Wait()
	x := exitOf(r.cmd, err)
	close(r.done)
	ss.mu.Lock()
	ss.run = nil
	ss.mu.Unlock()
	ss.w.Send(TypeExit, AppendExit(nil, x))
}

// exitOf maps a finished command to its Exit.
func exitOf(cmd *exec.Cmd, err error) Exit {
	st := cmd.ProcessState
	if st == nil {
		return Exit{Code: 126, Message: errString(err)}
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Code: 128 + int32(ws.Signal()), Message: ws.Signal().String()}
	}
	x := Exit{Code: int32(st.ExitCode())}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		x.Message = err.Error() // e.g. output still open after WaitDelay
	}
	return x
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// stop kills the running command, if any, and waits for it to end.
func (ss *session) stop() {
	ss.mu.Lock()
	r := ss.run
	if r != nil {
		kill(r.cmd)
	}
	ss.mu.Unlock()
	if r != nil {
		<-r.done
	}
}

func kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
