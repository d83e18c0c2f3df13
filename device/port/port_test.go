package port

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"falconnic/falcon"
	"falconnic/falcon/framebuf"
	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// TestPortEndpointReadsTheClockOncePerWorkItem: while the port handles a
// work item the endpoint sees one time however the clock moves; between
// items it sees the clock.
func TestPortEndpointReadsTheClockOncePerWorkItem(t *testing.T) {
	clk := clock.NewManual(time.Second)
	p := New(clk, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	var first, second time.Duration
	p.Call(func(ep *falcon.Endpoint) {
		first = ep.Now()
		clk.Advance(time.Millisecond)
		second = ep.Now()
	})
	if first != time.Second || second != first {
		t.Fatalf("inside one work item the endpoint saw %v then %v, want %v twice", first, second, time.Second)
	}
	var next time.Duration
	p.Call(func(ep *falcon.Endpoint) { next = ep.Now() })
	if next != time.Second+time.Millisecond {
		t.Fatalf("the next work item saw %v, want %v", next, time.Second+time.Millisecond)
	}
}

// TestFixedFirmwareKeepsEachConnectionsWindow: under the fixed firmware
// the port's RUE answers the events of a connection opened with an
// InitFcwnd (as NVMe's are) with that window and an RDMA connection's with
// the fixed RUE's default; a closed connection's window is forgotten.
func TestFixedFirmwareKeepsEachConnectionsWindow(t *testing.T) {
	p := New(clock.NewManual(0), nil)
	if err := p.UseFirmware(FirmwareSpec{Name: FirmwareFixed}); err != nil {
		t.Fatal(err)
	}
	nv, err := p.Connect(falcon.ConnConfig{SCID: 1, DCID: 2, Protocol: wire.ProtoNVMe, InitFcwnd: 128 * rue.One})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := p.Connect(falcon.ConnConfig{SCID: 3, DCID: 4, Protocol: wire.ProtoRDMA, Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ConnCounts(); got["nvme"] != 1 || got["rdma"] != 1 {
		t.Errorf("connections per protocol %v, want one each", got)
	}
	defer func() {
		if err := p.CloseConn(nv.SCID()); err != nil || len(p.windows) != 0 {
			t.Errorf("closing the NVMe connection: %v, windows left %v", err, p.windows)
		}
	}()
	r := p.rue
	for _, c := range []struct {
		conn *falcon.Conn
		want rue.Fixed
	}{{nv, 128 * rue.One}, {rd, 32 * rue.One}} {
		resp, ok := r.Handle(&rue.Event{Conn: c.conn.SCID(), Type: rue.EventACK})
		if !ok || resp.Fcwnd != c.want {
			t.Errorf("conn %d: fcwnd %v (ok %v), want %v", c.conn.SCID(), resp.Fcwnd, ok, c.want)
		}
	}
}

// TestPortLinkHandsOverABurstAtATime: the frames a port's endpoint sends
// during one work item reach the other port together, in order: after
// portEagerBurst frames if that port has no work queued, else at
// portBurstMax or at the end of the item; a full queue drops the burst
// and counts every frame.
func TestPortLinkHandsOverABurstAtATime(t *testing.T) {
	from := New(clock.NewManual(0), nil)
	to := &Port{work: make(chan portWork, 3), clk: clock.NewManual(0)} // not running: we look at its queue
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go from.Run(ctx)
	var link portLink
	from.Call(func(*falcon.Endpoint) { link = newPortLink(from, to) })
	total := portEagerBurst + portBurstMax + 3
	from.Call(func(*falcon.Endpoint) {
		for i := 0; i < total; i++ {
			link.Send([]byte{byte(i), byte(i >> 8)}, uint32(i))
			want := 0
			switch {
			case i+1 >= portEagerBurst+portBurstMax:
				want = 2
			case i+1 >= portEagerBurst:
				want = 1
			}
			if len(to.work) != want {
				t.Fatalf("after %d frames %d bursts were handed over, want %d", i+1, len(to.work), want)
			}
		}
	})
	for deadline := time.Now().Add(5 * time.Second); len(to.work) < 3; { // the item's end flushes the rest
		if time.Now().After(deadline) {
			t.Fatal("the rest of the burst was not handed over at the end of the work item")
		}
		time.Sleep(time.Millisecond)
	}
	var got, sizes []int
	for len(to.work) > 0 {
		w := <-to.work
		sizes = append(sizes, len(w.burst.frames))
		for _, f := range w.burst.frames {
			got = append(got, int(f.pkt[0])|int(f.pkt[1])<<8)
			if f.flow != uint32(got[len(got)-1]) {
				t.Fatalf("frame %d has flow %d", got[len(got)-1], f.flow)
			}
		}
	}
	if want := []int{portEagerBurst, portBurstMax, 3}; len(sizes) != 3 || sizes[0] != want[0] || sizes[1] != want[1] || sizes[2] != want[2] {
		t.Errorf("bursts of %v frames, want %v", sizes, want)
	}
	if len(got) != total {
		t.Fatalf("%d frames arrived, want %d", len(got), total)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("frame %d arrived as number %d", v, i)
		}
	}
	from.Call(func(*falcon.Endpoint) {
		for i := 0; i < 3*portBurstMax; i++ { // an eager burst, two full ones, then no room
			link.Send([]byte{1}, 0)
		}
	})
	// The rest goes at the end of the item, after Call returned.
	want := uint64(3*portBurstMax - portEagerBurst - 2*portBurstMax)
	for deadline := time.Now().Add(5 * time.Second); to.Stats.RxQueueFull.Load() < want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := to.Stats.RxQueueFull.Load(); n != want {
		t.Errorf("%d frames counted dropped, want %d", n, want)
	}
	if len(to.work) != 3 {
		t.Errorf("%d bursts queued, want 3", len(to.work))
	}
}

// TestPortLinkStampsFramesWhenTheyLeave: a burst's frames carry the time
// it is handed over as their IV (the t1 the peer echoes), not the time the
// endpoint built them, and arrive at that time: the burst's wait in the
// sending port is the sender's, so the fabric delay between two ports of
// one daemon stays zero.
func TestPortLinkStampsFramesWhenTheyLeave(t *testing.T) {
	clk := clock.NewManual(time.Second)
	from := New(clk, nil)
	to := &Port{work: make(chan portWork, 1), clk: clk} // not running: we look at its queue
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go from.Run(ctx)
	var link portLink
	from.Call(func(*falcon.Endpoint) { link = newPortLink(from, to) })
	built := wire.TimestampAt(clk.Now())
	left := time.Second + 3*time.Millisecond
	from.Call(func(*falcon.Endpoint) {
		link.Send(falcon.Envelope([]byte("first"), built), 0)
		clk.Set(left) // a long work item
		link.Send(falcon.Envelope([]byte("second"), wire.TimestampAt(left)), 0)
	})
	var w portWork
	select {
	case w = <-to.work:
	case <-time.After(5 * time.Second):
		t.Fatal("the burst was not handed over at the end of the work item")
	}
	if w.at != left {
		t.Errorf("the burst arrived at %v, want %v", w.at, left)
	}
	for i, f := range w.burst.frames {
		if _, iv, ok := falcon.SplitEnvelope(f.pkt); !ok || iv != wire.TimestampAt(left) {
			t.Errorf("frame %d: IV %v, want %v (the hand-over), not the build time %v", i, iv, wire.TimestampAt(left), built)
		}
	}
}

// TestCopyFrameEndsThePacketOnAPage: whatever the frame's length, its
// packet (the frame less the envelope) ends on a page of a pooled buffer, so whole pages of payload start on one; KeepFrame gives
// the buffer away only for data that lies in it.
func TestCopyFrameEndsThePacketOnAPage(t *testing.T) {
	largest := framebuf.LargeSize - framebuf.Page - 64 - falcon.EnvelopeLen
	for _, payload := range []int{0, 1, 512, 4095, 4096, 16 << 10, largest} {
		pkt := make([]byte, 64+payload+falcon.EnvelopeLen)
		for i := range pkt {
			pkt[i] = byte(i * 7)
		}
		frame, buf := copyFrame(pkt)
		if buf == nil || !bytes.Equal(frame, pkt) || !buf.Within(frame) {
			t.Fatalf("payload %d: frame not a copy in its pooled buffer", payload)
		}
		end := uintptr(unsafe.Pointer(&frame[0])) + uintptr(len(frame)-falcon.EnvelopeLen)
		if end%framebuf.Page != 0 {
			t.Errorf("payload %d: packet ends at %#x, not on a page", payload, end)
		}
		p := &Port{cur: buf}
		if p.KeepFrame(append([]byte(nil), frame...)) != nil {
			t.Fatalf("payload %d: kept a frame for data outside it", payload)
		}
		if got := p.KeepFrame(frame[64:]); got != buf || p.cur != nil || p.kept != 1 {
			t.Fatalf("payload %d: KeepFrame = %p, cur %p, kept %d", payload, got, p.cur, p.kept)
		}
		if p.KeepFrame(frame) != nil {
			t.Fatal("kept the same frame twice")
		}
		p.ReleaseFrame(buf)
	}
	big := make([]byte, 64+largest+falcon.EnvelopeLen+1)
	if frame, buf := copyFrame(big); buf != nil || len(frame) != len(big) {
		t.Fatal("an oversized frame went to a pooled buffer")
	}
}

// TestAdoptedPortRunsOnItsRunner: a port another port adopted gets its
// work, timers and end-of-burst work done by the runner's goroutine alone
// (its own Run only waits), frames between the two arrive, and once the
// runner stops neither takes work and the adopted port's Run returns.
func TestAdoptedPortRunsOnItsRunner(t *testing.T) {
	clk := clock.NewManual(time.Second)
	runner, adopted := New(clk, nil), New(clk, nil)
	runner.Adopt(adopted)
	idle := make(chan struct{}, 1)
	adopted.OnIdle(func() {
		select {
		case idle <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go runner.Run(ctx)
	adoptedDone := make(chan struct{})
	go func() { adopted.Run(context.Background()); close(adoptedDone) }()

	var seen *falcon.Endpoint
	if !adopted.Call(func(ep *falcon.Endpoint) { seen = ep }) || seen != adopted.ep {
		t.Fatalf("the adopted port's work ran on endpoint %p, want its own %p", seen, adopted.ep)
	}
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("the adopted port's end-of-burst work did not run")
	}
	fired := make(chan time.Duration, 1)
	adopted.Call(func(*falcon.Endpoint) {
		adopted.AddTimers(&oneTimer{at: clk.Now(), fired: fired})
	})
	select {
	case now := <-fired:
		if now != time.Second {
			t.Errorf("the adopted port's timer ran at %v, want %v", now, time.Second)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the adopted port's due timer did not run")
	}

	// A frame from the runner's endpoint reaches the adopted port's.
	var link portLink
	runner.Call(func(*falcon.Endpoint) { link = newPortLink(runner, adopted) })
	before := adopted.Stats.RxPackets.Load()
	runner.Call(func(*falcon.Endpoint) { link.Send([]byte{0xff}, 0) })
	for deadline := time.Now().Add(10 * time.Second); adopted.Stats.RxPackets.Load() == before; {
		if time.Now().After(deadline) {
			t.Fatal("a frame from the runner did not reach the adopted port")
		}
		time.Sleep(time.Millisecond)
	}

	cancel()
	select {
	case <-adoptedDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the adopted port's Run did not return when its runner stopped")
	}
	if adopted.Do(func(*falcon.Endpoint) {}) || runner.Do(func(*falcon.Endpoint) {}) {
		t.Fatal("a stopped port took work")
	}
}

// TestAdoptRejectsChains: an adopted port cannot adopt, nor a runner be adopted.
func TestAdoptRejectsChains(t *testing.T) {
	a, b, c := New(clock.NewManual(0), nil), New(clock.NewManual(0), nil), New(clock.NewManual(0), nil)
	a.Adopt(b)
	for name, f := range map[string]func(){"adopted adopts": func() { b.Adopt(c) }, "runner adopted": func() { c.Adopt(a) }, "itself": func() { c.Adopt(c) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Host did not panic", name)
				}
			}()
			f()
		}()
	}
}

// oneTimer is a ulpTimers with one deadline, reporting the time it ran.
type oneTimer struct {
	at    time.Duration
	done  bool
	fired chan time.Duration
}

func (o *oneTimer) NextDeadline() (time.Duration, bool) { return o.at, !o.done }
func (o *oneTimer) OnTimer(now time.Duration) {
	if !o.done {
		o.done = true
		o.fired <- now
	}
}

// TestPortHandlesQueuedWorkBeforeDueTimers: when the port's goroutine
// wakes with work queued and a timer due (the host did not run it for a
// while), the queued work — acknowledgements among it — runs first, so a
// retransmission timer never fires for what an ACK already waiting covers.
func TestPortHandlesQueuedWorkBeforeDueTimers(t *testing.T) {
	clk := clock.NewManual(time.Second)
	p := New(clk, nil) // not running: the test is its goroutine
	var order []string
	fired := make(chan time.Duration, 1)
	p.AddTimers(&oneTimer{at: clk.Now(), fired: fired})
	for i := 0; i < 3; i++ {
		if !p.Do(func(*falcon.Endpoint) { order = append(order, "work") }) {
			t.Fatal("the port refused work")
		}
	}
	due := clk.Now()
	clk.Advance(10 * time.Millisecond) // the goroutine slept past the deadline
	p.drainThenPass(due)
	select {
	case <-fired:
		order = append(order, "timer")
	default:
		t.Fatal("the due timer did not run")
	}
	if want := "work work work timer"; strings.Join(order, " ") != want {
		t.Fatalf("ran %v, want %s", order, want)
	}
}

// pushedOnAPort returns a port on a manual clock that the test runs (no
// goroutine), resuming stalls or not, with a connection that has one push
// in flight, and the push's RTO deadline (1 ms).
func pushedOnAPort(t *testing.T, resume bool) (*clock.Manual, *Port, *falcon.Conn, time.Duration) {
	t.Helper()
	clk := clock.NewManual(time.Second)
	p := New(clk, nil)
	p.resumeStalls = resume
	c, err := p.Connect(falcon.ConnConfig{SCID: 1, DCID: 2, InitRTO: time.Millisecond, MinRTO: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.Push(1, nil)
	due, ok := p.coreDeadline()
	if !ok {
		t.Fatal("no RTO armed for the push")
	}
	return clk, p, c, due
}

// TestPortResumesItsEndpointAfterAStall: a timer pass a millisecond or
// more past the deadline the goroutine waited for (the host did not run
// it) restarts the endpoint's due RTOs instead of resending; a pass on
// time, or on a port that does not resume stalls, resends.
func TestPortResumesItsEndpointAfterAStall(t *testing.T) {
	for _, tc := range []struct {
		resume   bool
		late     time.Duration
		wantRetx uint64
	}{{true, 10 * time.Millisecond, 0}, {false, 10 * time.Millisecond, 1}, {true, 500 * time.Microsecond, 1}} {
		clk, p, c, due := pushedOnAPort(t, tc.resume)
		clk.Set(due + tc.late)
		p.drainThenPass(due)
		if got := c.Stats.RetxRTO.Load(); got != tc.wantRetx {
			t.Errorf("resume %v, %v late: retx_rto %d, want %d (rto_resumed %d, port_resumed %d)", tc.resume, tc.late,
				got, tc.wantRetx, c.Stats.RTOResumed.Load(), p.Stats.Resumed.Load())
		}
	}
}

// TestPortResumesItsEndpointAfterABusyStall: a busy goroutine the host
// stops shows as a work item that took a millisecond or more, or as one
// that began that long after the item before it ended with it queued; the
// endpoint then restarts its due RTOs instead of resending (the same as
// after a late timer wake). Items that run back to back on time, or a port
// that does not resume stalls, leave the RTO to fire.
func TestPortResumesItsEndpointAfterABusyStall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resume   bool
		inItem   time.Duration // the host stopped the goroutine inside the first item
		between  time.Duration // ... or between the two items
		wantRetx uint64
	}{
		{"in an item", true, 10 * time.Millisecond, 0, 0},
		{"between items", true, 0, 10 * time.Millisecond, 0},
		{"not resuming", false, 10 * time.Millisecond, 0, 1},
		{"on time", true, 400 * time.Microsecond, 400 * time.Microsecond, 1},
	} {
		clk, p, c, due := pushedOnAPort(t, tc.resume)
		p.Do(func(*falcon.Endpoint) { clk.Advance(tc.inItem) })
		p.Do(func(*falcon.Endpoint) {})
		p.run(<-p.work)
		clk.Advance(tc.between)
		p.run(<-p.work)
		if now := clk.Now(); now < due {
			clk.Set(due) // the timer pass falls due on time
		}
		p.drainThenPass(clk.Now())
		if got := c.Stats.RetxRTO.Load(); got != tc.wantRetx {
			t.Errorf("%s: retx_rto %d, want %d (rto_resumed %d, port_busy_stalls %d)", tc.name, got, tc.wantRetx,
				c.Stats.RTOResumed.Load(), p.Stats.BusyStalls.Load())
		}
		if stalls := p.Stats.BusyStalls.Load(); (stalls == 1) != (tc.resume && tc.wantRetx == 0) {
			t.Errorf("%s: port_busy_stalls %d", tc.name, stalls)
		}
	}
}

// poller is a ULP that polls at its deadlines (as the verbs engine's
// doorbell polling does): polls of them, one interval apart.
type poller struct {
	every time.Duration
	at    time.Duration
	left  int
	early int // polls run before their deadline
	done  chan struct{}
}

func (q *poller) OnRequest(*falcon.Conn, *falcon.Request)       {}
func (q *poller) OnCompletion(*falcon.Conn, *falcon.Completion) {}
func (q *poller) OnXon(*falcon.Conn)                            {}
func (q *poller) Polling() bool                                 { return q.left > 0 }
func (q *poller) NextDeadline() (time.Duration, bool)           { return q.at, q.left > 0 }
func (q *poller) OnTimer(now time.Duration) {
	if q.left == 0 {
		return
	}
	if now < q.at {
		q.early++
		return
	}
	q.at = now + q.every
	if q.left--; q.left == 0 {
		close(q.done)
	}
}

// TestPortSpinsForAPollingULP: on the real clock a polling ULP's deadlines
// run one after another (the port's goroutine spins rather than sleeping
// through Go's millisecond timer granularity) and work still runs while
// it does; once the ULP stops polling the port goes back to its timer.
func TestPortSpinsForAPollingULP(t *testing.T) {
	withHostRunning(t, 1, 2)
	p := New(nil, nil)
	q := &poller{every: time.Microsecond, left: 200, done: make(chan struct{})}
	p.SetULP(7, q)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-p.Stopped() }()
	go p.Run(ctx)
	p.Call(func(*falcon.Endpoint) { q.at = p.Clock().Now() })
	ran := false
	if !p.Call(func(*falcon.Endpoint) { ran = true }) || !ran {
		t.Fatal("work did not run while the ULP polled")
	}
	select {
	case <-q.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the polls did not all run")
	}
	var early int
	var polling bool
	p.Call(func(*falcon.Endpoint) { early, polling = q.early, p.polling() })
	if early != 0 || polling {
		t.Fatalf("%d polls before their deadline; still polling %v", early, polling)
	}
}

// TestPortOnOneProcessorDoesNotSpin: with GOMAXPROCS 1 a spinning
// goroutine would keep the only P from the network poller, so the port
// sleeps on its timer for a polling ULP too, and counts it.
func TestPortOnOneProcessorDoesNotSpin(t *testing.T) {
	withHostRunning(t, 1, 2) // an idle host: only the spinning places decide
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := runThreePolls(t)
	if p.Stats.SpinDenied.Load() == 0 || spinners.Load() != 0 {
		t.Fatalf("spin denied %d, spinners %d", p.Stats.SpinDenied.Load(), spinners.Load())
	}
}

// runThreePolls runs a port whose ULP polls three times, 1 µs apart, on
// the real clock, and returns it once the polls ran (it stops when the
// test ends).
func runThreePolls(t *testing.T) *Port {
	p := New(nil, nil)
	q := &poller{every: time.Microsecond, left: 3, done: make(chan struct{})}
	p.SetULP(7, q)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-p.Stopped() })
	go p.Run(ctx)
	select {
	case <-q.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the polls did not all run")
	}
	return p
}

// withHostRunning makes the host look like cpus CPUs with running
// runnable threads to the ports' idle-CPU check, until the test ends.
func withHostRunning(t *testing.T, running, cpus int) {
	old := hostIdle
	hostIdle = &idleCPU{cpus: cpus, running: func() (int, bool) { return running, true }}
	t.Cleanup(func() { hostIdle = old })
}

// TestPortDoesNotSpinWithoutAnIdleCPU: when the host's runnable threads
// fill its CPUs (two guests' vCPUs busy-polling on two cores), a polling
// ULP's port sleeps on its timer rather than spin a CPU away from them,
// and counts it; the polls still run.
func TestPortDoesNotSpinWithoutAnIdleCPU(t *testing.T) {
	withHostRunning(t, 3, 2)
	p := runThreePolls(t)
	if p.Stats.SpinNoIdleCPU.Load() == 0 || p.Stats.SpinDenied.Load() != 0 || spinners.Load() != 0 {
		t.Fatalf("no idle cpu %d, denied %d, spinners %d", p.Stats.SpinNoIdleCPU.Load(), p.Stats.SpinDenied.Load(), spinners.Load())
	}
}

func TestIdleCPUReadsTheRunnableThreadsAtMostEveryInterval(t *testing.T) {
	for in, want := range map[string]int{"2.91 2.04 1.77 3/115 918\n": 3, "0.00 0.00 0.00 1/80 7": 1} {
		if n, ok := parseLoadavgRunning([]byte(in)); !ok || n != want {
			t.Fatalf("%q: %d %v, want %d", in, n, ok, want)
		}
	}
	for _, bad := range []string{"", "1 2 3", "1 2 3 x/5 6", "1 2 3 -1/5 6", "1 2 3 4 5"} {
		if n, ok := parseLoadavgRunning([]byte(bad)); ok {
			t.Fatalf("%q parsed as %d", bad, n)
		}
	}
	reads, running := 0, 2
	c := &idleCPU{cpus: 2, running: func() (int, bool) { reads++; return running, true }}
	if !c.spareAt(time.Millisecond) {
		t.Fatal("2 runnable (the caller and one more) on 2 CPUs: one is spare")
	}
	running = 3
	if !c.spareAt(time.Millisecond+idleCPUEvery-1) || reads != 1 {
		t.Fatalf("read again within the interval (%d reads)", reads)
	}
	if c.spareAt(time.Millisecond+idleCPUEvery) || reads != 2 {
		t.Fatalf("3 runnable on 2 CPUs: none spare (%d reads)", reads)
	}
	c = &idleCPU{cpus: 2, running: func() (int, bool) { return 0, false }}
	if !c.spareAt(time.Second) {
		t.Fatal("an unreadable count must not stop polling")
	}
}
