package vhostuser_test

import (
	"testing"
	"time"

	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

// watchdogRig is a one-ring rig whose watchdog only runs when the test
// calls WatchdogCheck.
func watchdogRig(t *testing.T, dev *echoDev, feat uint64) *rig {
	t.Helper()
	old := vhostuser.WatchdogInterval
	vhostuser.WatchdogInterval = time.Hour
	t.Cleanup(func() { vhostuser.WatchdogInterval = old })
	dev.queues = 1
	dev.features = feat
	dev.batches = make(chan struct{}, 16)
	dev.idle = make(chan chan bool)
	r := newRig(t, dev, vhostusertest.OneRegion(1<<20), 0, 16)
	r.startRings(feat)
	return r
}

// settle waits until every kick sent so far reached the worker and the
// worker is between passes with no wake pending: a chain published after
// it is taken only on a new wake. The worker itself answers, so a pass
// that has taken its wake but not begun cannot pass for idle.
func settle(t *testing.T, r *rig, dev *echoDev, kicks uint64) {
	t.Helper()
	deadline := time.After(failsafe)
	for {
		if r.counters()["kicks"] >= kicks { // a kick is counted after its wake is sent
			ask := make(chan bool, 1)
			select {
			case dev.idle <- ask:
				if <-ask {
					return
				}
			case <-deadline:
				t.Fatal("the ring's worker did not settle")
			}
		}
		select {
		case <-deadline:
			t.Fatal("the ring's worker did not settle")
		case <-time.After(time.Millisecond):
		}
	}
}

// A chain made available without a kick (a lost kick) sits in a watched
// ring until the watchdog's third look at the unchanged ring wakes the
// worker; the cause is counted.
func TestWatchdogWakesWorkerOnAvailWithoutKick(t *testing.T) {
	feat := vhostuser.FeatureVersion1 | vhostuser.FeatureEventIdx
	dev := &echoDev{watch: true}
	r := watchdogRig(t, dev, feat)
	q := r.qs[0]
	post(t, q, []byte("first"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)

	settle(t, r, dev, 1)
	lost := "lost"
	post(t, q, []byte(lost))
	q.Publish() // and no kick
	r.srv.WatchdogCheck()
	r.srv.WatchdogCheck()
	if c := r.counters()["watchdog_avail_no_kick"]; c != 0 {
		t.Fatalf("watchdog acted before its third look: %d", c)
	}
	r.srv.WatchdogCheck()
	dev.waitBatch(t)
	if got := dev.received(); len(got) != 2 || string(got[1]) != lost {
		t.Fatalf("device got %q", got)
	}
	c := r.counters()
	if c["watchdog_avail_no_kick"] != 1 || c["watchdog_used_no_call"] != 0 {
		t.Fatalf("counters %v", c)
	}
	st := r.srv.Status().Queues[0].Ring
	if st == nil || !st.Watched || st.GuestAvail != 2 {
		t.Fatalf("ring status %+v", st)
	}
	// The ring is drained: more looks change nothing.
	for i := 0; i < 4; i++ {
		r.srv.WatchdogCheck()
	}
	if c := r.counters()["watchdog_avail_no_kick"]; c != 1 {
		t.Fatalf("watchdog acted on a drained ring: %d", c)
	}
}

// A chain the guest added without a kick because the worker held kicks
// (avail_event behind what it took: no kick owed) is the worker's own to
// take; when nothing wakes it for three looks the watchdog does, and
// counts a held ring, not a lost kick.
func TestWatchdogWakesHeldRingWithoutCountingALostKick(t *testing.T) {
	feat := vhostuser.FeatureVersion1 | vhostuser.FeatureEventIdx
	dev := &echoDev{watch: true, holdKicks: true}
	r := watchdogRig(t, dev, feat)
	q := r.qs[0]
	q.EventIdx = true
	// The ring's start wakes the worker once: let that empty pass end,
	// so that the kick below brings the one pass that takes "first" and
	// holds.
	settle(t, r, dev, 0)
	post(t, q, []byte("first"))
	if !q.PublishKick() {
		t.Fatal("no kick asked of an idle ring")
	}
	dev.waitBatch(t)
	settle(t, r, dev, 1)
	if ev := q.AvailEvent(); ev != 0 {
		t.Fatalf("avail_event %d after a held pass that took 1 chain, want 0", ev)
	}
	held := "held"
	post(t, q, []byte(held))
	if q.PublishKick() {
		t.Fatal("the guest kicked although avail_event held kicks")
	}
	for i := 0; i < 3; i++ {
		r.srv.WatchdogCheck()
	}
	dev.waitBatch(t)
	if got := dev.received(); len(got) != 2 || string(got[1]) != held {
		t.Fatalf("device got %q", got)
	}
	c := r.counters()
	if c["watchdog_avail_held"] != 1 || c["watchdog_avail_no_kick"] != 0 {
		t.Fatalf("counters %v", c)
	}
}

// A ring whose device did not declare Watch (an RX ring keeps posted
// buffers until packets come) is left alone with descriptors in it.
func TestWatchdogLeavesUnwatchedRingsAvail(t *testing.T) {
	feat := vhostuser.FeatureVersion1 | vhostuser.FeatureEventIdx
	dev := &echoDev{}
	r := watchdogRig(t, dev, feat)
	q := r.qs[0]
	post(t, q, []byte("first"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	settle(t, r, dev, 1)
	post(t, q, []byte("posted"))
	q.Publish()
	for i := 0; i < 4; i++ {
		r.srv.WatchdogCheck()
	}
	if c := r.counters()["watchdog_avail_no_kick"]; c != 0 || len(dev.received()) != 1 {
		t.Fatalf("watchdog woke an unwatched ring: %d, got %q", c, dev.received())
	}
}

// Completions the guest asked to hear of (used_event passed) with no call
// (a lost call) get the call on the watchdog's third look, once; a guest
// that asked not to be told (used_event ahead) gets none.
func TestWatchdogCallsForCompletionsWithoutCall(t *testing.T) {
	feat := vhostuser.FeatureVersion1 | vhostuser.FeatureEventIdx
	dev := &echoDev{noNotify: true}
	r := watchdogRig(t, dev, feat)
	q := r.qs[0]
	q.SetUsedEvent(0xffff) // not yet
	post(t, q, []byte("a"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	settle(t, r, dev, 1)
	for i := 0; i < 4; i++ {
		r.srv.WatchdogCheck()
	}
	if c := r.counters()["watchdog_used_no_call"]; c != 0 || q.Calls() != 0 {
		t.Fatalf("watchdog called although the guest asked not to be told: %d", c)
	}

	q.SetUsedEvent(0) // tell me once used idx passes 0: it is at 1
	r.srv.WatchdogCheck()
	r.srv.WatchdogCheck()
	if c := r.counters()["watchdog_used_no_call"]; c != 0 {
		t.Fatalf("watchdog acted before its third look at the new state: %d", c)
	}
	r.srv.WatchdogCheck()
	if c := r.counters()["watchdog_used_no_call"]; c != 1 || q.Calls() != 1 {
		t.Fatalf("lost call not sent: counter %d", c)
	}
	for i := 0; i < 4; i++ {
		r.srv.WatchdogCheck()
	}
	if c := r.counters()["watchdog_used_no_call"]; c != 1 || q.Calls() != 0 {
		t.Fatalf("watchdog called again for the same completions: %d", c)
	}
}

// Without EVENT_IDX a completion published with no call is owed a call
// unless the guest set NO_INTERRUPT.
func TestWatchdogCallsWithoutEventIdx(t *testing.T) {
	feat := vhostuser.FeatureVersion1
	dev := &echoDev{noNotify: true}
	r := watchdogRig(t, dev, feat)
	q := r.qs[0]
	q.SetNoInterrupt(true)
	post(t, q, []byte("a"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	settle(t, r, dev, 1)
	for i := 0; i < 4; i++ {
		r.srv.WatchdogCheck()
	}
	if c := r.counters()["watchdog_used_no_call"]; c != 0 {
		t.Fatalf("watchdog called through NO_INTERRUPT: %d", c)
	}
	q.SetNoInterrupt(false)
	for i := 0; i < 3; i++ {
		r.srv.WatchdogCheck()
	}
	if c := r.counters()["watchdog_used_no_call"]; c != 1 || q.Calls() != 1 {
		t.Fatalf("lost call not sent: counter %d", c)
	}
}

// A call owed while the ring has no call fd is counted, and the guest is
// not taken for told: once a call fd is back, the next completion calls
// even though used_event says "not yet" (it has not heard of the earlier
// one).
func TestCallOwedWithoutFDIsNotForgotten(t *testing.T) {
	feat := vhostuser.FeatureVersion1 | vhostuser.FeatureEventIdx
	dev := &echoDev{}
	r := watchdogRig(t, dev, feat)
	q := r.qs[0]
	post(t, q, []byte("a"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if q.Calls() != 1 {
		t.Fatal("no call for the first completion")
	}
	must(t, r.fe.VringFile(vhostuser.ReqSetVringCall, 0, -1))
	_, err := r.fe.GetU64(vhostuser.ReqGetFeatures) // the swap has been handled
	must(t, err)
	q.SetUsedEvent(1) // tell me when used idx passes 1
	post(t, q, []byte("b"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if c := r.counters()["call_no_fd"]; c != 1 {
		t.Fatalf("CallNoFD %d, want 1", c)
	}
	must(t, r.fe.VringFile(vhostuser.ReqSetVringCall, 0, q.CallFD))
	_, err = r.fe.GetU64(vhostuser.ReqGetFeatures)
	must(t, err)
	// The call fd arriving on the running ring (QEMU sends the real
	// notifier after the ring started) brings the call that was owed.
	if q.Calls() != 1 {
		t.Fatal("the call owed while there was no call fd did not come with the fd")
	}
	q.SetUsedEvent(0xffff)
	post(t, q, []byte("c"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if q.Calls() != 1 {
		t.Fatal("the completion after a lost call did not call")
	}
}

// The stall a lost interrupt leaves once our call has gone out (seen on
// QEMU 7.2 under TCG for its own virtio-blk, whose call takes the same MSI-X
// path as ours): the guest armed used_event at what it had seen, we
// completed and called, and the guest never took the completion. On a
// request ring the watchdog's third look at that unchanged ring calls
// again, once per stuck stretch, counted as watchdog_not_taken; once the
// guest takes the completion and re-arms, nothing more happens.
func TestWatchdogCallsAgainForCompletionsNotTaken(t *testing.T) {
	feat := vhostuser.FeatureVersion1 | vhostuser.FeatureEventIdx
	dev := &echoDev{watch: true}
	r := watchdogRig(t, dev, feat)
	q := r.qs[0]
	q.EnableCallback() // used_event = 0: tell me of the first completion
	post(t, q, []byte("a"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if q.UsedIdx() != 1 || q.Calls() != 1 { // the call went out; the guest never saw it
		t.Fatal("completion or call missing")
	}
	// The kick's reader may count the kick after the worker already ran
	// (a change the first look can see), so the act comes on the third or
	// fourth look; never before the third.
	looks := 0
	for looks < 6 && r.counters()["watchdog_not_taken"] == 0 {
		r.srv.WatchdogCheck()
		looks++
	}
	c := r.counters()
	if looks < 3 || c["watchdog_not_taken"] != 1 || c["watchdog_used_no_call"] != 0 || q.Calls() != 1 {
		t.Fatalf("completion not taken: second call after %d looks, counters %v", looks, c)
	}
	// The guest takes it and re-arms at what it has seen: nothing is owed.
	if _, ok := q.PopUsed(); !ok {
		t.Fatal("no used element")
	}
	q.EnableCallback()
	for i := 0; i < 6; i++ {
		r.srv.WatchdogCheck()
	}
	if c := r.counters()["watchdog_not_taken"]; c != 1 || q.Calls() != 0 {
		t.Fatalf("watchdog called for completions already taken: %d", c)
	}
}

// An unwatched ring (a net TX ring whose guest frees buffers lazily, with
// used_event left behind on purpose) is not called again.
func TestWatchdogLeavesUnwatchedRingsNotTaken(t *testing.T) {
	feat := vhostuser.FeatureVersion1 | vhostuser.FeatureEventIdx
	dev := &echoDev{}
	r := watchdogRig(t, dev, feat)
	q := r.qs[0]
	q.EnableCallback()
	post(t, q, []byte("a"))
	q.Publish()
	q.Kick()
	dev.waitBatch(t)
	if q.UsedIdx() != 1 || q.Calls() != 1 {
		t.Fatal("completion or call missing")
	}
	for i := 0; i < 6; i++ {
		r.srv.WatchdogCheck()
	}
	if c := r.counters()["watchdog_not_taken"]; c != 0 || q.Calls() != 0 {
		t.Fatalf("unwatched ring called again: %d", c)
	}
}
