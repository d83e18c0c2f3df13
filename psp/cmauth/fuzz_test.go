package cmauth

import (
	"bytes"
	"testing"
)

// countReader yields 0, 1, 2, ... (deterministic nonces for tests).
type countReader struct{ n byte }

func (r *countReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.n
		r.n++
	}
	return len(p), nil
}

// FuzzOpen feeds hostile CM envelopes to an Opener: it never panics,
// keeps its cache bounded, and accepts nothing it did not see sealed
// (the fuzzer cannot forge a tag; seeds are accepted once, then are
// replays).
func FuzzOpen(f *testing.F) {
	s := testSecret(f)
	// Fixed nonces: every fuzz worker process seals the same seeds.
	a, _ := NewSealer(s, "daemon-a", &countReader{})
	good, _ := a.Seal(nil, t0, testSA(), reqBody(1))
	noSA, _ := a.Seal(nil, t0, nil, reqBody(2))
	f.Add(good)
	f.Add(noSA)
	f.Add(good[:headerLen+8])
	f.Add(append([]byte("FNCM\x01\x01"), make([]byte, 42)...))
	f.Add([]byte{})
	b, _ := NewOpener(s, "daemon-b", OpenerConfig{CacheSize: 16})
	f.Fuzz(func(t *testing.T, x []byte) {
		in := bytes.Clone(x)
		m, d := b.Open(in, t0)
		if d >= numDrops {
			t.Fatalf("drop %d out of the table", d)
		}
		if d == dropNone && !bytes.Equal(x, good) && !bytes.Equal(x, noSA) {
			t.Fatalf("accepted an envelope nobody sealed: %x (%+v)", x, m)
		}
		if b.Cached() > 16 {
			t.Fatalf("cache grew to %d", b.Cached())
		}
	})
}
