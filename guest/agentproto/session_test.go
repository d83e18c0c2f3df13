package agentproto

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// pair starts a server on one end of a net.Pipe and returns a client with an
// open session on the other.
func pair(t *testing.T) (*Client, *Server) {
	t.Helper()
	a, b := net.Pipe()
	s := &Server{Hostname: "A", Env: []string{"PATH=/usr/bin:/bin"}}
	done := make(chan error, 1)
	go func() { done <- s.Serve(b) }()
	t.Cleanup(func() {
		a.Close()
		if err := <-done; err != nil && !strings.Contains(err.Error(), "closed pipe") {
			t.Errorf("Serve: %v", err)
		}
	})
	c := NewClient(a)
	r, err := c.Hello(42)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hostname != "A" || r.Nonce != 42 || r.Version != Version {
		t.Fatalf("Ready = %+v", r)
	}
	return c, s
}

func run(t *testing.T, c *Client, stdin string, argv ...string) (Exit, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	var in *strings.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	var x Exit
	var err error
	if in != nil {
		x, err = c.Run(context.Background(), Exec{Argv: argv}, in, &out, &errb)
	} else {
		x, err = c.Run(context.Background(), Exec{Argv: argv}, nil, &out, &errb)
	}
	if err != nil {
		t.Fatalf("Run %v: %v", argv, err)
	}
	return x, out.String(), errb.String()
}

func TestRunStreamsOutputAndExitCode(t *testing.T) {
	c, _ := pair(t)
	x, out, errs := run(t, c, "", "sh", "-c", "echo out; echo err >&2; exit 3")
	if x.Code != 3 || out != "out\n" || errs != "err\n" {
		t.Fatalf("got exit %+v stdout %q stderr %q", x, out, errs)
	}
	// The session carries several commands, one after the other.
	x, out, _ = run(t, c, "", "echo", "again")
	if x.Code != 0 || out != "again\n" {
		t.Fatalf("second command: exit %+v stdout %q", x, out)
	}
}

func TestRunPassesEnvAndDir(t *testing.T) {
	c, _ := pair(t)
	dir := t.TempDir()
	var out bytes.Buffer
	x, err := c.Run(context.Background(), Exec{Dir: dir, Argv: []string{"sh", "-c", "echo $FOO; pwd"}, Env: []string{"FOO=bar"}}, nil, &out, &out)
	if err != nil || x.Code != 0 {
		t.Fatalf("Run: %+v %v", x, err)
	}
	want := "bar\n" + dir + "\n"
	if got, _ := filepath.EvalSymlinks(dir); got != dir {
		want = "bar\n" + got + "\n"
	}
	if out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
}

func TestStdinReachesTheCommand(t *testing.T) {
	c, _ := pair(t)
	big := strings.Repeat("0123456789abcdef", 20000) // several Stdin chunks
	x, out, _ := run(t, c, big, "cat")
	if x.Code != 0 || out != big {
		t.Fatalf("cat: exit %+v, %d bytes back of %d", x, len(out), len(big))
	}
}

func TestMissingCommandIs127(t *testing.T) {
	c, _ := pair(t)
	x, _, _ := run(t, c, "", "/no/such/command")
	if x.Code != 127 || x.Message == "" {
		t.Fatalf("exit %+v, want 127 with a message", x)
	}
}

func TestCancelKillsTheCommand(t *testing.T) {
	c, _ := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	w := &notifyWriter{w: &out, first: make(chan struct{})}
	go func() { <-w.first; cancel() }()
	x, err := c.Run(ctx, Exec{Argv: []string{"sh", "-c", "echo started; exec sleep 1000"}}, nil, w, &out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if x.Code != 128+9 {
		t.Fatalf("exit %+v, want 137 (SIGKILL)", x)
	}
}

// notifyWriter closes first on its first write.
type notifyWriter struct {
	w     *bytes.Buffer
	first chan struct{}
	seen  bool
}

func (n *notifyWriter) Write(p []byte) (int, error) {
	if !n.seen {
		n.seen = true
		close(n.first)
	}
	return n.w.Write(p)
}

func TestHelloDiscardsStaleFrames(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		// An abandoned session's tail, garbage, a Ready for someone else,
		// then the real server.
		var stale []byte
		stale = AppendFrame(stale, TypeStdout, []byte("old output"))
		stale = append(stale, "junk"...)
		stale = AppendFrame(stale, TypeReady, AppendReady(nil, Ready{Version: Version, Nonce: 1, Hostname: "old"}))
		rd := NewReader(b, nil)
		if ty, _, err := rd.Next(); err != nil || ty != TypeHello {
			return
		}
		b.Write(stale)
		b.Write(AppendFrame(nil, TypeReady, AppendReady(nil, Ready{Version: Version, Nonce: 2, Hostname: "new"})))
		b.Close()
	}()
	c := NewClient(a)
	r, err := c.Hello(2)
	if err != nil || r.Hostname != "new" {
		t.Fatalf("Hello = %+v %v", r, err)
	}
	if c.Counters.ResyncBytes.Load() != 4 {
		t.Errorf("ResyncBytes = %d, want 4", c.Counters.ResyncBytes.Load())
	}
}

func TestServerIgnoresFramesBeforeHelloAndFromTheWrongSide(t *testing.T) {
	a, b := net.Pipe()
	s := &Server{Hostname: "A"}
	done := make(chan error, 1)
	go func() { done <- s.Serve(b) }()
	a.Write(AppendFrame(nil, TypeExec, AppendExec(nil, Exec{Argv: []string{"true"}})))
	a.Write(AppendFrame(nil, TypeStdout, []byte("not yours")))
	c := NewClient(a)
	if _, err := c.Hello(5); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if got := s.Counters.WrongSide.Load(); got != 2 {
		t.Fatalf("WrongSide = %d, want 2", got)
	}
}

func TestServeOverUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		(&Server{Hostname: "U"}).Serve(conn)
	}()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := NewClient(conn)
	if r, err := c.Hello(1); err != nil || r.Hostname != "U" {
		t.Fatalf("Hello = %+v %v", r, err)
	}
	x, out, _ := run(t, c, "", "echo", "unix")
	if x.Code != 0 || out != "unix\n" {
		t.Fatalf("exit %+v stdout %q", x, out)
	}
}

func TestCommandsMapsANameToAnotherProgram(t *testing.T) {
	c, s := pair(t)
	s.Commands = map[string]string{"shell-alias": "sh"}
	x, out, _ := run(t, c, "", "shell-alias", "-c", "echo mapped")
	if x.Code != 0 || out != "mapped\n" {
		t.Fatalf("exit %+v stdout %q", x, out)
	}
}
