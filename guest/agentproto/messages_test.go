package agentproto

import (
	"errors"
	"reflect"
	"testing"
)

func TestMessagesRoundTrip(t *testing.T) {
	h := Hello{Version: Version, Nonce: 0x0102030405060708}
	if got, err := ParseHello(AppendHello(nil, h)); err != nil || got != h {
		t.Errorf("Hello = %+v %v", got, err)
	}
	r := Ready{Version: Version, Nonce: 9, Hostname: "A"}
	if got, err := ParseReady(AppendReady(nil, r)); err != nil || got != r {
		t.Errorf("Ready = %+v %v", got, err)
	}
	e := Exec{Flags: ExecStdin, Dir: "/tmp", Argv: []string{"ping", "-c", "1", ""}, Env: []string{"A=1"}}
	if got, err := ParseExec(AppendExec(nil, e)); err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("Exec = %+v %v", got, err)
	}
	x := Exit{Code: -1, Message: "killed"}
	if got, err := ParseExit(AppendExit(nil, x)); err != nil || got != x {
		t.Errorf("Exit = %+v %v", got, err)
	}
}

func TestParseExecRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		p    []byte
	}{
		{"empty", nil},
		{"no argv", AppendExec(nil, Exec{})},
		{"empty command", AppendExec(nil, Exec{Argv: []string{""}})},
		{"unknown flag", AppendExec(nil, Exec{Flags: 1 << 7, Argv: []string{"true"}})},
		{"trailing bytes", append(AppendExec(nil, Exec{Argv: []string{"true"}}), 0)},
		{"truncated", AppendExec(nil, Exec{Argv: []string{"true"}})[:10]},
		{"huge list count", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}},
		{"string longer than payload", []byte{0, 0, 0, 0, 0, 0, 0x10, 0}},
	} {
		if _, err := ParseExec(c.p); !errors.Is(err, ErrBadPayload) {
			t.Errorf("%s: err = %v, want ErrBadPayload", c.name, err)
		}
	}
}

func TestReadyHostnameIsClipped(t *testing.T) {
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'h'
	}
	got, err := ParseReady(AppendReady(nil, Ready{Hostname: string(long)}))
	if err != nil || len(got.Hostname) != MaxHostname {
		t.Fatalf("Ready = %d bytes of hostname, %v", len(got.Hostname), err)
	}
}

func FuzzParseMessages(f *testing.F) {
	f.Add(AppendExec(nil, Exec{Dir: "/", Argv: []string{"echo", "hi"}, Env: []string{"X=y"}}))
	f.Add(AppendReady(nil, Ready{Version: 1, Nonce: 2, Hostname: "B"}))
	f.Add(AppendExit(nil, Exit{Code: 1, Message: "m"}))
	f.Add(AppendHello(nil, Hello{1, 2}))
	f.Fuzz(func(t *testing.T, p []byte) {
		if e, err := ParseExec(p); err == nil {
			if got, err := ParseExec(AppendExec(nil, e)); err != nil || !reflect.DeepEqual(got, e) {
				t.Fatalf("Exec does not round-trip: %+v vs %+v (%v)", got, e, err)
			}
		}
		if r, err := ParseReady(p); err == nil {
			if got, _ := ParseReady(AppendReady(nil, r)); got != r {
				t.Fatalf("Ready does not round-trip")
			}
		}
		if x, err := ParseExit(p); err == nil {
			if got, _ := ParseExit(AppendExit(nil, x)); got != x {
				t.Fatalf("Exit does not round-trip")
			}
		}
		ParseHello(p)
	})
}
