package falcon_test

import (
	"bytes"
	"testing"

	"falconnic/falcon"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// pullULP answers each pull with a header and the bytes pattern(rsn)
// names, and records what its initiator side pulled.
type pullULP struct {
	hdr    []byte
	n      func(length uint32) int
	pulled map[uint64][]byte
}

func pattern(cookie uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(cookie*31 + uint64(i)*7)
	}
	return b
}

func (u *pullULP) OnRequest(c *falcon.Conn, r *falcon.Request) {
	cookie := uint64(r.Payload[0]) | uint64(r.Payload[1])<<8
	data := pattern(cookie, int(r.Length)-len(u.hdr))
	// Two segments, so the gather crosses a boundary.
	c.PullDataGather(r.RSN, u.hdr, [][]byte{data[:len(data)/3], data[len(data)/3:]}, 0, len(data))
}

func (u *pullULP) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	if cpl.Kind != tl.Pull || cpl.Status != tl.CmplAck {
		return
	}
	u.pulled[cpl.Cookie] = append([]byte(nil), cpl.Data...)
}

func (*pullULP) OnXon(*falcon.Conn) {}

// TestPullDataShared: over a RefLink, Pull Data of a page or more is
// gathered into a shared frame buffer, its payload on a page, and goes
// to the receiver in that buffer (SendShared), which may hold it past the
// acknowledgement; the sender never writes it again (a resend goes from a
// copy), every pull arrives intact through drops and resends past the
// RTO, small Pull Data is copied as before, and every shared buffer's
// references are gone at the end (the test fails if acknowledgement or a
// resend does not let the sender's reference go, or if the sender rewrote
// a frame the receiver still held).
func TestPullDataShared(t *testing.T) {
	hdr := []byte("NBTH-like header")
	a := &pullULP{hdr: hdr, pulled: map[uint64][]byte{}}
	b := &pullULP{hdr: hdr, pulled: map[uint64][]byte{}}
	p := newRefPair(t, &refLink{t: t}, &refLink{t: t, drop: 9, hold: 7, keep: 40, payloadAt: wire.PullDataHeaderLen + len(hdr)}, a, b)
	ba, ca, ea, eb := p.ba, p.ca, p.ea, p.eb
	const n = 300
	length := func(i uint64) int {
		if i%5 == 4 {
			return len(hdr) + 100 // small: copied, not shared
		}
		return len(hdr) + 4096
	}
	small := 0
	for i := uint64(0); i < n; i++ {
		if length(i) < 1024 {
			small++
		}
		if _, err := ca.PullHeader(i, length(i), []byte{byte(i), byte(i >> 8)}); err != nil {
			t.Fatal(err)
		}
		if i%32 == 31 || i == n-1 {
			p.settle(4000)
		}
	}
	ba.letGo(true)
	for i := uint64(0); i < n; i++ {
		want := append(append([]byte(nil), hdr...), pattern(i, length(i)-len(hdr))...)
		if !bytes.Equal(a.pulled[i], want) {
			t.Fatalf("pull %d: got %d bytes, not the data sent", i, len(a.pulled[i]))
		}
	}
	copied := eb.Conns()[0].Stats.SharedCopied.Load()
	if ba.shared != n-small || ba.held == 0 || copied == 0 || ba.refs != 0 {
		t.Errorf("%d Pull Data shared (want %d), %d held back past the RTO, %d copied for a resend, %d by plain reference",
			ba.shared, n-small, ba.held, copied, ba.refs)
	}
	for m := range ba.mems {
		if m.Refs() != 0 {
			t.Fatalf("a shared buffer still has %d references: one was never let go", m.Refs())
		}
	}
	if st := &ea.Stats; st.RxParseLength.Load()+st.RxParseType.Load()+st.RxParseShort.Load() != 0 {
		t.Error("the receiver saw malformed packets")
	}
}
