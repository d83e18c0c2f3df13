package vhostuser

import (
	"time"
)

// The ring watchdog is defence in depth against lost notifications: once
// per WatchdogInterval it looks at every running ring in guest memory and
// catches the two states a lost wake-up leaves behind for good:
//
//   - available descriptors the worker has not taken, with no kick since
//     the last look and nothing moved (the worker missed a kick, or the
//     guest did not send one): the worker is woken;
//   - completions published that the guest asked to be told about (its
//     used_event, or no NO_INTERRUPT flag) with no call since they were
//     published and nothing moved: the call is sent;
//   - on request rings with EVENT_IDX, completions we did call for that the
//     guest has not taken (its used_event, which it rewrites to what it has
//     seen whenever it re-arms, stays behind the used idx) and nothing
//     moved: the interrupt was lost after our call — QEMU relays it to the
//     guest's MSI-X vector, and QEMU 7.2 under TCG was seen losing its own
//     virtio-blk's completion interrupts the same way — so the call is sent
//     again (a spurious interrupt costs the guest one look at the ring).
//
// Each case has its own counter. A ring must look the same at
// watchdogLooks consecutive looks before the watchdog acts, so a worker
// that is merely busy is left alone, and so is a guest whose vCPU the host
// did not run for a moment (on an overloaded host a vCPU descheduled for
// seconds between writing used_event and re-reading the used idx looks
// like a lost call); a non-zero counter is a bug report, not a fix.
//
// The avail check only runs on rings whose device takes every chain as it
// comes (Queue.Watch): a net RX ring legitimately holds buffers the guest
// posted until packets arrive.

// WatchdogInterval is how often the watchdog looks at the rings.
var WatchdogInterval = time.Second

// watchdogLooks is how many consecutive looks must see a ring unchanged
// before the watchdog acts (2 intervals).
const watchdogLooks = 3

// watchState is what the watchdog saw of one ring at its previous look.
type watchState struct {
	valid                         bool
	guestAvail, taken             uint16
	kicks                         uint64
	used, usedEvent, callUsed     uint16
	callUsedValid, noInterruptSet bool
	availEvent                    uint16 // ours: not compared, reported
}

// Watch declares that the ring's device takes every available chain as
// soon as it can (a request queue): the watchdog then also checks for
// descriptors left in the ring with no kick. Call it from RunQueue.
func (q *Queue) Watch() { q.watched.Store(true) }

// runWatchdog calls watchdogCheck every interval until stop closes.
func (s *Session) runWatchdog(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.watchdogCheck()
		}
	}
}

// watchdogCheck looks at every running ring once.
func (s *Session) watchdogCheck() {
	s.mu.Lock()
	defer s.mu.Unlock()
	mem := s.mem.Load()
	for mem != nil && !mem.TryAcquire() {
		mem = s.mem.Load()
	}
	if mem == nil {
		return
	}
	defer mem.Release()
	s.c.WatchdogChecks.Inc()
	for _, q := range s.queues {
		if !q.running {
			q.watch = watchState{}
			continue
		}
		q.watchOnce(mem)
	}
}

// watchOnce compares one ring with the previous look and acts on a ring
// stuck in a state a lost notification leaves. Runs under s.mu, while the
// ring's configuration cannot change; the worker's state is read through
// its atomic mirrors only.
func (q *Queue) watchOnce(mem *MemTable) {
	n := uint64(q.size)
	avail, err1 := mem.TranslateUVA(q.availUVA, 6+2*n)
	used, err2 := mem.TranslateUVA(q.usedUVA, 6+8*n)
	if err1 != nil || err2 != nil || !aligned(avail, 2) || !aligned(used, 4) {
		q.watch = watchState{}
		return
	}
	cur := watchState{
		valid:      true,
		guestAvail: load16(avail, 2),
		taken:      uint16(q.pubAvail.Load()),
		kicks:      q.kicks.Load(),
		used:       load16(used, 2),
	}
	cur.availEvent = load16(used, 4+8*int(q.size))
	cu := q.callUsed.Load()
	cur.callUsed, cur.callUsedValid = uint16(cu), cu&callUsedValid != 0
	if q.eventIdx {
		cur.usedEvent = load16(avail, 4+2*int(q.size))
	} else {
		cur.noInterruptSet = load16(avail, 0)&availFNoInterrupt != 0
	}
	prev := q.watch
	q.watch = cur
	// avail_event moves with every pop: not a sign of progress to compare
	a, b := cur, prev
	a.availEvent, b.availEvent = 0, 0
	if !prev.valid || a != b {
		q.watchSame = 0
		return
	}
	if q.watchSame++; q.watchSame < watchdogLooks-1 {
		return
	}
	q.watchSame = 0 // one act per stretch the ring stays stuck
	// Descriptors waiting, nothing taken, no kick: wake the worker. When
	// avail_event owed it no kick (HoldKicks: the worker meant to look
	// on its own, at its next completion, and none came), that is a slow
	// completion, not a lost kick.
	if q.watched.Load() && cur.guestAvail != cur.taken {
		if q.kickOwed(cur) {
			q.c.WatchdogAvailNoKick.Inc()
			q.warn("descriptors with no kick: worker woken", cur)
		} else {
			q.c.WatchdogAvailHeld.Inc()
		}
		if !q.sess.watchObserve {
			q.nudge()
		}
	}
	// Completions the guest asked to hear about, and no call.
	if cur.used == uint16(q.pubUsed.Load()) && q.callMissing(cur) {
		q.c.WatchdogUsedNoCall.Inc()
		q.warn("completions with no call: call sent", cur)
		if !q.sess.watchObserve && q.signal() {
			q.callUsed.Store(uint32(cur.used) | callUsedValid)
		}
		return
	}
	// Completions called for and not taken: the interrupt was lost
	// downstream of our call.
	if q.watched.Load() && q.notTaken(cur) {
		q.c.WatchdogNotTaken.Inc()
		q.warn("completions called for that the guest did not take: call sent again", cur)
		if !q.sess.watchObserve {
			q.signal()
		}
	}
}

// kickOwed reports whether the guest owed a kick for the descriptors it
// added past what the worker took: always without EVENT_IDX; with it,
// when its avail idx crossed avail_event (vring_need_event, with the
// taken position as the old index).
func (q *Queue) kickOwed(w watchState) bool {
	if !q.eventIdx {
		return true
	}
	return uint16(w.guestAvail-w.availEvent-1) < uint16(w.guestAvail-w.taken)
}

// notTaken reports whether, with EVENT_IDX, every published completion was
// called for and the guest has not seen all of them: its used_event (the
// used idx it saw when it last re-armed) is behind the used idx, within a
// ring's size.
func (q *Queue) notTaken(w watchState) bool {
	if !q.eventIdx || !w.callUsedValid || w.used != w.callUsed || w.used != uint16(q.pubUsed.Load()) {
		return false
	}
	behind := uint16(w.used - w.usedEvent)
	return behind != 0 && behind <= q.size
}

// warn logs one act of the watchdog with what it saw: the state a lost
// notification left, to be explained.
func (q *Queue) warn(what string, w watchState) {
	if q.sess.log == nil {
		return
	}
	q.sess.log.Warn("vhost-user ring watchdog: "+what, "queue", q.index, "event_idx", q.eventIdx,
		"guest_avail", w.guestAvail, "taken", w.taken, "kicks", w.kicks,
		"used", w.used, "used_event", w.usedEvent, "call_used", w.callUsed, "called", w.callUsedValid,
		"no_interrupt", w.noInterruptSet, "start_used", q.startUsed, "call_fd", q.call.Load() != nil,
		"call_fd_swaps", q.c.CallFDSwaps.Load(), "since_kick", time.Duration(time.Now().UnixNano()-q.lastKick.Load()),
		"since_call", time.Duration(time.Now().UnixNano()-q.lastCall.Load()))
}

// callMissing reports whether the guest asked for a call that the ring's
// published used idx owes it: with EVENT_IDX, used idx moved past
// used_event since the last call; without, anything was published since
// the last call and interrupts are not suppressed.
func (q *Queue) callMissing(w watchState) bool {
	if !w.callUsedValid {
		// No call yet on this run of the ring: owed once the guest's
		// threshold is passed (EVENT_IDX) or anything was completed.
		if q.eventIdx {
			return w.used != q.startUsed && uint16(w.used-w.usedEvent-1) < uint16(w.used-q.startUsed)
		}
		return !w.noInterruptSet && w.used != q.startUsed
	}
	if w.used == w.callUsed {
		return false
	}
	if q.eventIdx {
		return uint16(w.used-w.usedEvent-1) < uint16(w.used-w.callUsed)
	}
	return !w.noInterruptSet
}

// callUsedValid marks Queue.callUsed as set since the ring started.
const callUsedValid = 1 << 16

func aligned(b []byte, a uintptr) bool {
	return len(b) > 0 && uintptrOf(b)%a == 0
}
