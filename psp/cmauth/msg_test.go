package cmauth

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"falconnic/psp"
)

const t0 = int64(1_790_000_000) * int64(time.Second)

func testSecret(t testing.TB) *Secret {
	t.Helper()
	s, err := NewSecret(mustHex(t, testSecretHex))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func endpoints(t testing.TB, cfg OpenerConfig) (*Sealer, *Opener) {
	t.Helper()
	s := testSecret(t)
	a, err := NewSealer(s, "daemon-a", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewOpener(s, "daemon-b", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func reqBody(n byte) []byte { return bytes.Repeat([]byte{n}, 48) }

func testSA() *SA {
	sa := &SA{Version: psp.AESGCM128, SPI: 0x00000042}
	copy(sa.Key[:], "0123456789abcdef")
	return sa
}

func TestSealOpen(t *testing.T) {
	a, b := endpoints(t, OpenerConfig{})
	env, err := a.Seal(nil, t0, testSA(), reqBody(1))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte("0123456789abcdef")) || bytes.Contains(env, reqBody(1)[:16]) {
		t.Fatal("the SA key or the CM message is visible in the envelope")
	}
	m, d := b.Open(env, t0+time.Millisecond.Nanoseconds())
	if d != dropNone {
		t.Fatal(d)
	}
	if m.From != "daemon-a" || m.Time != t0 || !m.HasSA || m.SA != *testSA() || !bytes.Equal(m.Body, reqBody(1)) {
		t.Fatalf("opened %+v", m)
	}
	if !bytes.Equal(m.SA.KeyBytes(), []byte("0123456789abcdef")) {
		t.Fatalf("key bytes %x", m.SA.KeyBytes())
	}
	env, _ = a.Seal(nil, t0, nil, reqBody(2))
	if m, d = b.Open(env, t0); d != dropNone || m.HasSA {
		t.Fatalf("without SA: %v %+v", d, m)
	}
}

// TestReplayedREQRefused: a captured REQ replayed at once hits the replay
// cache; replayed later, the freshness window.
func TestReplayedREQRefused(t *testing.T) {
	a, b := endpoints(t, OpenerConfig{Window: 10 * time.Second})
	env, _ := a.Seal(nil, t0, testSA(), reqBody(1))
	captured := bytes.Clone(env)
	if _, d := b.Open(env, t0); d != dropNone {
		t.Fatal(d)
	}
	if _, d := b.Open(bytes.Clone(captured), t0+time.Second.Nanoseconds()); d != DropReplay {
		t.Fatalf("replayed within the window: %v", d)
	}
	if _, d := b.Open(bytes.Clone(captured), t0+time.Minute.Nanoseconds()); d != DropStale {
		t.Fatalf("replayed a minute later: %v", d)
	}
	env, _ = a.Seal(nil, t0+time.Minute.Nanoseconds(), testSA(), reqBody(1))
	if _, d := b.Open(env, t0); d != DropFuture {
		t.Fatalf("dated a minute ahead: %v", d)
	}
}

// TestForgedChangesNothing: a forged or corrupted message fails its tag
// before freshness and the cache, and leaves the cache as it was.
func TestForgedChangesNothing(t *testing.T) {
	a, b := endpoints(t, OpenerConfig{})
	env, _ := a.Seal(nil, t0, testSA(), reqBody(1))
	for i := range env {
		x := bytes.Clone(env)
		x[i] ^= 0x01
		if _, d := b.Open(x, t0); d == dropNone {
			t.Fatalf("byte %d flipped: accepted", i)
		}
	}
	if b.Cached() != 0 {
		t.Fatalf("refused messages entered the cache: %d", b.Cached())
	}
	other, _ := NewSecret(bytes.Repeat([]byte{1, 2}, 16))
	stranger, _ := NewSealer(other, "daemon-a", rand.Reader)
	x, _ := stranger.Seal(nil, t0, testSA(), reqBody(1))
	if _, d := b.Open(x, t0); d != DropAuth {
		t.Fatalf("sealed under another fabric's secret: %v", d)
	}
	if _, d := b.Open(env, t0); d != dropNone {
		t.Fatalf("the genuine message after the forgeries: %v", d)
	}
}

func TestOpenHeaderChecks(t *testing.T) {
	a, b := endpoints(t, OpenerConfig{})
	good, _ := a.Seal(nil, t0, testSA(), reqBody(1))
	self, _ := NewSealer(testSecret(t), "daemon-b", rand.Reader)
	own, _ := self.Seal(nil, t0, nil, reqBody(1))
	for _, c := range []struct {
		name string
		b    []byte
		want Drop
	}{
		{"empty", nil, DropShort},
		{"header only", good[:headerLen], DropShort},
		{"plaintext CM message", append([]byte("FNCM"), make([]byte, 44)...), DropMagic},
		{"version", func() []byte { x := bytes.Clone(good); x[4] = 2; return x }(), DropVersion},
		{"reserved", func() []byte { x := bytes.Clone(good); x[7] = 1; return x }(), DropReserved},
		{"ID length 0", func() []byte { x := bytes.Clone(good); x[5] = 0; return x }(), DropID},
		{"ID length 200", func() []byte { x := bytes.Clone(good); x[5] = 200; return x }(), DropID},
		{"ID past the end", func() []byte { x := bytes.Clone(good); x[5] = 64; return x[:headerLen+60] }(), DropShort},
		{"own ID", own, DropID},
	} {
		if _, d := b.Open(c.b, t0); d != c.want {
			t.Errorf("%s: %v, want %v", c.name, d, c.want)
		}
	}
}

func TestSAOfferChecked(t *testing.T) {
	a, b := endpoints(t, OpenerConfig{})
	if _, err := a.Seal(nil, t0, &SA{Version: 7, SPI: 1}, reqBody(1)); !errors.Is(err, psp.ErrVersion) {
		t.Fatalf("version 7 offered: %v", err)
	}
	bad := testSA()
	bad.SPI = 0
	env, _ := a.Seal(nil, t0, bad, reqBody(1))
	if _, d := b.Open(env, t0); d != DropSA {
		t.Fatalf("SPI 0: %v", d)
	}
	// A member sealing an offer by hand: key bytes past a 128-bit key,
	// flag bits Seal never sets.
	for _, mut := range []func(p []byte){
		func(p []byte) { p[8+20] = 1 },
		func(p []byte) { p[1] |= 2 },
		func(p []byte) { p[0] = 9 },
	} {
		env, _ = a.Seal(nil, t0, testSA(), reqBody(1))
		aad := headerLen + len("daemon-a")
		plain, err := a.aead.Open(nil, env[16:16+nonceLen], env[aad:], env[:aad])
		if err != nil {
			t.Fatal(err)
		}
		mut(plain)
		env = a.aead.Seal(env[:aad], env[16:16+nonceLen], plain, env[:aad])
		if _, d := b.Open(env, t0); d != DropSA {
			t.Fatalf("hand-made offer: %v", d)
		}
	}
}

// TestReplayCacheBounded: a flood of fresh messages keeps the cache at
// its size, and a message evicted from it cannot be replayed (the floor).
func TestReplayCacheBounded(t *testing.T) {
	a, b := endpoints(t, OpenerConfig{CacheSize: 64})
	first, _ := a.Seal(nil, t0, nil, reqBody(0))
	captured := bytes.Clone(first)
	if _, d := b.Open(first, t0); d != dropNone {
		t.Fatal(d)
	}
	for i := range 1000 {
		at := t0 + int64(i+1)*int64(time.Millisecond)
		env, _ := a.Seal(nil, at, nil, reqBody(1))
		if _, d := b.Open(env, at); d != dropNone {
			t.Fatalf("message %d: %v", i, d)
		}
	}
	if b.Cached() != 64 {
		t.Fatalf("cache holds %d, want 64", b.Cached())
	}
	if _, d := b.Open(captured, t0+time.Second.Nanoseconds()); d != DropFloor {
		t.Fatalf("evicted message replayed: %v", d)
	}
}

// TestMaxSenders: a new sender beyond MaxSenders is refused; known ones
// go on.
func TestMaxSenders(t *testing.T) {
	s := testSecret(t)
	o, _ := NewOpener(s, "daemon-z", OpenerConfig{MaxSenders: 2})
	for i, id := range []ID{"d1", "d2", "d3", "d1"} {
		se, _ := NewSealer(s, id, rand.Reader)
		env, _ := se.Seal(nil, t0, nil, reqBody(1))
		_, d := o.Open(env, t0)
		if want := map[bool]Drop{true: DropSenders, false: dropNone}[i == 2]; d != want {
			t.Fatalf("%s: %v, want %v", id, d, want)
		}
	}
}

func TestDropTableComplete(t *testing.T) {
	seen := map[string]bool{}
	for d := range numDrops {
		if r := drops[d]; r.name == "" || r.help == "" || seen[r.name] {
			t.Errorf("drop %d: %+v", d, r)
		} else {
			seen[r.name] = true
		}
	}
	var c Counters
	for _, d := range c.Set() {
		if d.Help == "" || d.Counter == nil {
			t.Errorf("counter %q", d.Name)
		}
	}
}

func TestIDs(t *testing.T) {
	s := testSecret(t)
	if _, err := NewSealer(s, "", rand.Reader); !errors.Is(err, ErrID) {
		t.Error("empty ID")
	}
	if _, err := NewOpener(s, ID(bytes.Repeat([]byte{'x'}, 65)), OpenerConfig{}); !errors.Is(err, ErrID) {
		t.Error("65-byte ID")
	}
}
