package falcon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// recULP is a test ULP: it logs every callback into a shared transcript and
// answers requests through a per-test policy.
type recULP struct {
	name  string
	log   *[]string
	onReq func(c *Conn, r *Request)
	onCpl func(c *Conn, cpl *Completion)
	cpls  []Completion
	xon   int
}

func (u *recULP) OnRequest(c *Conn, r *Request) {
	if u.log != nil {
		*u.log = append(*u.log, fmt.Sprintf("%s: deliver %v rsn=%d len=%d", u.name, r.Kind, r.RSN, max(len(r.Payload), int(r.Length))))
	}
	if u.onReq != nil {
		u.onReq(c, r)
	}
}

func (u *recULP) OnCompletion(c *Conn, cpl *Completion) {
	if u.log != nil {
		*u.log = append(*u.log, fmt.Sprintf("%s: complete %v rsn=%d %v len=%d", u.name, cpl.Kind, cpl.RSN, cpl.Status, len(cpl.Data)))
	}
	cp := *cpl
	cp.Data = append([]byte(nil), cpl.Data...)
	u.cpls = append(u.cpls, cp)
	if u.onCpl != nil {
		u.onCpl(c, cpl)
	}
}

func (u *recULP) OnXon(c *Conn) { u.xon++ }

// script is a hand-driven link for the reference flows: frames queue until
// the test delivers, reorders or loses them, and every delivery or loss
// becomes one transcript line.
type script struct {
	t      *testing.T
	clk    *clock.Manual
	a, b   *Endpoint
	ca, cb *Conn
	ua, ub *recULP
	q      []frame
	log    []string
	// autoLose, when set, loses matching frames as they are sent.
	autoLose func(dir, desc string) bool
}

type frame struct {
	dir  string // "A→B" or "B→A"
	data []byte
}

type scriptLink struct {
	s   *script
	dir string
}

func (l scriptLink) Send(pkt []byte, flow uint32) {
	f := frame{dir: l.dir, data: append([]byte(nil), pkt...)}
	if l.s.autoLose != nil && l.s.autoLose(f.dir, Describe(f.data[:len(f.data)-envelopeLen])) {
		l.s.log = append(l.s.log, l.s.line(f, true))
		return
	}
	l.s.q = append(l.s.q, f)
}

func newScript(t *testing.T, cc ConnConfig) *script {
	s := &script{t: t, clk: clock.NewManual(time.Millisecond)}
	s.ua = &recULP{name: "A", log: &s.log}
	s.ub = &recULP{name: "B", log: &s.log}
	s.a = New(Config{Clock: s.clk, Link: scriptLink{s, "A→B"}, ULP: s.ua})
	s.b = New(Config{Clock: s.clk, Link: scriptLink{s, "B→A"}, ULP: s.ub})
	var err error
	if s.ca, err = s.a.Connect(cc); err != nil {
		t.Fatal(err)
	}
	if s.cb, err = s.b.Connect(Mirror(cc)); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *script) line(f frame, lost bool) string {
	b, _, ok := open(f.data)
	if !ok {
		s.t.Fatalf("frame fails its ICV")
	}
	mark := ""
	if lost {
		mark = " (lost)"
	}
	return f.dir + " " + Describe(b) + mark
}

// take removes queued frame i (0 = oldest).
func (s *script) take(i int) frame {
	if i >= len(s.q) {
		s.t.Fatalf("no queued frame %d (queue %d); transcript so far:\n%s", i, len(s.q), strings.Join(s.log, "\n"))
	}
	f := s.q[i]
	s.q = append(s.q[:i], s.q[i+1:]...)
	return f
}

// deliver hands queued frame i to its receiver.
func (s *script) deliver(i int) {
	f := s.take(i)
	s.log = append(s.log, s.line(f, false))
	if strings.HasPrefix(f.dir, "A") {
		s.b.Receive(f.data, 0)
	} else {
		s.a.Receive(f.data, 0)
	}
}

// lose drops queued frame i.
func (s *script) lose(i int) {
	f := s.take(i)
	s.log = append(s.log, s.line(f, true))
}

// flushAll delivers queued frames (including ones sent meanwhile) in order.
func (s *script) flushAll() {
	for len(s.q) > 0 {
		s.deliver(0)
	}
}

// wait advances the clock by d, running the endpoints' timers as they fall
// due (frames they send stay queued).
func (s *script) wait(d time.Duration) {
	end := s.clk.Now() + d
	for spins := 0; spins < 10000; spins++ {
		next, ok := end, false
		for _, e := range []*Endpoint{s.a, s.b} {
			if t, has := e.NextDeadline(); has && t <= end && (!ok || t < next) {
				next, ok = t, true
			}
		}
		if !ok {
			s.clk.Set(end)
			return
		}
		s.clk.Set(next)
		s.a.OnTimer(next)
		s.b.OnTimer(next)
	}
	s.t.Fatal("timers do not settle")
}

// pushAcked sends one push from A and delivers it and its coalesced ACK:
// A then has an 8 µs RTT sample, so its PTO is the 50 µs floor.
func (s *script) pushAcked(cookie uint64) {
	s.ca.Push(cookie, nil)
	s.deliver(0)
	s.wait(10 * time.Microsecond)
	s.deliver(0)
	s.flushAll()
}

// settle delivers everything and lets ACK coalescing timers fire until
// the link is quiet.
func (s *script) settle() {
	for i := 0; i < 20; i++ {
		s.flushAll()
		s.wait(20 * time.Microsecond)
		if len(s.q) == 0 {
			return
		}
	}
	s.t.Fatal("script did not settle")
}

func (s *script) check(want string) {
	s.t.Helper()
	got := strings.Join(s.log, "\n")
	want = strings.TrimSpace(want)
	if got != want {
		s.t.Errorf("transcript mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
}

func pattern(rsn wire.RSN, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(uint32(rsn)*7 + uint32(i))
	}
	return b
}

var _ = tl.Push

// mostUntilDone delivers frames (or lets 10 µs pass when none is queued)
// until A's ULP has n completions, and returns the largest value of
// gauge seen on the way; it fails the test after 10,000 steps.
func (s *script) mostUntilDone(n int, gauge func() int) int {
	s.t.Helper()
	most := 0
	for step := 0; len(s.ua.cpls) < n; step++ {
		if step > 10000 {
			s.t.Fatalf("stalled: %d of %d transactions completed", len(s.ua.cpls), n)
		}
		most = max(most, gauge())
		if len(s.q) > 0 {
			s.deliver(0)
		} else {
			s.wait(10 * time.Microsecond)
		}
	}
	return most
}
