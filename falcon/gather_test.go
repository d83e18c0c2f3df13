package falcon_test

import (
	"errors"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/tl"
)

// gatherULP records what its target sees and answers pulls with a
// gathered header and data.
type gatherULP struct {
	pushes, pulled [][]byte
	hdr            []byte
	segs           [][]byte
	off, n         int
}

func (u *gatherULP) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if r.Kind == tl.Push {
		u.pushes = append(u.pushes, append([]byte(nil), r.Payload...))
		c.AckPush(r.RSN)
		return
	}
	c.PullDataGather(r.RSN, u.hdr, u.segs, u.off, u.n)
}

func (u *gatherULP) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	if cpl.Kind == tl.Pull {
		u.pulled = append(u.pulled, append([]byte(nil), cpl.Data...))
	}
}

func (*gatherULP) OnXon(*falcon.Conn) {}

// PushGather and PullDataGather put a header and a range of a scatter list
// on the wire as one payload, across segment boundaries, and stop where
// the list ends; too long a payload is refused before anything is taken.
func TestGatherPayloads(t *testing.T) {
	segs := [][]byte{[]byte("abc"), []byte("defgh"), []byte("ij")}
	a, b := &gatherULP{}, &gatherULP{hdr: []byte("H:"), segs: segs, off: 2, n: 6}
	p, err := falcon.NewPair(falcon.PairConfig{
		AB: link.MemConfig{Delay: time.Microsecond}, BA: link.MemConfig{Delay: time.Microsecond},
		Conn: falcon.ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1},
		ULPA: a, ULPB: b,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.CA.PushGather(0, []byte("hdr|"), segs, 1, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CA.PushGather(0, nil, segs, 8, 100); err != nil { // the list ends after 2 bytes
		t.Fatal(err)
	}
	if _, err := p.CA.Pull(0, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CA.PushGather(0, make([]byte, 10), segs, 0, p.CA.Config().MTU); !errors.Is(err, falcon.ErrTooLong) {
		t.Errorf("an over-MTU gather: %v, want ErrTooLong", err)
	}
	p.RunUntil(func() bool { return p.CA.Outstanding() == 0 }, 10*time.Millisecond)
	if len(b.pushes) != 2 || string(b.pushes[0]) != "hdr|bcdefgh" || string(b.pushes[1]) != "ij" {
		t.Errorf("target got pushes %q, want [hdr|bcdefgh ij]", b.pushes)
	}
	if len(a.pulled) != 1 || string(a.pulled[0]) != "H:cdefgh" {
		t.Errorf("initiator pulled %q, want [H:cdefgh]", a.pulled)
	}
}
