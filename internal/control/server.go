package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// ErrInUse means another server is answering on the socket path.
var ErrInUse = errors.New("control: socket in use by a running server")

// HandlerFunc answers one method. params is the request's raw params (nil
// when absent). Wrap ErrBadParams to blame the caller.
type HandlerFunc func(ctx context.Context, params json.RawMessage) (any, error)

// Server answers requests on a unix socket.
type Server struct {
	log      *slog.Logger
	mu       sync.RWMutex
	handlers map[string]HandlerFunc
}

// NewServer returns a server that knows only "methods".
func NewServer(log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{log: log, handlers: map[string]HandlerFunc{}}
	s.Handle("methods", func(context.Context, json.RawMessage) (any, error) { return s.Methods(), nil })
	return s
}

// Handle registers h for method, replacing an earlier handler.
func (s *Server) Handle(method string, h HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[method] = h
}

// Methods returns the registered method names, sorted.
func (s *Server) Methods() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.handlers))
	for n := range s.handlers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Listen creates the unix socket at path (mode 0600, parent directory
// created if missing). A stale socket file left by a dead server is
// replaced; a live one yields ErrInUse; any other file is left alone and is
// an error. Closing the listener removes the socket file.
func Listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("control: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%w: %s", ErrInUse, path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("control: removing stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	return ln, nil
}

// Serve answers connections on ln until ctx is done, then closes ln and
// every connection and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("control: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c)
		}()
	}
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 64<<10), MaxMessage)
	w := bufio.NewWriter(c)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		resp := s.call(ctx, line)
		b, err := json.Marshal(resp)
		if err != nil {
			b, _ = json.Marshal(Response{ID: resp.ID, Error: &Error{Code: CodeFailed, Message: "encoding result: " + err.Error()}})
		}
		w.Write(b)
		w.WriteByte('\n')
		if err := w.Flush(); err != nil {
			return
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		s.log.Warn("control connection", "err", err)
	}
}

// call decodes and answers one request line.
func (s *Server) call(ctx context.Context, line []byte) Response {
	req, err := DecodeRequest(line)
	if err != nil {
		return Response{Error: &Error{Code: CodeBadRequest, Message: err.Error()}}
	}
	s.mu.RLock()
	h := s.handlers[req.Method]
	s.mu.RUnlock()
	if h == nil {
		return Response{ID: req.ID, Error: &Error{Code: CodeUnknownMethod, Message: fmt.Sprintf("unknown method %q", req.Method)}}
	}
	result, err := h(ctx, req.Params)
	if err != nil {
		code := CodeFailed
		if errors.Is(err, ErrBadParams) {
			code = CodeBadParams
		}
		return Response{ID: req.ID, Error: &Error{Code: code, Message: err.Error()}}
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return Response{ID: req.ID, Error: &Error{Code: CodeFailed, Message: "encoding result: " + err.Error()}}
	}
	return Response{ID: req.ID, Result: raw}
}
