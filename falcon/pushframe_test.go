package falcon_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"falconnic/falcon"
	"falconnic/falcon/framebuf"
	"falconnic/falcon/link"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// frameULP records the pushes its target side receives and the frames its
// initiator side's completions give back.
type frameULP struct {
	pushes [][]byte
	back   map[uint64][]byte // cookie → Completion.Frame
	status map[uint64]tl.Status
}

func (u *frameULP) OnRequest(c *falcon.Conn, r *falcon.Request) {
	u.pushes = append(u.pushes, append([]byte(nil), r.Payload...))
	c.AckPush(r.RSN)
}

func (u *frameULP) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	u.back[cpl.Cookie], u.status[cpl.Cookie] = cpl.Frame, cpl.Status
	// The buffer is the ULP's again: scribble on it, as its next use would.
	for i := range cpl.Frame {
		cpl.Frame[i] = 0xAA
	}
}

func (*frameULP) OnXon(*falcon.Conn) {}

// newFrame is a PushFrame buffer: header room, payload, envelope capacity.
func newFrame(payload []byte) []byte {
	b := make([]byte, wire.PushDataHeaderLen, wire.PushDataHeaderLen+len(payload)+falcon.EnvelopeLen)
	return append(b, payload...)
}

// TestPushFrameLendsTheBuffer: PushFrame sends the ULP's buffer as the
// packet, intact through loss and reordering (resends come from it), and
// each completion hands the very buffer back; a frame without room for
// the header or the envelope is refused before anything is taken.
func TestPushFrameLendsTheBuffer(t *testing.T) {
	imp := link.MemConfig{Delay: time.Microsecond, Seed: 3, DropProb: 0.2, ReorderProb: 0.2, DupProb: 0.05}
	a := &frameULP{back: map[uint64][]byte{}, status: map[uint64]tl.Status{}}
	b := &frameULP{back: map[uint64][]byte{}, status: map[uint64]tl.Status{}}
	p, err := falcon.NewPair(falcon.PairConfig{AB: imp, BA: imp,
		Conn: falcon.ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1}, ULPA: a, ULPB: b})
	if err != nil {
		t.Fatal(err)
	}
	// Rounds of lent frames (cookies 0..n-1) between plain pushes, more
	// than the rings hold, so slots and transactions are reused.
	const n, round = 320, 32
	sent := map[uint64][]byte{}
	plain := uint64(0)
	for i := uint64(0); i < n; i++ {
		f := newFrame(bytes.Repeat([]byte(fmt.Sprint(i)), 100))
		sent[i] = f
		if _, err := p.CA.PushFrame(i, f); err != nil {
			t.Fatal(err)
		}
		for k := uint64(0); k < i%3; k++ { // 0-2 plain pushes: lent and plain ones share slots
			plain++
			if _, err := p.CA.Push(100000+plain, bytes.Repeat([]byte{'p'}, 200)); err != nil {
				t.Fatal(err)
			}
		}
		if i%round == round-1 {
			want := int(i+1) + int(plain)
			p.RunUntil(func() bool { return p.CA.Outstanding() == 0 && len(a.back) == want }, time.Second)
		}
	}
	short := make([]byte, wire.PushDataHeaderLen-1, 100)
	noRoom := make([]byte, wire.PushDataHeaderLen+10)
	for _, f := range [][]byte{short, noRoom} {
		if _, err := p.CA.PushFrame(9999, f); !errors.Is(err, falcon.ErrBadFrame) {
			t.Errorf("PushFrame of %d bytes (cap %d): %v, want ErrBadFrame", len(f), cap(f), err)
		}
	}
	p.RunUntil(func() bool { return false }, 50*time.Millisecond) // late resends, if any, would carry the scribbles
	if st := &p.B.Stats; st.RxParseLength.Load()+st.RxParseType.Load()+st.RxParseVersion.Load()+st.RxParseShort.Load()+st.RxUnknownCID.Load() != 0 {
		t.Errorf("target saw malformed packets: a buffer given back was sent from again")
	}
	if len(b.pushes) != n+int(plain) {
		t.Fatalf("target got %d pushes, want %d", len(b.pushes), n+int(plain))
	}
	got := map[string]bool{}
	for _, q := range b.pushes {
		got[string(q)] = true
	}
	for i := uint64(0); i < n; i++ {
		if !got[string(bytes.Repeat([]byte(fmt.Sprint(i)), 100))] {
			t.Errorf("push %d never arrived intact", i)
		}
		f := a.back[i]
		if a.status[i] != tl.CmplAck || len(f) == 0 || &f[0] != &sent[i][0] {
			t.Errorf("push %d: status %v, frame back %v", i, a.status[i], len(f) > 0 && &f[0] == &sent[i][0])
		} else if !bytes.Equal(f, bytes.Repeat([]byte{0xAA}, len(f))) {
			t.Errorf("push %d: Falcon wrote into the frame after giving it back", i)
		}
	}
	for k := uint64(1); k <= plain; k++ {
		if a.back[100000+k] != nil {
			t.Errorf("plain push %d completed with a frame", k)
		}
	}
	if p.CA.Stats.RetxRTO.Load()+p.CA.Stats.RetxEarly.Load()+p.CA.Stats.RetxRACK.Load()+p.CA.Stats.RetxTLP.Load() == 0 {
		t.Error("no retransmission: the loss did not exercise resends from the lent buffers")
	}
}

// refLink is an in-process link that takes frames by reference (RefLink)
// and delivers them in rounds, dropping every drop-th frame and holding
// every hold-th one back for 100 rounds (past the sender's RTO, so that it
// resends while the receiver has yet to read the shared buffer); a frame
// taken by reference must be unchanged when the receiver reads it.
type refLink struct {
	t                *testing.T
	to               *falcon.Endpoint
	queue            []refFrame
	drop, hold, n    int
	round            int
	refs, seen, held int
	keep             int // rounds a receiver holds a shared frame (SendShared)
	kept             []refFrame
	shared           int
	mems             map[*framebuf.Buf]bool
	payloadAt        int // where a shared frame's payload starts, to check it is on a page (0: unchecked)
}

type refFrame struct {
	b, snap []byte
	mem     *framebuf.Buf // SendShared: the link's reference
	due     int           // round it is delivered in
}

func (*refLink) InProcess() {}

func (l *refLink) Send(pkt []byte, _ uint32) {
	l.queue = append(l.queue, refFrame{b: append([]byte(nil), pkt...)})
}

func (l *refLink) SendRef(pkt []byte, _ uint32) {
	l.refs++
	l.queue = append(l.queue, refFrame{b: pkt, snap: append([]byte(nil), pkt...)})
}

// SendShared takes the frame in place with the sender's shared buffer; the
// receiver holds the link's reference for keep rounds after reading the
// frame (as the NVMe target keeps a Write Data Response for its write),
// and the frame must be unchanged until it lets go.
func (l *refLink) SendShared(pkt []byte, mem *framebuf.Buf, _ uint32) {
	l.shared++
	if l.mems == nil {
		l.mems = map[*framebuf.Buf]bool{}
	}
	l.mems[mem] = true
	if l.payloadAt > 0 && uintptr(unsafe.Pointer(&pkt[l.payloadAt]))%framebuf.Page != 0 {
		l.t.Error("a shared frame's payload does not start on a page")
	}
	l.queue = append(l.queue, refFrame{b: pkt, snap: append([]byte(nil), pkt...), mem: mem})
}

// letGo releases the shared frames whose keep is over (all of them when
// all), checking each is still as sent.
func (l *refLink) letGo(all bool) {
	q := l.kept
	l.kept = nil
	for _, f := range q {
		if !all && f.due > l.round {
			l.kept = append(l.kept, f)
			continue
		}
		if !bytes.Equal(f.b, f.snap) {
			l.t.Error("a shared frame changed while the receiver held it")
		}
		f.mem.Release()
	}
}

func (l *refLink) deliver() {
	defer l.letGo(false)
	l.round++
	q := l.queue
	l.queue = nil
	for _, f := range q {
		if f.due > l.round {
			l.queue = append(l.queue, f)
			continue
		}
		if f.due == 0 {
			if l.n++; l.drop > 0 && l.n%l.drop == 0 {
				if f.mem != nil {
					f.mem.Release()
				}
				continue
			}
			if l.hold > 0 && l.n%l.hold == 0 && f.snap != nil {
				f.due = l.round + 100
				l.held++
				l.queue = append(l.queue, f)
				continue
			}
		}
		if f.snap != nil {
			l.seen++
			if !bytes.Equal(f.b, f.snap) {
				l.t.Error("a frame sent by reference changed before the receiver read it")
			}
		}
		l.to.ReceiveInProcess(f.b, 0)
		if f.mem != nil {
			f.due = l.round + l.keep
			l.kept = append(l.kept, f)
		}
	}
}

// refPair is two endpoints on a manual clock joined by a refLink each way,
// with one connection from a to b.
type refPair struct {
	clk    *clock.Manual
	ea, eb *falcon.Endpoint
	ab, ba *refLink
	ca     *falcon.Conn
}

func newRefPair(t *testing.T, ab, ba *refLink, ua, ub falcon.ULP) *refPair {
	return newLinkPair(t, ab, ba, ab, ba, ua, ub)
}

// newLinkPair is newRefPair with the endpoints sending on la and lb, which
// pass their frames to ab and ba (a plainLink: they never go by reference).
func newLinkPair(t *testing.T, ab, ba *refLink, la, lb falcon.Link, ua, ub falcon.ULP) *refPair {
	p := &refPair{clk: clock.NewManual(0), ab: ab, ba: ba}
	p.ea = falcon.New(falcon.Config{Clock: p.clk, Link: la, ULP: ua})
	p.eb = falcon.New(falcon.Config{Clock: p.clk, Link: lb, ULP: ub})
	ab.to, ba.to = p.eb, p.ea
	cc := falcon.ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1}
	var err error
	if p.ca, err = p.ea.Connect(cc); err != nil {
		t.Fatal(err)
	}
	if _, err := p.eb.Connect(falcon.Mirror(cc)); err != nil {
		t.Fatal(err)
	}
	return p
}

// settle runs delivery rounds 20 µs apart, timers included, until a's
// connection has nothing outstanding and nothing is queued or held on
// either link (at most rounds rounds).
func (p *refPair) settle(rounds int) {
	for r := 0; r < rounds && (p.ca.Outstanding() > 0 || len(p.ab.queue)+len(p.ba.queue)+len(p.ab.kept)+len(p.ba.kept) > 0); r++ {
		p.ab.deliver()
		p.ba.deliver()
		p.clk.Advance(20 * time.Microsecond)
		p.ea.OnTimer(p.clk.Now())
		p.eb.OnTimer(p.clk.Now())
	}
}

// TestPushFrameByReference: over a RefLink a PushFrame packet's first
// transmission goes by reference and its buffer comes back on
// acknowledgement untouched until the receiver read it; a packet that had
// to be resent goes again from a copy, and its shared buffer is not given
// back (the receiver may still hold it).
func TestPushFrameByReference(t *testing.T) {
	a, b := &frameULP{back: map[uint64][]byte{}, status: map[uint64]tl.Status{}}, &frameULP{back: map[uint64][]byte{}, status: map[uint64]tl.Status{}}
	p := newRefPair(t, &refLink{t: t, drop: 7, hold: 5}, &refLink{t: t}, a, b)
	ab, ca := p.ab, p.ca
	const n = 200
	sent := map[uint64][]byte{}
	for i := uint64(0); i < n; i++ {
		sent[i] = newFrame(bytes.Repeat([]byte{byte(i)}, 64+int(i)))
		if _, err := ca.PushFrame(i, sent[i]); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 { // a plain push now and then shares the slots
			if _, err := ca.Push(1000+i, []byte("plain")); err != nil {
				t.Fatal(err)
			}
		}
		if i%16 == 15 || i == n-1 {
			p.settle(2000)
		}
	}
	got := map[string]bool{}
	for _, q := range b.pushes {
		got[string(q)] = true
	}
	back, kept := 0, 0
	for i := uint64(0); i < n; i++ {
		if !got[string(bytes.Repeat([]byte{byte(i)}, 64+int(i)))] || a.status[i] != tl.CmplAck {
			t.Fatalf("push %d: arrived %v, status %v", i, got[string(bytes.Repeat([]byte{byte(i)}, 64+int(i)))], a.status[i])
		}
		switch f := a.back[i]; {
		case f == nil:
			kept++
		case &f[0] != &sent[i][0]:
			t.Errorf("push %d: another buffer came back", i)
		default:
			back++
		}
	}
	copied := ca.Stats.SharedCopied.Load()
	if ab.refs != n || ab.seen == 0 || ab.held == 0 || copied == 0 || uint64(kept) != copied || back+kept != n {
		t.Errorf("%d sent by reference (want %d), %d read, %d held back; %d copied for a resend, %d buffers kept, %d given back",
			ab.refs, n, ab.seen, ab.held, copied, kept, back)
	}
}
