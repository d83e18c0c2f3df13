package cmauth

import (
	"bytes"
	"crypto/rand"
	"runtime"
	"testing"
	"time"
)

// cmREQ is a CM REQ as device/cm/wire.go lays it out: magic "FNCM",
// version 1, type 1 (REQ), source and destination MACs.
func cmREQ(src, dst [6]byte) []byte {
	b := make([]byte, 48)
	copy(b, "FNCM")
	b[4], b[5] = 1, 1
	copy(b[8:], src[:])
	copy(b[14:], dst[:])
	b[23] = 7 // sender's CID
	return b
}

// receiveREQ is what the device's CM does with a datagram from the
// fabric before the REQ may touch any connection: open, then check that
// the sender speaks for the REQ's source MAC.
func receiveREQ(o *Opener, own *Owners, datagram []byte, now int64) bool {
	m, d := o.Open(datagram, now)
	if d != dropNone || len(m.Body) < 20 {
		return false
	}
	var src [6]byte
	copy(src[:], m.Body[8:14])
	return own.Authorize(m.From, src) == nil
}

// TestAdversarialConnectionHijack [issue 18, finding 1]: daemon A (NIC
// macA1) has a connection with daemon B's NIC macB1. None of these REQs
// reaches A's connection manager: a REQ forged by a host without the
// fabric secret; one from another member daemon claiming B's MAC; one
// claiming a NIC of A itself; B's own REQ captured and replayed, at once
// and later. B's genuine REQs are still accepted.
func TestAdversarialConnectionHijack(t *testing.T) {
	s := testSecret(t)
	a, err := NewOpener(s, "daemon-a", OpenerConfig{Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	own := NewOwners("daemon-a", OwnersConfig{Local: [][6]byte{macA1}, Learn: true})
	b, _ := NewSealer(s, "daemon-b", rand.Reader)
	evil, _ := NewSealer(s, "daemon-evil", rand.Reader)
	stranger, _ := NewSealer(func() *Secret { x, _ := NewSecret(bytes.Repeat([]byte("guess"), 8)); return x }(), "daemon-b", rand.Reader)

	first, _ := b.Seal(nil, t0, testSA(), cmREQ(macB1, macA1))
	captured := bytes.Clone(first)
	if !receiveREQ(a, own, first, t0) {
		t.Fatal("B's genuine REQ refused")
	}
	for _, c := range []struct {
		name string
		env  []byte
		at   int64
	}{
		{"no secret, claiming B", must(stranger.Seal(nil, t0, testSA(), cmREQ(macB1, macA1))), t0},
		{"member claiming B's MAC", must(evil.Seal(nil, t0, testSA(), cmREQ(macB1, macA1))), t0},
		{"member claiming A's own NIC", must(evil.Seal(nil, t0, testSA(), cmREQ(macA1, macA1))), t0},
		{"B claiming A's own NIC", must(b.Seal(nil, t0, testSA(), cmREQ(macA1, macA1))), t0},
		{"plaintext REQ", cmREQ(macB1, macA1), t0},
		{"B's REQ replayed at once", bytes.Clone(captured), t0 + int64(time.Second)},
		{"B's REQ replayed later", bytes.Clone(captured), t0 + int64(time.Hour)},
	} {
		if receiveREQ(a, own, c.env, c.at) {
			t.Errorf("%s: accepted", c.name)
		}
	}
	if id, _ := own.Owner(macB1); id != "daemon-b" {
		t.Fatalf("B's MAC now bound to %q", id)
	}
	next, _ := b.Seal(nil, t0+int64(2*time.Second), testSA(), cmREQ(macB1, macA1))
	if !receiveREQ(a, own, next, t0+int64(2*time.Second)) {
		t.Fatal("B's next genuine REQ refused")
	}
}

// TestAdversarialCMFlood [issue 18, finding 5]: 10,000 forged and
// replayed CM messages leave the opener's memory bounded and a genuine
// REQ still accepted.
func TestAdversarialCMFlood(t *testing.T) {
	s := testSecret(t)
	a, _ := NewOpener(s, "daemon-a", OpenerConfig{CacheSize: 256})
	own := NewOwners("daemon-a", OwnersConfig{Local: [][6]byte{macA1}, Learn: true, MaxPerPeer: 64})
	b, _ := NewSealer(s, "daemon-b", rand.Reader)
	evil, _ := NewSealer(s, "daemon-evil", rand.Reader)
	captured, _ := b.Seal(nil, t0, testSA(), cmREQ(macB1, macA1))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 10000 {
		now := t0 + int64(i)*int64(time.Microsecond)
		var env []byte
		switch i % 3 {
		case 0: // a member claiming ever new MACs
			env, _ = evil.Seal(nil, now, testSA(), cmREQ([6]byte{2, 9, byte(i >> 16), byte(i >> 8), byte(i), 0}, macA1))
		case 1: // garbage
			env = bytes.Repeat([]byte{byte(i)}, 120)
		default: // replays
			env = bytes.Clone(captured)
		}
		receiveREQ(a, own, env, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	const bound = 256 << 10 // two senders' caches of 256 nonces and 64 learnt MACs
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap growth after 10,000 forged, flooding and replayed messages: %d bytes", growth)
	if growth > bound {
		t.Fatalf("heap grew by %d bytes, bound %d", growth, bound)
	}
	if a.Cached() > 256*a.Senders() || a.Senders() != 2 {
		t.Fatalf("replay caches hold %d nonces of %d senders", a.Cached(), a.Senders())
	}
	// B's clock runs a second behind: the flood raised no floor of B's.
	now := t0 + int64(20*time.Millisecond)
	req, _ := b.Seal(nil, now-int64(time.Second), testSA(), cmREQ(macB1, macA1))
	if !receiveREQ(a, own, req, now) {
		t.Fatal("a genuine REQ after the flood was refused")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
