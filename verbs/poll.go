package verbs

import "time"

// Doorbell polling: the NIC side of the uapi's "Doorbells" paragraph
// (guest-driver/include/uapi/falconnic.h). The __le32 at SQPollFlagOff of
// an SQ ring is the NIC's "still draining this SQ" flag; while it reads
// non-zero the driver stores its producer index, issues a full barrier,
// reads the flag and sends no DB_SQ. The NIC then owes the SQ a look:
//
//	            doorbell finds WQEs:            SQ empty,
//	            store 1, then drain             window > 0
//	IDLE (0) ─────────────────▶ DRAINING (1) ─────────────▶ POLLING (1)
//	   ▲                          │   ▲   (stalled: Xoff,      │  │
//	   │ SQ empty, no window:     │   │    ops window full:    │  │ a poll finds
//	   │ store 0, barrier,        │   │    the completion or   │  │ WQEs: drain
//	   │ re-read: unchanged       │   │    Xon pumps again)    │  │
//	   └──────────────────────────┘   └────────────────────────┘  │
//	   ▲                                                          │
//	   └── window ends: store 0, barrier, re-read the producer ───┘
//	       index: unchanged → IDLE; moved → DRAINING (the race caught)
//
// The flag word is written only with Swap32 and the producer index re-read
// with Load32 (AtomicMemory): the NIC's store of 0 and its re-read are a
// Dekker pair with the driver's producer store and flag read, so a post is
// either seen by the re-read or finds the flag 0 and rings. While the flag
// is 1 some pump of the QP is always still to come: a poll of the open
// window, a transport completion or Xon (what resumes a stalled drain
// today), or MODIFY_QP to RTS (SQD). Leaving RTS for ERR or SQE clears the
// flag before the flush reads the producer index (flushSQ), so posts after
// it ring and flush; RESET and destroy clear it too.
//
// The window adapts per SQ to the gap g between the SQ going empty and the
// next post: a post found by a poll, or a doorbell that comes at most the
// cap after the SQ went empty, grows the window to at least 2g (never over
// the cap); a window that ends without a post halves it, and
// pollIdleWindows of those in a row switch the SQ's window off (counted)
// until a doorbell shows posts closer than the cap again. A poll that runs
// more than PollConfig.Late after it was due means the owner of the engine
// did not get the CPU (counted); pollLateBurst of those within
// pollLateSpan mean it is starved of it: polling stops for a back-off
// (10 ms, doubling up to 1 s; counted) and every open window closes.
//
// The engine polls in OnTimer at NextDeadline, on the goroutine that owns
// it; Polling tells that owner the deadlines are polls (device/port spins
// for them on the real clock rather than sleeping).

// SQPollFlagOff is FALCONNIC_RING_NIC_POLLING_OFF: the SQ ring's "NIC still
// draining" flag (__le32 in rxe_queue_buf.pad_1, unused by librxe).
const SQPollFlagOff = 64

// Polling defaults.
const (
	// DefaultPollWindowCap bounds a polling window: about one round trip
	// of ib_write_lat between two TCG guests (issue 19: ~206 µs), so that a
	// ping-pong's next post can land inside it, while an idle SQ costs at
	// most this much polling per post before its window shrinks.
	DefaultPollWindowCap = 200 * time.Microsecond
	// DefaultPollEvery is the interval between two polls of an SQ: well
	// under the cost of the DB_SQ path it replaces (a virtio-net TX kick
	// and a control frame).
	DefaultPollEvery = 2 * time.Microsecond
	// DefaultPollLate is how late a poll may run before the engine counts
	// its owner as starved of CPU and stops polling for a while.
	DefaultPollLate = 50 * time.Microsecond
	// MaxPollWindowCap bounds PollConfig.WindowCap.
	MaxPollWindowCap = 10 * time.Millisecond

	pollIdleWindows = 16 // windows in a row without a post switch an SQ's window off
	pollLateBurst   = 3  // late polls within pollLateSpan that switch polling off
	pollLateSpan    = 10 * time.Millisecond
	pollBackoffMin  = 10 * time.Millisecond
	pollBackoffMax  = time.Second
)

// PollConfig configures doorbell polling (SetPolling). Zero durations take
// the defaults.
type PollConfig struct {
	On        bool
	WindowCap time.Duration // the longest window (DefaultPollWindowCap)
	Every     time.Duration // the poll interval (DefaultPollEvery)
	Late      time.Duration // starvation threshold (DefaultPollLate)
}

func (c PollConfig) withDefaults() PollConfig {
	if c.WindowCap <= 0 {
		c.WindowCap = DefaultPollWindowCap
	}
	c.WindowCap = min(c.WindowCap, MaxPollWindowCap)
	if c.Every <= 0 {
		c.Every = DefaultPollEvery
	}
	c.Every = min(c.Every, c.WindowCap)
	if c.Late <= 0 {
		c.Late = DefaultPollLate
	}
	return c
}

// minWindow and initWindow are an SQ's smallest and first window.
func (c PollConfig) minWindow() time.Duration  { return min(2*c.Every, c.WindowCap) }
func (c PollConfig) initWindow() time.Duration { return min(8*c.Every, c.WindowCap) }

// sqPoll is one SQ's doorbell-polling state.
type sqPoll struct {
	flag    bool          // the NIC's last store to the flag word was 1
	open    bool          // a window is open: Engine.polled holds the QP
	win     time.Duration // the window the next empty SQ opens (0: off)
	emptyAt time.Duration // when a drain that took WQEs last found the SQ empty
	seen    bool          // emptyAt is set
	until   time.Duration // the open window's end
	next    time.Duration // the open window's next poll
	empties int           // windows in a row that ended without a post
	flagGPA uint64
	prodGPA uint64
}

// pollState is the engine's doorbell-polling state.
type pollState struct {
	cfg     PollConfig
	polled  []*QP         // QPs with an open window
	scan    []*QP         // OnTimer's copy of polled
	off     time.Duration // starved: no polling before then
	backoff time.Duration // the next starvation's back-off
	late    int           // late polls since lateAt
	lateAt  time.Duration // the first of them
}

// SetPolling configures doorbell polling (off by default). It needs the
// engine's Clock and an AtomicMemory; turning it off closes every window.
func (e *Engine) SetPolling(c PollConfig) {
	c = c.withDefaults()
	if e.cfg.Clock == nil {
		c.On = false
	}
	e.poll.cfg = c
	if e.poll.backoff == 0 {
		e.poll.backoff = pollBackoffMin
	}
	if !c.On {
		e.closeAll()
	}
}

// PollingConfig returns the polling configuration in force.
func (e *Engine) PollingConfig() PollConfig { return e.poll.cfg }

// Polling reports whether some SQ has an open window: the engine's
// deadlines are polls its owner should not sleep through.
func (e *Engine) Polling() bool { return len(e.poll.polled) > 0 }

// NextDeadline returns the next poll of an open window.
func (e *Engine) NextDeadline() (time.Duration, bool) {
	var at time.Duration
	ok := false
	for _, qp := range e.poll.polled {
		if !ok || qp.poll.next < at {
			at, ok = qp.poll.next, true
		}
	}
	return at, ok
}

// OnTimer polls the SQs whose poll is due.
func (e *Engine) OnTimer(now time.Duration) {
	ps := &e.poll
	if len(ps.polled) == 0 {
		return
	}
	ps.scan = append(ps.scan[:0], ps.polled...)
	for _, qp := range ps.scan {
		if !qp.poll.open || now < qp.poll.next {
			continue
		}
		if now-qp.poll.next > ps.cfg.Late && e.late(now) {
			e.starved(now)
			break
		}
		e.pollSQ(qp, now)
	}
	clear(ps.scan)
}

// now reads the engine's clock (0 without one).
func (e *Engine) now() time.Duration {
	if e.cfg.Clock == nil {
		return 0
	}
	return e.cfg.Clock.Now()
}

// pollActive reports whether SQs may be polled now.
func (e *Engine) pollActive(now time.Duration) bool { return e.poll.cfg.On && now >= e.poll.off }

// initPoll sets up a new QP's polling state. A flag word that is not 0
// is stored 0 whether or not the engine polls: the driver re-creates a
// lost kernel QP over its old rings (a NIC that restarted), and a 1 left
// by the NIC before would silence its doorbells for good.
func (e *Engine) initPoll(qp *QP) {
	qp.poll = sqPoll{win: e.poll.cfg.withDefaults().initWindow()}
	// The ring header lies in the ring's first page (RingHdrSize).
	qp.poll.flagGPA, _ = qp.sq.reg.wordGPA(SQPollFlagOff)
	qp.poll.prodGPA, _ = qp.sq.reg.wordGPA(ringProducerOff)
	var w [4]byte
	if e.cfg.Mem.Read(qp.poll.flagGPA, w[:]) != nil || le.Uint32(w[:]) == 0 {
		return
	}
	e.Stats.PollFlagForeign.Inc()
	if am, ok := e.cfg.Mem.(AtomicMemory); ok {
		_, _ = am.Swap32(qp.poll.flagGPA, 0)
	} else {
		clear(w[:])
		_ = e.cfg.Mem.Write(qp.poll.flagGPA, w[:])
	}
}

// doorbell notes a DB_SQ for qp before it is pumped: one that comes while
// the flag is set is a driver that raced the NIC's store (or ignores the
// flag); one that comes soon after the SQ went empty says the window was
// too short.
func (e *Engine) doorbell(qp *QP) {
	p := &qp.poll
	if p.flag {
		e.Stats.PollDoorbellFlagSet.Inc()
		return
	}
	if now := e.now(); p.seen && e.pollActive(now) {
		e.growWindow(qp, now-p.emptyAt)
	}
}

// growWindow makes qp's window catch a post that came g after the SQ went
// empty (never past the cap; a post later than that does not grow it).
func (e *Engine) growWindow(qp *QP, g time.Duration) {
	c := &e.poll.cfg
	if g > c.WindowCap {
		return
	}
	qp.poll.win = min(c.WindowCap, max(qp.poll.win, 2*g, c.minWindow()))
	qp.poll.empties = 0
}

// setFlag stores 1 in qp's flag word: the driver stops ringing.
func (e *Engine) setFlag(qp *QP) {
	am, ok := e.cfg.Mem.(AtomicMemory)
	if !ok {
		return
	}
	old, err := am.Swap32(qp.poll.flagGPA, 1)
	if err != nil {
		e.Stats.PollRingErr.Inc()
		return
	}
	if old != 0 {
		e.Stats.PollFlagForeign.Inc() // the NIC left it 0: the guest wrote it
	}
	qp.poll.flag = true
	e.Stats.PollFlagSets.Inc()
}

// clearFlag stores 0 in qp's flag word (a full barrier), then re-reads the
// producer index: it reports whether WQEs were posted that the NIC has not
// taken (a post that raced the store; the driver may not have rung).
func (e *Engine) clearFlag(qp *QP) bool {
	p := &qp.poll
	p.flag = false
	am, ok := e.cfg.Mem.(AtomicMemory)
	if !ok {
		return false
	}
	old, err := am.Swap32(p.flagGPA, 0)
	if err != nil {
		e.Stats.PollRingErr.Inc()
		return false
	}
	e.Stats.PollFlagClears.Inc()
	if old != 1 {
		e.Stats.PollFlagForeign.Inc()
	}
	prod, err := am.Load32(p.prodGPA)
	if err != nil {
		e.Stats.PollRingErr.Inc()
		return false
	}
	return qp.sq.Pending(prod, qp.sqNext) != 0
}

// sqEmpty runs when a pump that holds the flag found qp's SQ empty (took:
// WQEs it took). It opens or renews the window, or clears the flag; it
// reports whether the re-check after clearing found WQEs to drain.
func (e *Engine) sqEmpty(qp *QP, took bool) bool {
	p := &qp.poll
	now := e.now()
	if took || !p.open {
		p.emptyAt, p.seen = now, true // a stalled drain went empty when it resumed
	}
	if e.pollActive(now) && p.win > 0 {
		if !p.open {
			p.open = true
			e.poll.polled = append(e.poll.polled, qp)
			e.Stats.PollWindowsStarted.Inc()
		} else if !took {
			return false // a completion pumped: the window runs on
		}
		p.until = now + p.win
		p.next = min(now+e.poll.cfg.Every, p.until)
		return false
	}
	e.closeWindow(qp)
	if e.clearFlag(qp) {
		e.Stats.PollRecheckFound.Inc()
		return true
	}
	return false
}

// pollSQ is one poll of qp's open window.
func (e *Engine) pollSQ(qp *QP, now time.Duration) {
	p := &qp.poll
	e.Stats.Polls.Inc()
	if qp.state != QPSRTS {
		// SQD: MODIFY_QP to RTS pumps; ERR, SQE and RESET cleared the flag.
		e.closeWindow(qp)
		return
	}
	am, _ := e.cfg.Mem.(AtomicMemory)
	var prod uint32
	var err error
	if am == nil {
		err = ErrNoMemory
	} else {
		prod, err = am.Load32(p.prodGPA)
	}
	if err != nil {
		e.Stats.PollRingErr.Inc()
		e.closeWindow(qp)
		e.clearFlag(qp)
		return
	}
	if qp.sq.Pending(prod, qp.sqNext) != 0 {
		e.Stats.PollFound.Inc()
		e.Stats.PollWindowsExtended.Inc()
		e.growWindow(qp, now-p.emptyAt)
		e.pump(qp)
		if p.open && p.next <= now {
			// The drain stalled: the flag stays set and the completion or
			// Xon that resumes it reopens the window.
			e.closeWindow(qp)
		}
		return
	}
	if now < p.until {
		p.next = min(now+e.poll.cfg.Every, p.until)
		return
	}
	e.Stats.PollWindowsExpired.Inc()
	e.poll.backoff = pollBackoffMin
	p.win = max(p.win/2, e.poll.cfg.minWindow())
	if p.empties++; p.empties >= pollIdleWindows {
		p.win, p.empties = 0, 0
		e.Stats.PollIdleOff.Inc()
	}
	e.closeWindow(qp)
	if e.clearFlag(qp) {
		e.Stats.PollRecheckFound.Inc()
		e.pump(qp)
	}
}

// late counts a poll that ran late and reports whether polling is starved:
// pollLateBurst of them within pollLateSpan (one alone is a preemption
// the host need not repeat soon).
func (e *Engine) late(now time.Duration) bool {
	ps := &e.poll
	e.Stats.PollLate.Inc()
	if ps.late == 0 || now-ps.lateAt > pollLateSpan {
		ps.late, ps.lateAt = 0, now
	}
	ps.late++
	if ps.late < pollLateBurst {
		return false
	}
	ps.late = 0
	return true
}

// starved stops polling for a back-off: the engine's owner ran a poll
// late, so the host is not giving it the CPU that polling burns.
func (e *Engine) starved(now time.Duration) {
	ps := &e.poll
	e.Stats.PollStarvedOff.Inc()
	ps.off = now + ps.backoff
	ps.backoff = min(2*ps.backoff, pollBackoffMax)
	e.closeAll()
}

// closeAll closes every open window, clearing the flags: posts the
// re-check finds are drained without setting the flag again.
func (e *Engine) closeAll() {
	ps := &e.poll
	for len(ps.polled) > 0 {
		qp := ps.polled[len(ps.polled)-1]
		e.closeWindow(qp)
		if e.clearFlag(qp) {
			e.Stats.PollRecheckFound.Inc()
			e.pump(qp)
		}
	}
}

// closeWindow takes qp off the polled list (its flag is the caller's).
func (e *Engine) closeWindow(qp *QP) {
	if !qp.poll.open {
		return
	}
	qp.poll.open = false
	l := e.poll.polled
	for i, q := range l {
		if q == qp {
			l[i] = l[len(l)-1]
			l[len(l)-1] = nil
			e.poll.polled = l[:len(l)-1]
			return
		}
	}
}

// stopPolling closes qp's window and clears its flag (the QP leaves RTS
// for ERR, SQE or RESET, or is destroyed): the driver rings again. The
// caller reads the producer index afterwards if it needs posts that raced.
func (e *Engine) stopPolling(qp *QP) {
	e.closeWindow(qp)
	if qp.poll.flag {
		e.clearFlag(qp)
	}
}
