package verbs

import (
	"testing"
	"time"

	"falconnic/internal/clock"
)

// hookMem is guest memory whose Swap32 lets a test run the driver between
// the NIC's decision to store and the store itself (beforeSwap), the way
// another vCPU's post interleaves with the NIC.
type hookMem struct {
	*FlatMemory
	beforeSwap func(gpa uint64, new uint32)
	swaps      int
}

func (m *hookMem) Swap32(gpa uint64, new uint32) (uint32, error) {
	m.swaps++
	if f := m.beforeSwap; f != nil {
		f(gpa, new)
	}
	return m.FlatMemory.Swap32(gpa, new)
}

// pollWorld is an RC pair whose NIC A polls doorbells on the pair's
// clock; its guest's driver rings only while A's flag reads 0.
type pollWorld struct {
	*world
	qa, qb   *qpEnds
	mem      *hookMem
	src, dst buf
	rang     int // DB_SQ frames the driver sent
	posts    int
}

func newPollWorld(t *testing.T, on bool) *pollWorld {
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	pw := &pollWorld{world: w, qa: qa, qb: qb, mem: &hookMem{FlatMemory: w.ga.mem}}
	w.a.cfg.Clock = w.p.Clock
	w.a.SetMemory(pw.mem)
	w.a.SetPolling(PollConfig{On: on})
	pw.src = w.ga.reg(1, 64, AccessLocalWrite)
	pw.dst = w.gb.reg(1, 64, rwAll)
	return pw
}

// flag reads A's polling flag for QP 16 as the driver does.
func (pw *pollWorld) flag() uint32 { return pw.qa.sq.u32(SQPollFlagOff) }

// post is the driver's fnic_post_send: the WQE and the producer index,
// then (after a full barrier) the flag; DB_SQ only while it reads 0.
func (pw *pollWorld) post(id uint64) {
	pw.posts++
	pw.qa.putSend(wqe{id: id, op: WRWrite, raddr: pw.dst.va, rkey: pw.dst.rkey, sges: []buf{pw.src}})
	if pw.flag() == 0 {
		pw.rang++
		pw.w().a.KickSQ(16)
	}
}

func (pw *pollWorld) w() *world { return pw.world }

// run moves the pair and both engines' polls in time order until nothing
// is pending, calling each (if set) after every step: each returns its own
// next deadline, if it has one.
func (pw *pollWorld) run(each func() (time.Duration, bool)) {
	w := pw.world
	p := w.p
	for range 1_000_000 {
		now := p.Clock.Now()
		p.B.BeginBurst()
		n := p.AB.Poll(p.B.Receive)
		p.B.EndBurst()
		p.A.BeginBurst()
		n += p.BA.Poll(p.A.Receive)
		p.A.EndBurst()
		p.A.OnTimer(now)
		p.B.OnTimer(now)
		for _, e := range []*Engine{w.a, w.b} {
			if at, ok := e.NextDeadline(); ok && at <= now {
				e.OnTimer(now)
			}
		}
		next, ok := time.Duration(0), false
		if each != nil {
			next, ok = each()
		}
		if n > 0 {
			continue
		}
		for _, f := range []func() (time.Duration, bool){p.AB.NextDue, p.BA.NextDue, p.A.NextDeadline,
			p.B.NextDeadline, w.a.NextDeadline, w.b.NextDeadline} {
			if at, has := f(); has && (!ok || at < next) {
				next, ok = at, true
			}
		}
		if !ok {
			return
		}
		p.Clock.Set(max(next, now+1))
	}
	w.t.Fatal("run: no end")
}

// checkWCs asserts A's send CQ holds n successful CQEs.
func (pw *pollWorld) checkWCs(n int) {
	pw.w().t.Helper()
	wcs := pw.qa.scq.poll()
	if len(wcs) != n {
		pw.w().t.Fatalf("%d CQEs, want %d", len(wcs), n)
	}
	for _, wc := range wcs {
		if wc.Status() != WCSuccess {
			pw.w().t.Fatalf("CQE %d: %v", wc.WRID(), wc.Status())
		}
	}
}

// idle asserts A polls nothing and the flag is 0.
func (pw *pollWorld) idle() {
	t := pw.w().t
	t.Helper()
	if pw.w().a.Polling() || pw.flag() != 0 {
		t.Fatalf("after the window: polling %v, flag %d", pw.w().a.Polling(), pw.flag())
	}
	if _, ok := pw.w().a.NextDeadline(); ok {
		t.Fatal("a poll is still scheduled")
	}
}

func TestPollPostsAfterTheFirstNeedNoDoorbell(t *testing.T) {
	pw := newPollWorld(t, true)
	pw.post(1)
	if pw.rang != 1 || pw.flag() != 1 || !pw.a.Polling() {
		t.Fatalf("first post: rang %d, flag %d, polling %v", pw.rang, pw.flag(), pw.a.Polling())
	}
	// Posts while the flag is set: no doorbell, a poll finds them.
	for i := range 20 {
		pw.post(uint64(2 + i))
	}
	pw.run(nil)
	pw.checkWCs(21)
	if pw.rang != 1 {
		t.Fatalf("%d doorbells for 21 posts, want 1", pw.rang)
	}
	pw.idle()
	s := &pw.a.Stats
	if s.PollFound.Load() == 0 || s.PollWindowsExpired.Load() == 0 || s.PollFlagClears.Load() == 0 {
		t.Fatalf("found %d expired %d clears %d", s.PollFound.Load(), s.PollWindowsExpired.Load(), s.PollFlagClears.Load())
	}
}

// A latency loop: each post follows the previous completion after a
// think time; the window learns the gap and the polls take the posts.
func TestPollLatencyLoopLearnsTheGap(t *testing.T) {
	pw := newPollWorld(t, true)
	const n, think = 40, 30 * time.Microsecond
	var due time.Duration
	pending := false
	pw.post(0)
	pw.run(func() (time.Duration, bool) {
		now := pw.p.Clock.Now()
		if !pending && pw.qa.scq.prod() != pw.qa.scq.cons() {
			pw.checkWCs(1)
			if pw.posts < n {
				pending, due = true, now+think
			}
		}
		if pending && now >= due {
			pending = false
			pw.post(uint64(pw.posts))
		}
		return due, pending
	})
	if pw.posts != n {
		t.Fatalf("%d posts done", pw.posts)
	}
	// The first post rings, and the second (the first window is shorter
	// than the round trip plus think time); then the window has learnt
	// the gap and the polls take the posts.
	if pw.rang != 2 || pw.a.Stats.PollFound.Load() != n-2 {
		t.Fatalf("%d doorbells, %d posts found by polls, for %d posts", pw.rang, pw.a.Stats.PollFound.Load(), n)
	}
	if pw.a.Stats.PollStarvedOff.Load() != 0 {
		t.Fatal("starved on a manual clock")
	}
	pw.idle()
}

// The race the re-check is for: the driver stores its producer index and
// reads the flag (1, no doorbell) just before the NIC stores 0.
func TestPollRecheckCatchesAPostThatRacedTheClear(t *testing.T) {
	pw := newPollWorld(t, true)
	pw.post(1)
	raced := false
	pw.mem.beforeSwap = func(gpa uint64, v uint32) {
		if v == 0 && !raced {
			raced = true
			pw.post(2) // reads flag 1: no doorbell
		}
	}
	pw.run(nil)
	if !raced {
		t.Fatal("the window never closed")
	}
	pw.checkWCs(2)
	if pw.rang != 1 || pw.a.Stats.PollRecheckFound.Load() != 1 {
		t.Fatalf("rang %d, recheck found %d", pw.rang, pw.a.Stats.PollRecheckFound.Load())
	}
	pw.idle()
}

// A post right after the NIC stored 0 reads 0 and rings: the doorbell
// path works again (and the re-check may take the WQE first).
func TestPollPostAfterClearRings(t *testing.T) {
	pw := newPollWorld(t, true)
	pw.post(1)
	pw.run(nil)
	pw.idle()
	sets := pw.a.Stats.PollFlagSets.Load()
	pw.post(2)
	if pw.rang != 2 {
		t.Fatalf("post after the window: rang %d, want 2", pw.rang)
	}
	if pw.a.Stats.PollFlagSets.Load() != sets+1 {
		t.Fatal("the doorbell's drain did not set the flag")
	}
	pw.run(nil)
	pw.checkWCs(2)
	pw.idle()
	// The same, racing the other way: the driver stores and reads the
	// flag right after the NIC's store of 0.
	var ring bool
	pw.mem.beforeSwap = nil
	pw.post(3)
	pw.mem.beforeSwap = func(gpa uint64, v uint32) {
		if v == 0 && !ring {
			ring = true
			pw.mem.beforeSwap = nil
			_, _ = pw.mem.FlatMemory.Swap32(gpa, 0)
			pw.post(4) // reads 0 and rings
		}
	}
	pw.run(nil)
	pw.checkWCs(2)
	pw.idle()
}

func TestPollOffNeverWritesTheFlag(t *testing.T) {
	pw := newPollWorld(t, false)
	for i := range 5 {
		pw.post(uint64(i))
		pw.run(nil)
	}
	pw.checkWCs(5)
	if pw.rang != 5 || pw.mem.swaps != 0 || pw.flag() != 0 || pw.a.Stats.PollFlagSets.Load() != 0 {
		t.Fatalf("rang %d swaps %d flag %d", pw.rang, pw.mem.swaps, pw.flag())
	}
	if pw.a.Polling() {
		t.Fatal("polling while off")
	}
}

// A guest that scribbles on its ring hurts only its own QP, and each oddity
// is counted.
func TestPollHostileRing(t *testing.T) {
	pw := newPollWorld(t, true)
	pw.post(1)
	pw.qa.sq.setU32(SQPollFlagOff, 0) // the guest clears the NIC's flag
	pw.post(2)                        // and so rings while the NIC polls
	if pw.a.Stats.PollDoorbellFlagSet.Load() != 1 {
		t.Fatalf("doorbell while set: %d", pw.a.Stats.PollDoorbellFlagSet.Load())
	}
	pw.run(nil)
	pw.checkWCs(2)
	if pw.a.Stats.PollFlagForeign.Load() == 0 {
		t.Fatal("overwritten flag not counted")
	}
	pw.qa.sq.setU32(SQPollFlagOff, 7) // and sets it while the NIC does not
	pw.qa.sq.setU32(SQPollFlagOff, 0)
	// A garbage producer index while the window is open.
	pw.post(3)
	pw.qa.sq.setU32(ringProducerOff, 0xdeadbeef)
	pw.run(nil)
	for range 3 {
		pw.qa.sq.setU32(ringProducerOff, 0xffffffff)
		pw.a.KickSQ(16)
		pw.run(nil)
	}
	pw.qa.scq.poll()
	if st, _ := pw.a.State(16); st != QPSErr && st != QPSRTS {
		t.Fatalf("state %v", st)
	}
	pw.idle()
}

func TestPollDestroyResetErrorStopPolling(t *testing.T) {
	for _, c := range []struct {
		name string
		do   func(pw *pollWorld)
	}{
		{"destroy", func(pw *pollWorld) {
			if err := pw.a.DestroyQP(16); err != nil {
				pw.w().t.Fatal(err)
			}
		}},
		{"reset", func(pw *pollWorld) {
			if err := pw.a.ModifyQP(16, QPAttr{Mask: AttrState, State: QPSReset}); err != nil {
				pw.w().t.Fatal(err)
			}
		}},
		{"error", func(pw *pollWorld) {
			if err := pw.a.ModifyQP(16, QPAttr{Mask: AttrState, State: QPSErr}); err != nil {
				pw.w().t.Fatal(err)
			}
		}},
		{"engine reset", func(pw *pollWorld) { pw.a.Reset() }},
		{"polling off", func(pw *pollWorld) { pw.a.SetPolling(PollConfig{}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			pw := newPollWorld(t, true)
			pw.post(1)
			if !pw.a.Polling() {
				t.Fatal("no window")
			}
			c.do(pw)
			if pw.a.Polling() {
				t.Fatal("still polling")
			}
			if _, ok := pw.a.NextDeadline(); ok {
				t.Fatal("a poll still scheduled")
			}
			if c.name != "engine reset" && pw.flag() != 0 {
				t.Fatalf("flag %d", pw.flag())
			}
			pw.run(nil)
			if c.name == "error" {
				// Posts to the QP in ERR ring and flush.
				pw.qa.scq.poll()
				pw.post(9)
				if pw.rang != 2 {
					t.Fatalf("post in ERR: rang %d", pw.rang)
				}
				wcs := pw.qa.scq.poll()
				if len(wcs) != 1 || wcs[0].Status() != WCFlushErr {
					t.Fatalf("post in ERR: %d CQEs", len(wcs))
				}
			}
		})
	}
}

// A QP in SQD keeps its flag (MODIFY_QP to RTS drains what was posted).
func TestPollSQDResumesOnRTS(t *testing.T) {
	pw := newPollWorld(t, true)
	pw.post(1)
	if err := pw.a.ModifyQP(16, QPAttr{Mask: AttrState, State: QPSSQD}); err != nil {
		t.Fatal(err)
	}
	pw.post(2) // flag 1: no doorbell
	pw.run(nil)
	pw.checkWCs(1)
	if pw.a.Polling() || pw.flag() != 1 || pw.rang != 1 {
		t.Fatalf("SQD: polling %v flag %d rang %d", pw.a.Polling(), pw.flag(), pw.rang)
	}
	if err := pw.a.ModifyQP(16, QPAttr{Mask: AttrState, State: QPSRTS}); err != nil {
		t.Fatal(err)
	}
	pw.run(nil)
	pw.checkWCs(1)
	pw.idle()
}

func TestPollStarvedSwitchesOff(t *testing.T) {
	pw := newPollWorld(t, true)
	// The owner runs polls far too late: one or two are a preemption, the
	// third within 10 ms is starvation.
	latePoll := func(id uint64) {
		pw.post(id)
		at, ok := pw.a.NextDeadline()
		if !ok {
			t.Fatal("no poll scheduled")
		}
		late := at + DefaultPollLate + time.Microsecond
		pw.p.Clock.Set(late)
		pw.a.OnTimer(late)
	}
	latePoll(1)
	latePoll(2)
	if pw.a.Stats.PollLate.Load() != 2 || pw.a.Stats.PollStarvedOff.Load() != 0 {
		t.Fatalf("late %d starved %d", pw.a.Stats.PollLate.Load(), pw.a.Stats.PollStarvedOff.Load())
	}
	latePoll(3)
	if pw.a.Stats.PollStarvedOff.Load() != 1 || pw.a.Polling() || pw.flag() != 0 {
		t.Fatalf("starved %d polling %v flag %d", pw.a.Stats.PollStarvedOff.Load(), pw.a.Polling(), pw.flag())
	}
	pw.run(nil)
	pw.checkWCs(3)
	sets, rang := pw.a.Stats.PollFlagSets.Load(), pw.rang
	pw.post(4) // the driver rings; the NIC does not set the flag
	pw.run(nil)
	pw.checkWCs(1)
	if pw.rang != rang+1 || pw.a.Stats.PollFlagSets.Load() != sets {
		t.Fatalf("while off: rang %d→%d flag sets %d→%d", rang, pw.rang, sets, pw.a.Stats.PollFlagSets.Load())
	}
	// After the back-off it polls again.
	pw.p.Clock.Advance(pollBackoffMin)
	pw.post(5)
	if pw.flag() != 1 {
		t.Fatal("polling did not come back")
	}
	pw.run(nil)
	pw.checkWCs(1)
	pw.idle()
}

// postPair posts id, then id+1 gap after the drain of id found the SQ
// empty, and runs until nothing is pending; it returns the window,
// whether A polls and the flag right after the second post.
func (pw *pollWorld) postPair(id uint64, gap time.Duration) (win time.Duration, polling bool, flag uint32) {
	qp := pw.a.qps[16]
	pw.post(id)
	at := qp.poll.emptyAt + gap
	done := false
	pw.run(func() (time.Duration, bool) {
		if !done && pw.p.Clock.Now() >= at {
			done = true
			pw.post(id + 1)
			win, polling, flag = qp.poll.win, pw.a.Polling(), pw.flag()
		}
		return at, !done
	})
	if !done {
		pw.w().t.Fatal("postPair: never posted")
	}
	pw.checkWCs(2)
	return win, polling, flag
}

func TestPollWindowAdapts(t *testing.T) {
	pw := newPollWorld(t, true)
	qp := pw.a.qps[16]
	c := pw.a.PollingConfig()
	if qp.poll.win != c.initWindow() {
		t.Fatalf("first window %v", qp.poll.win)
	}
	// The first window ends empty (halved to 8 µs); a doorbell 40 µs
	// after the SQ went empty grows it to 80 µs.
	if win, _, _ := pw.postPair(1, 40*time.Microsecond); win != 80*time.Microsecond {
		t.Fatalf("after a 40 µs gap %v", win)
	}
	// That window ended empty too (halved to 40 µs): a post 30 µs after
	// the SQ went empty lands inside the next one, and a poll takes it.
	if pw.a.Stats.PollWindowsExpired.Load() != 2 || qp.poll.win != 40*time.Microsecond {
		t.Fatalf("expired %d window %v", pw.a.Stats.PollWindowsExpired.Load(), qp.poll.win)
	}
	if _, polling, flag := pw.postPair(3, 30*time.Microsecond); !polling || flag != 1 {
		t.Fatalf("post inside the window: polling %v flag %d", polling, flag)
	}
	if pw.rang != 3 || pw.a.Stats.PollFound.Load() != 1 {
		t.Fatalf("rang %d found %d", pw.rang, pw.a.Stats.PollFound.Load())
	}
	// Never past the cap.
	if win, _, _ := pw.postPair(5, c.WindowCap-time.Microsecond); win != c.WindowCap {
		t.Fatalf("window %v over the cap %v", win, c.WindowCap)
	}
	// Windows without posts switch the SQ's window off.
	for i := 0; qp.poll.win != 0; i++ {
		if i > pollIdleWindows {
			t.Fatalf("window %v after %d empty windows", qp.poll.win, i)
		}
		pw.postPair(uint64(10+2*i), 2*c.WindowCap)
	}
	if pw.a.Stats.PollIdleOff.Load() != 1 {
		t.Fatalf("idle off %d", pw.a.Stats.PollIdleOff.Load())
	}
	// Off: the drain clears the flag at once; a post close behind the
	// last one turns the window on again.
	started := pw.a.Stats.PollWindowsStarted.Load()
	if _, polling, flag := pw.postPair(100, 2*c.WindowCap); polling || flag != 0 || pw.a.Stats.PollWindowsStarted.Load() != started {
		t.Fatal("a window opened while off")
	}
	if win, polling, _ := pw.postPair(102, 10*time.Microsecond); !polling || win != 20*time.Microsecond {
		t.Fatalf("window %v polling %v after a 10 µs gap", win, polling)
	}
	pw.idle()
}

// BenchmarkPollIdle is one poll of an SQ that has nothing posted: the
// cost of each poll of an open window.
func BenchmarkPollIdle(b *testing.B) {
	g := newGuest(&testing.T{}, 1<<20)
	clk := clock.NewManual(time.Second)
	e := New(Config{Mem: g.mem, Clock: clk})
	g.e = e
	e.SetPolling(PollConfig{On: true})
	if err := e.CreatePD(1); err != nil {
		b.Fatal(err)
	}
	q := g.makeQP(16, 1, QPTypeRC, 0)
	qp := e.qps[16]
	qp.state = QPSRTS
	qp.poll.flag = true
	e.sqEmpty(qp, true)
	qp.poll.until = 1 << 62
	every := e.PollingConfig().Every
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clk.Advance(every)
		e.OnTimer(clk.Now())
	}
	b.StopTimer()
	if !e.Polling() || e.Stats.Polls.Load() != uint64(b.N) || q.sq.prod() != 0 {
		b.Fatalf("polling %v polls %d", e.Polling(), e.Stats.Polls.Load())
	}
}

// FuzzPollGuestScribbles drives a polling NIC with a guest that posts,
// rings, and writes whatever it likes into its SQ's producer index and
// polling flag, interleaved with the NIC's polls, the transport and state
// changes: the engine must never panic, and it stops polling once nothing
// is pending.
func FuzzPollGuestScribbles(f *testing.F) {
	f.Add([]byte{0, 3, 2, 0, 0, 0, 0, 0, 3, 5, 6})
	f.Add([]byte{0, 1, 0xef, 0xbe, 0xad, 0xde, 3, 40, 4, 6, 0})
	f.Add([]byte{0, 2, 7, 0, 0, 0, 3, 200, 0, 5, 1, 6})
	f.Add([]byte{0, 0, 0, 3, 1, 3, 250, 3, 250, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		pw := newPollWorld(t, true)
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		for steps := 0; len(ops) > 0 && steps < 64; steps++ {
			switch next() % 7 {
			case 0:
				if !pw.qa.sq.full() {
					pw.post(uint64(steps))
				}
			case 1:
				pw.qa.sq.setU32(ringProducerOff, uint32(next())|uint32(next())<<8|uint32(next())<<16|uint32(next())<<24)
			case 2:
				pw.qa.sq.setU32(SQPollFlagOff, uint32(next())|uint32(next())<<8|uint32(next())<<16|uint32(next())<<24)
			case 3:
				now := pw.p.Clock.Now() + time.Duration(next())*time.Microsecond
				pw.p.Clock.Set(now)
				if at, ok := pw.a.NextDeadline(); ok && at <= now {
					pw.a.OnTimer(now)
				}
			case 4:
				pw.a.KickSQ(16)
			case 5:
				st := []QPState{QPSErr, QPSReset, QPSSQD, QPSRTS}[next()%4]
				_ = pw.a.ModifyQP(16, QPAttr{Mask: AttrState, State: st})
			case 6:
				pw.run(nil)
				pw.qa.scq.poll()
			}
		}
		pw.run(nil)
		pw.qa.scq.poll()
		if pw.a.Polling() {
			t.Fatal("still polling when nothing is pending")
		}
	})
}

// A kernel QP the driver re-creates over its old rings after the NIC
// restarted finds the flag as the old NIC left it: CREATE_QP stores 0, so
// the driver rings again, whether or not the new NIC polls.
func TestPollCreateQPClearsAStaleFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		g := newGuest(t, 1<<20)
		e := New(Config{Mem: g.mem, Clock: clock.NewManual(time.Second)})
		g.e = e
		e.SetPolling(PollConfig{On: on})
		if err := e.CreatePD(1); err != nil {
			t.Fatal(err)
		}
		q := g.makeQP(16, 1, QPTypeRC, 0)
		if err := e.DestroyQP(16); err != nil { // the QP is lost with the NIC
			t.Fatal(err)
		}
		q.sq.setU32(SQPollFlagOff, 1) // the old NIC was draining it
		spec := QPSpec{H: 16, PD: 1, SendCQ: 161, RecvCQ: 162, Type: QPTypeRC, SQ: q.sq.spec, RQ: q.rq.spec}
		if err := e.CreateQP(spec); err != nil {
			t.Fatal(err)
		}
		if q.sq.u32(SQPollFlagOff) != 0 || e.Stats.PollFlagForeign.Load() != 1 {
			t.Fatalf("polling %v: flag %d after CREATE_QP, foreign %d", on, q.sq.u32(SQPollFlagOff), e.Stats.PollFlagForeign.Load())
		}
	}
}
