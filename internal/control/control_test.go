package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// startServer serves s on a socket in a temp dir until the test ends and
// checks that shutdown removes the socket.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ctl.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left behind after shutdown: %v", err)
		}
	})
	return path
}

func echoServer() *Server {
	s := NewServer(nil)
	s.Handle("echo", func(_ context.Context, p json.RawMessage) (any, error) {
		var in struct{ Text string }
		if err := json.Unmarshal(p, &in); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadParams, err)
		}
		return map[string]string{"text": in.Text}, nil
	})
	s.Handle("fail", func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("it broke") })
	return s
}

func TestCallReturnsResult(t *testing.T) {
	path := startServer(t, echoServer())
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 { // several calls on one connection
		var out struct{ Text string }
		want := strings.Repeat("x", i)
		if err := c.Call(context.Background(), "echo", map[string]string{"text": want}, &out); err != nil {
			t.Fatal(err)
		}
		if out.Text != want {
			t.Errorf("echo %q = %q", want, out.Text)
		}
	}
	var methods []string
	if err := Call(context.Background(), path, "methods", nil, &methods); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(methods, ","); got != "echo,fail,methods" {
		t.Errorf("methods = %s", got)
	}
}

func TestCallErrorsHaveCodes(t *testing.T) {
	path := startServer(t, echoServer())
	for _, c := range []struct {
		method string
		params any
		code   string
	}{
		{"nope", nil, CodeUnknownMethod},
		{"echo", 42, CodeBadParams},
		{"fail", nil, CodeFailed},
	} {
		err := Call(context.Background(), path, c.method, c.params, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code {
			t.Errorf("%s: error %v, want code %s", c.method, err, c.code)
		}
	}
}

func TestMalformedLinesKeepTheConnection(t *testing.T) {
	path := startServer(t, echoServer())
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	for _, line := range []string{
		`not json`,
		`{"id":1}`,
		`{"id":2,"method":"echo","bogus":1}`,
		`{"id":3,"method":"echo"} {"id":4}`,
		`[1,2]`,
	} {
		fmt.Fprintln(conn, line)
		b, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		var resp Response
		if err := json.Unmarshal(b, &resp); err != nil || resp.Error == nil || resp.Error.Code != CodeBadRequest {
			t.Errorf("%s: response %s, want bad_request", line, b)
		}
	}
	fmt.Fprintln(conn, `{"id":9,"method":"methods"}`)
	if b, err := rd.ReadBytes('\n'); err != nil || !strings.Contains(string(b), `"id":9`) {
		t.Errorf("valid request after bad ones: %s %v", b, err)
	}
}

func TestListenReplacesOnlyStaleSockets(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody listens: stale
	if ln, err := Listen(stale); err != nil {
		t.Errorf("stale socket: %v", err)
	} else {
		if _, err := Listen(stale); !errors.Is(err, ErrInUse) {
			t.Errorf("live socket: %v, want ErrInUse", err)
		}
		ln.Close()
	}
	plain := filepath.Join(dir, "file")
	os.WriteFile(plain, []byte("keep me"), 0o644)
	if _, err := Listen(plain); err == nil {
		t.Error("Listen took over a regular file")
	}
	if b, _ := os.ReadFile(plain); string(b) != "keep me" {
		t.Error("regular file changed")
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"id":1,"method":"status"}`))
	f.Add([]byte(`{"id":2,"method":"echo","params":{"text":"x"}}`))
	f.Add([]byte(`{"id":-1,"method":""}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := DecodeRequest(line)
		if err != nil {
			return
		}
		if r.Method == "" {
			t.Fatal("accepted a request without a method")
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("accepted request does not re-encode: %v", err)
		}
	})
}
