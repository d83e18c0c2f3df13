package falcon_test

import (
	"encoding/binary"
	"testing"

	"falconnic/falcon"
	"falconnic/falcon/tl"
	"falconnic/internal/clock"
)

// captureLink keeps copies of the frames sent on it.
type captureLink struct{ frames [][]byte }

func (l *captureLink) Send(pkt []byte, _ uint32) {
	l.frames = append(l.frames, append([]byte(nil), pkt...))
}

// inProcessCapture is a captureLink that declares itself in-process.
type inProcessCapture struct{ captureLink }

func (*inProcessCapture) InProcess() {}

// pushCounter counts the pushes delivered to it and acks them.
type pushCounter struct{ n int }

func (u *pushCounter) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if r.Kind == tl.Push {
		u.n++
		c.AckPush(r.RSN)
	}
}
func (*pushCounter) OnCompletion(*falcon.Conn, *falcon.Completion) {}
func (*pushCounter) OnXon(*falcon.Conn)                            {}

// An in-process link's frames carry no ICV: ReceiveInProcess delivers
// them, Receive (the wire's path) drops them as failing the check, and a
// wire link's frames still carry a checked ICV.
func TestInProcessLinkFramesSkipTheICV(t *testing.T) {
	cc := falcon.ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1}
	send := func(l falcon.Link) {
		clk := clock.NewManual(0)
		a := falcon.New(falcon.Config{Clock: clk, Link: l, ULP: &pushCounter{}})
		c, err := a.Connect(cc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Push(7, []byte("payload")); err != nil {
			t.Fatal(err)
		}
	}
	receiver := func() (*falcon.Endpoint, *pushCounter) {
		u := &pushCounter{}
		b := falcon.New(falcon.Config{Clock: clock.NewManual(0), Link: &captureLink{}, ULP: u})
		if _, err := b.Connect(falcon.Mirror(cc)); err != nil {
			t.Fatal(err)
		}
		return b, u
	}

	local := &inProcessCapture{}
	send(local)
	if len(local.frames) != 1 {
		t.Fatalf("%d frames sent, want 1", len(local.frames))
	}
	f := local.frames[0]
	if icv := binary.BigEndian.Uint32(f[len(f)-4:]); icv != 0 {
		t.Errorf("in-process frame carries ICV %#x, want 0", icv)
	}
	b, u := receiver()
	b.Receive(f, 0)
	if u.n != 0 || b.Stats.RxBadICV.Load() != 1 {
		t.Errorf("Receive of an in-process frame: %d pushes delivered, %d ICV drops; want 0, 1", u.n, b.Stats.RxBadICV.Load())
	}
	b.ReceiveInProcess(f, 0)
	if u.n != 1 {
		t.Errorf("ReceiveInProcess delivered %d pushes, want 1", u.n)
	}

	wire := &captureLink{}
	send(wire)
	f = wire.frames[0]
	b, u = receiver()
	b.Receive(f, 0)
	if u.n != 1 || b.Stats.RxBadICV.Load() != 0 {
		t.Errorf("Receive of a wire frame: %d pushes, %d ICV drops; want 1, 0", u.n, b.Stats.RxBadICV.Load())
	}
	f[len(f)-1] ^= 1
	b2, u2 := receiver()
	b2.Receive(f, 0)
	if u2.n != 0 || b2.Stats.RxBadICV.Load() != 1 {
		t.Errorf("Receive of a corrupted wire frame: %d pushes, %d ICV drops; want 0, 1", u2.n, b2.Stats.RxBadICV.Load())
	}
}
