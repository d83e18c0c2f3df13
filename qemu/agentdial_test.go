package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHybridOK(t *testing.T) {
	if p, err := ParseHybridOK([]byte("OK 1073741824")); err != nil || p != 1073741824 {
		t.Fatalf("= %d %v", p, err)
	}
	for _, s := range []string{"", "OK", "OK ", "OK -1", "OK 12a", "ok 5", "OK 99999999999", "NO 5", "OK 5 6"} {
		if _, err := ParseHybridOK([]byte(s)); !errors.Is(err, ErrHybridHandshake) {
			t.Errorf("%q: err = %v", s, err)
		}
	}
}

func FuzzParseHybridOK(f *testing.F) {
	f.Add([]byte("OK 1024"))
	f.Add([]byte("OK "))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseHybridOK(b)
		if err == nil && string(b) != "OK "+itoa(p) && !strings.HasPrefix(string(b), "OK 0") {
			t.Fatalf("%q accepted as %d", b, p)
		}
	})
}

func itoa(p uint32) string {
	var b []byte
	if p == 0 {
		return "0"
	}
	for ; p > 0; p /= 10 {
		b = append([]byte{byte('0' + p%10)}, b...)
	}
	return string(b)
}

// A fake bridge: reads "CONNECT 1024\n", answers, then echoes.
func fakeBridge(t *testing.T, answer string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vsock.uds")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "CONNECT 1024\n" {
			return
		}
		c.Write([]byte(answer + "after"))
	}()
	return path
}

func vmWithVsock(t *testing.T, uds string) *VM {
	t.Helper()
	dir := t.TempDir()
	v := &VM{Name: "A", Dir: dir}
	m := Machine{Name: "A", Vsock: &Vsock{VhostUser: "/x", UDS: uds}}
	b, _ := jsonMarshal(m)
	if err := os.WriteFile(v.machineFile(), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDialAgentOverTheVsockBridge(t *testing.T) {
	v := vmWithVsock(t, fakeBridge(t, "OK 2000\n"))
	conn, err := v.DialAgent(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := make([]byte, 5)
	if _, err := conn.Read(b); err != nil || string(b) != "after" {
		t.Fatalf("bytes after the handshake: %q %v", b, err)
	}
}

func TestDialAgentRejectsABadBridgeAnswer(t *testing.T) {
	v := vmWithVsock(t, fakeBridge(t, "NOPE\n"))
	if _, err := v.DialAgent(context.Background(), ViaVsock); !errors.Is(err, ErrHybridHandshake) {
		t.Fatalf("err = %v", err)
	}
	if _, err := v.DialAgent(context.Background(), "carrier-pigeon"); err == nil {
		t.Fatal("unknown transport accepted")
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// --via diag dials the agent's diagnosis port, not its main channel.
func TestDialAgentViaTheDiagnosisPort(t *testing.T) {
	v := &VM{Name: "A", Dir: t.TempDir()}
	b, _ := jsonMarshal(Machine{Name: "A"})
	if err := os.WriteFile(v.machineFile(), b, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", v.DiagSock())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte("diag"))
			c.Close()
		}
	}()
	conn, err := v.DialAgent(context.Background(), ViaDiag)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make([]byte, 4)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "diag" {
		t.Fatalf("read %q %v from the diagnosis port", got, err)
	}
}
