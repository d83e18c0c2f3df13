package falcon_test

import (
	"bytes"
	"errors"
	"fmt"
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

// TestPushShared: over a RefLink a push of a page or more goes to the
// receiver in a shared frame buffer (SendShared), the payload on a page,
// whether it was gathered (PushGather) or written in place by the ULP
// (PushFill); every push arrives intact through drops and resends past
// the RTO, small pushes are copied, and every shared buffer's references
// are gone at the end.
func TestPushShared(t *testing.T) {
	a := &frameULP{back: map[uint64][]byte{}, status: map[uint64]tl.Status{}}
	b := &frameULP{back: map[uint64][]byte{}, status: map[uint64]tl.Status{}}
	hdr := []byte("RBTH-like header")
	p := newRefPair(t, &refLink{t: t, drop: 9, hold: 7, keep: 40, payloadAt: wire.PushDataHeaderLen + len(hdr)}, &refLink{t: t}, a, b)
	const n = 300
	want := map[string]int{} // pattern repeats every 256 cookies
	small := 0
	for i := uint64(0); i < n; i++ {
		size := 4096
		if i%5 == 4 {
			size, small = 100, small+1
		}
		data := pattern(i, size)
		want[string(hdr)+string(data)]++
		var err error
		if i%2 == 0 {
			_, err = p.ca.PushGather(i, hdr, [][]byte{data[:size/3], data[size/3:]}, 0, size)
		} else {
			_, err = p.ca.PushFill(i, hdr, size, func(b []byte) error {
				if len(b) != size {
					t.Fatalf("fill got %d bytes, want %d", len(b), size)
				}
				copy(b, data)
				return nil
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%32 == 31 || i == n-1 {
			p.settle(4000)
		}
	}
	p.ab.letGo(true)
	if len(b.pushes) != n {
		t.Fatalf("%d pushes arrived, want %d", len(b.pushes), n)
	}
	for _, q := range b.pushes {
		if want[string(q)] == 0 {
			t.Fatalf("a push of %d bytes arrived changed", len(q))
		}
		want[string(q)]--
	}
	copied := p.ca.Stats.SharedCopied.Load()
	if p.ab.shared != n-small || p.ab.held == 0 || copied == 0 || p.ab.refs != 0 {
		t.Errorf("%d pushes shared (want %d), %d held back past the RTO, %d copied for a resend, %d by plain reference",
			p.ab.shared, n-small, p.ab.held, copied, p.ab.refs)
	}
	for m := range p.ab.mems {
		if m.Refs() != 0 {
			t.Fatalf("a shared buffer still has %d references: one was never let go", m.Refs())
		}
	}
}

// TestFillErrorSubmitsNothing: a PushFill or PullDataFill whose fill fails
// returns that error and takes nothing: no RSN, no buffer cells, no
// packet; the same calls then succeed and the data arrives.
func TestFillErrorSubmitsNothing(t *testing.T) {
	for _, ref := range []bool{false, true} {
		t.Run(fmt.Sprintf("reflink=%v", ref), func(t *testing.T) {
			boom := errors.New("guest memory gone")
			a := &fillPullULP{pulled: map[uint64][]byte{}, fail: boom}
			b := &fillPullULP{pulled: map[uint64][]byte{}, fail: boom}
			ab, ba := &refLink{t: t}, &refLink{t: t}
			var la, lb falcon.Link = ab, ba
			if !ref {
				la, lb = plainLink{ab}, plainLink{ba}
			}
			p := newLinkPair(t, ab, ba, la, lb, a, b)
			res := p.ea.Resources()
			free := res.TxReq.Buf.Free()
			if _, err := p.ca.PushFill(1, []byte("h"), 4096, func([]byte) error { return boom }); err != boom {
				t.Fatalf("PushFill with a failing fill: %v, want its error", err)
			}
			if got := res.TxReq.Buf.Free(); got != free || p.ca.Outstanding() != 0 {
				t.Fatalf("a failed fill kept %d cells, %d transactions", free-got, p.ca.Outstanding())
			}
			data := pattern(7, 4096)
			if _, err := p.ca.PushFill(2, []byte("h"), 4096, func(b []byte) error { copy(b, data); return nil }); err != nil {
				t.Fatal(err)
			}
			// b's first fill for the pull fails (the pull waits), its next succeeds.
			if _, err := p.ca.PullHeader(3, 4096+1, []byte{3}); err != nil {
				t.Fatal(err)
			}
			p.settle(4000)
			if len(b.pushes) != 1 || !bytes.Equal(b.pushes[0], append([]byte("h"), data...)) {
				t.Fatalf("pushes arrived: %d", len(b.pushes))
			}
			if b.failed != 1 || !bytes.Equal(a.pulled[3], append([]byte{'H'}, pattern(3, 4096)...)) {
				t.Fatalf("fills failed %d times (want 1), pulled %d bytes", b.failed, len(a.pulled[3]))
			}
		})
	}
}

// fillPullULP records pushes and answers a pull with PullDataFill, whose
// first fill fails (the pull then waits) and whose second writes
// pattern(cookie) after a one-byte header.
type fillPullULP struct {
	pushes [][]byte
	pulled map[uint64][]byte
	fail   error
	failed int
}

func (u *fillPullULP) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if r.Kind == tl.Push {
		u.pushes = append(u.pushes, append([]byte(nil), r.Payload...))
		c.AckPush(r.RSN)
		return
	}
	cookie := uint64(r.Payload[0])
	n := int(r.Length) - 1
	if err := c.PullDataFill(r.RSN, []byte{'H'}, n, func([]byte) error { return u.fail }); err != u.fail {
		panic(fmt.Sprintf("PullDataFill with a failing fill: %v", err))
	}
	u.failed++
	if err := c.PullDataFill(r.RSN, []byte{'H'}, n, func(b []byte) error { copy(b, pattern(cookie, n)); return nil }); err != nil {
		panic(err)
	}
}

func (u *fillPullULP) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	if cpl.Kind == tl.Pull && cpl.Status == tl.CmplAck {
		u.pulled[cpl.Cookie] = append([]byte(nil), cpl.Data...)
	}
}

func (*fillPullULP) OnXon(*falcon.Conn) {}

// plainLink is a refLink that does not take frames by reference.
type plainLink struct{ l *refLink }

func (l plainLink) InProcess()                   {}
func (l plainLink) Send(pkt []byte, flow uint32) { l.l.Send(pkt, flow) }
