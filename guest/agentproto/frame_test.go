package agentproto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestEveryTypeHasARow(t *testing.T) {
	for ty := Type(1); ty < typeEnd; ty++ {
		if types[ty].name == "" {
			t.Errorf("type %d has no row in the types table", ty)
		}
	}
	if Type(0).valid() || typeEnd.valid() {
		t.Error("0 and typeEnd must not be valid types")
	}
}

func TestFrameRoundTrip(t *testing.T) {
	var b []byte
	b = AppendFrame(b, TypeStdout, []byte("hello"))
	b = AppendFrame(b, TypeKill, nil)
	rd := NewReader(bytes.NewReader(b), nil)
	ty, p, err := rd.Next()
	if err != nil || ty != TypeStdout || string(p) != "hello" {
		t.Fatalf("first frame = %v %q %v", ty, p, err)
	}
	ty, p, err = rd.Next()
	if err != nil || ty != TypeKill || len(p) != 0 {
		t.Fatalf("second frame = %v %q %v", ty, p, err)
	}
	if _, _, err := rd.Next(); err != io.EOF {
		t.Fatalf("end = %v, want io.EOF", err)
	}
	if got := rd.Counters.FramesIn.Load(); got != 2 {
		t.Errorf("FramesIn = %d, want 2", got)
	}
}

func TestHeaderRejectsEachCause(t *testing.T) {
	good := AppendFrame(nil, TypeStdout, []byte("x"))
	for _, c := range []struct {
		name    string
		mutate  func(h Header)
		want    error
		counter func(*Counters) uint64
	}{
		{"bad magic", func(h Header) { h[0] = 'X' }, ErrBadMagic, func(c *Counters) uint64 { return c.BadMagic.Load() }},
		{"unknown type", func(h Header) { h.SetType(typeEnd) }, ErrUnknownType, func(c *Counters) uint64 { return c.UnknownType.Load() }},
		{"type zero", func(h Header) { h.SetType(0) }, ErrUnknownType, func(c *Counters) uint64 { return c.UnknownType.Load() }},
		{"reserved bits", func(h Header) { h[6] = 1 }, ErrReserved, func(c *Counters) uint64 { return c.Reserved.Load() }},
		{"too long for its type", func(h Header) { h.SetType(TypeKill) }, ErrTooLong, func(c *Counters) uint64 { return c.TooLong.Load() }},
		{"longer than MaxPayload", func(h Header) { h.SetType(TypeExec); h.SetLength(MaxPayload + 1) }, ErrTooLong, func(c *Counters) uint64 { return c.TooLong.Load() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte(nil), good...)
			c.mutate(Header(b))
			rd := NewReader(bytes.NewReader(b), nil)
			_, _, err := rd.Next()
			if !errors.Is(err, c.want) {
				t.Fatalf("Next = %v, want %v", err, c.want)
			}
			if c.counter(rd.Counters) != 1 {
				t.Errorf("counter for %v not incremented", c.want)
			}
		})
	}
}

func TestTruncatedFrameIsUnexpectedEOF(t *testing.T) {
	b := AppendFrame(nil, TypeStdout, []byte("hello"))
	for _, n := range []int{5, HeaderLen, len(b) - 1} {
		rd := NewReader(bytes.NewReader(b[:n]), nil)
		if _, _, err := rd.Next(); err != io.ErrUnexpectedEOF {
			t.Errorf("%d of %d bytes: err = %v, want io.ErrUnexpectedEOF", n, len(b), err)
		}
	}
}

func TestResyncSkipsGarbageToTheNextMagic(t *testing.T) {
	var b []byte
	b = append(b, "FNzzgarbage"...)
	b = AppendFrame(b, TypeStderr, []byte("after"))
	rd := NewReader(bytes.NewReader(b), nil)
	rd.Resync = true
	ty, p, err := rd.Next()
	if err != nil || ty != TypeStderr || string(p) != "after" {
		t.Fatalf("Next = %v %q %v", ty, p, err)
	}
	if got := rd.Counters.ResyncBytes.Load(); got != uint64(len("FNzzgarbage")) {
		t.Errorf("ResyncBytes = %d, want %d", got, len("FNzzgarbage"))
	}
}

func FuzzReader(f *testing.F) {
	f.Add(AppendFrame(nil, TypeHello, AppendHello(nil, Hello{Version, 7})))
	f.Add(AppendFrame(AppendFrame(nil, TypeStdout, []byte("a")), TypeExit, AppendExit(nil, Exit{Code: 3})))
	f.Add([]byte("FNAGFNAG\x00\x00\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, resync := range []bool{false, true} {
			rd := NewReader(bytes.NewReader(b), nil)
			rd.Resync = resync
			for i := 0; i < len(b)+1; i++ {
				ty, p, err := rd.Next()
				if err != nil {
					break
				}
				if !ty.valid() || len(p) > types[ty].maxLen {
					t.Fatalf("accepted %v with %d bytes", ty, len(p))
				}
			}
		}
	})
}
