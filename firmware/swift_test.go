package firmware

import (
	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/sim"
	"falconnic/falcon/tl"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
)

// flow drives one connection flow of a Swift RUE the way the datapath
// does: state round-trips from each response into the next event, and time
// is a script (Falcon units), never the wall clock.
type flow struct {
	t   *testing.T
	s   *Swift
	ev  rue.Event
	now uint32 // Falcon units
	r   rue.Response
}

func newFlow(t *testing.T, cfg SwiftConfig) *flow {
	f := &flow{t: t, s: NewSwift(cfg), now: 1000}
	f.ev = rue.Event{Conn: 7, Fcwnd: 32 * rue.One, Ncwnd: 64, RTO: time.Millisecond}
	return f
}

func us(d float64) uint32 { return uint32(d*unitsPerUs + 0.5) }

// advance moves the script's clock.
func (f *flow) advance(d float64) { f.now += us(d) }

// post sends ev (type and signal fields already set) and folds the
// response back into the next event's state.
func (f *flow) post() rue.Response {
	f.ev.Now = f.now & mask24
	r, ok := f.s.Handle(&f.ev)
	if !ok {
		f.t.Fatal("Swift answers synchronously")
	}
	f.r = r
	e := &f.ev
	e.Fcwnd, e.Ncwnd, e.IPG, e.RTO = r.Fcwnd, r.Ncwnd, r.IPG, r.RTO
	e.FabricMarker, e.NICMarker, e.NcwndUp = r.FabricMarker, r.NICMarker, r.NcwndUp
	e.DelayState, e.RTTState, e.BaseDelay, e.CCOpaque, e.PLBState = r.DelayState, r.RTTState, r.BaseDelay, r.CCOpaque, r.PLBState
	return r
}

// ack posts an ACK for acked packets whose fabric delay was delayUs (the
// receiver held the ACK holdUs more) with rx-buffer level lvl.
func (f *flow) ack(delayUs, holdUs float64, acked uint32, lvl uint8) rue.Response {
	e := &f.ev
	e.Type, e.NumAcked, e.RxBufLevel, e.ForwardHop, e.NackCode = rue.EventACK, acked, lvl, 0, 0
	e.T4 = f.now
	e.T1 = f.now - us(delayUs+holdUs)
	e.T2 = e.T1 + us(delayUs/2)
	e.T3 = e.T2 + us(holdUs)
	return f.post()
}

func (f *flow) retx(reason rue.RetxReason, count uint8) rue.Response {
	e := &f.ev
	e.Type, e.RetxReason, e.RetxCount, e.NumAcked = rue.EventRetx, reason, count, 0
	e.T1, e.T2, e.T3, e.T4 = 0, 0, 0, f.now
	return f.post()
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// The target is base + hops + the flow-scaling term, which is FSRange at
// FSMin and zero at FSMax.
func TestSwiftTarget(t *testing.T) {
	s := NewSwift(SwiftConfig{})
	toUs := func(u float64) float64 { return u / unitsPerUs }
	if got := toUs(s.Target(256, 0)); !near(got, 7, 0.01) {
		t.Errorf("target at fcwnd 256 = %.2f µs, want the 7 µs base", got)
	}
	if got := toUs(s.Target(0.1, 3)); !near(got, 7+3*2+20, 0.01) {
		t.Errorf("target at fcwnd 0.1, 3 hops = %.2f µs, want 33", got)
	}
	if got := toUs(s.Target(0.01, 0)); !near(got, 27, 0.01) {
		t.Errorf("target below FSMin = %.2f µs, want clamped at 27", got)
	}
	if a, b := toUs(s.Target(1, 0)), toUs(s.Target(32, 0)); !(a > b && b > 7) {
		t.Errorf("flow scaling not decreasing: %.2f at 1, %.2f at 32", a, b)
	}
	off := NewSwift(SwiftConfig{FSRange: -1})
	if got := toUs(off.Target(0.1, 0)); !near(got, 7, 0.01) {
		t.Errorf("flow scaling off: target %.2f µs, want 7", got)
	}
}

// Below target the window grows by AI per window's worth of ACKs.
func TestSwiftAdditiveIncrease(t *testing.T) {
	f := newFlow(t, SwiftConfig{})
	for i := 0; i < 32; i++ {
		f.advance(0.2)
		f.ack(4, 0, 1, 0)
	}
	if got := f.r.Fcwnd.Float(); !near(got, 33, 0.05) {
		t.Errorf("fcwnd after one window of ACKs below target = %.3f, want ≈ 33", got)
	}
	if f.s.Stats.Increases != 32 || f.s.Stats.Decreases != 0 {
		t.Errorf("stats %+v", f.s.Stats)
	}
	// Below one packet the increase is AI per ACK (Swift's rule).
	f.ev.Fcwnd = rue.One / 4
	f.advance(1)
	if got := f.ack(4, 0, 1, 0).Fcwnd.Float(); !near(got, 1.25, 0.01) {
		t.Errorf("fcwnd 0.25 + one ACK = %.3f, want 1.25", got)
	}
}

// An ACK whose packets met no delay at all — a frame that leaves one port
// of a daemon and reaches another within one unit of the clock — is a
// sample below target: it grows the window, also after a cut. A round
// trip that reads as zero counts as one unit; negative timestamps are no
// sample.
func TestSwiftZeroDelayIsASample(t *testing.T) {
	f := newFlow(t, SwiftConfig{})
	f.advance(100)
	if got := f.retx(rue.RetxRTO, 1).Fcwnd.Float(); !near(got, 16, 0.01) {
		t.Fatalf("RTO: fcwnd %.3f, want 16", got)
	}
	for i := 0; i < 16; i++ {
		f.advance(0.2)
		f.ack(0, 3, 1, 0) // fabric delay 0, the receiver held the ACK 3 µs
	}
	if got := f.r.Fcwnd.Float(); !near(got, 17, 0.05) || f.s.Stats.Samples != 16 || f.s.Stats.NoSample != 0 {
		t.Fatalf("fcwnd %.3f after 16 ACKs with no fabric delay, want ≈ 17 (stats %+v)", got, f.s.Stats)
	}
	f.advance(1)
	e := &f.ev
	e.Type, e.NumAcked = rue.EventACK, 1
	e.T1, e.T2, e.T3, e.T4 = f.now, f.now, f.now, f.now // the whole trip within one unit
	if f.post(); f.s.Stats.Samples != 17 || f.r.RTTState == 0 {
		t.Errorf("a zero round trip: samples %d, srtt %d; want a sample and a non-zero srtt", f.s.Stats.Samples, f.r.RTTState)
	}
	e.T1 = f.now + 5 // sent after it was acknowledged
	if f.post(); f.s.Stats.NoSample != 1 {
		t.Errorf("a negative round trip was taken as a sample (stats %+v)", f.s.Stats)
	}
}

// Above target the window is cut by β·(d−t)/d capped at max_mdf, at most
// once per RTT: ACKs within an RTT of the cut leave it alone.
func TestSwiftOneDecreasePerRTT(t *testing.T) {
	f := newFlow(t, SwiftConfig{BaseTarget: 10 * time.Microsecond, FSRange: -1}) // target 10 µs exactly
	f.advance(100)
	r := f.ack(20, 0, 1, 0)
	// d = 20, t = 10: cut 0.8 × 0.5 = 0.4 → 32 × 0.6
	if got := r.Fcwnd.Float(); !near(got, 19.2, 0.05) {
		t.Fatalf("first cut: fcwnd %.3f, want 19.2", got)
	}
	seq := []float64{}
	for i := 0; i < 10; i++ { // 10 ACKs within 10 µs < one 20 µs RTT
		f.advance(1)
		seq = append(seq, f.ack(20, 0, 1, 0).Fcwnd.Float())
	}
	for _, w := range seq {
		if w != seq[0] {
			t.Fatalf("window moved within the RTT after a cut: %v", seq)
		}
	}
	if f.s.Stats.HeldByMark != 10 {
		t.Errorf("held %d, want 10", f.s.Stats.HeldByMark)
	}
	f.advance(11) // 21 µs since the cut > rtt (20 µs)
	if got := f.ack(20, 0, 1, 0).Fcwnd.Float(); !near(got, seq[0]*0.6, 0.05) {
		t.Errorf("second cut after an RTT: fcwnd %.3f, want %.3f", got, seq[0]*0.6)
	}
	// A huge delay cuts at most max_mdf.
	f.advance(2000)
	before := f.ev.Fcwnd.Float()
	if got := f.ack(1000, 0, 1, 0).Fcwnd.Float(); !near(got, before/2, 0.01) {
		t.Errorf("cut capped at max_mdf: %.3f → %.3f", before, got)
	}
}

// The fabric delay excludes the receiver's ACK holding time, so a held
// ACK does not count as congestion; the full RTT smooths into rtt_state.
func TestSwiftFabricDelayExcludesHold(t *testing.T) {
	f := newFlow(t, SwiftConfig{BaseTarget: 10 * time.Microsecond, FSRange: -1})
	f.advance(100)
	r := f.ack(4, 30, 1, 0)
	if f.s.Stats.Increases != 1 {
		t.Errorf("a 4 µs fabric delay held 30 µs counted as congestion: %+v", f.s.Stats)
	}
	if got := wire.Timestamp(r.RTTState).Duration(); got < 33*time.Microsecond || got > 35*time.Microsecond {
		t.Errorf("rtt_state %v, want the full 34 µs", got)
	}
	if got := wire.Timestamp(r.DelayState).Duration(); got < 3*time.Microsecond || got > 5*time.Microsecond {
		t.Errorf("delay_state %v, want the 4 µs fabric delay", got)
	}
	// The EWMA keeps 3/4 of the old value.
	f.advance(10)
	r = f.ack(4, 0, 1, 0)
	want := 0.75*34 + 0.25*4
	if got := float64(r.RTTState) / unitsPerUs; !near(got, want, 0.3) {
		t.Errorf("rtt_state %.2f µs, want %.2f", got, want)
	}
}

// With EarlyRetxCuts, any retransmission cuts by max_mdf (once per RTT);
// the retry limit on RTO pins the window at the floor.
func TestSwiftRetransmitCuts(t *testing.T) {
	f := newFlow(t, SwiftConfig{BaseTarget: 10 * time.Microsecond, FSRange: -1, EarlyRetxCuts: true})
	f.advance(100)
	f.ack(5, 0, 1, 0) // srtt 5 µs, window 33-ish
	w := f.ev.Fcwnd.Float()
	f.advance(10)
	if got := f.retx(rue.RetxRACK, 1).Fcwnd.Float(); !near(got, w/2, 0.01) {
		t.Fatalf("RACK retransmission: %.3f → %.3f, want halved", w, got)
	}
	f.advance(1)
	if got := f.retx(rue.RetxTLP, 1).Fcwnd.Float(); !near(got, w/2, 0.01) {
		t.Errorf("second retransmission within the RTT cut again: %.3f", got)
	}
	f.advance(10)
	if got := f.retx(rue.RetxRTO, 1).Fcwnd.Float(); !near(got, w/4, 0.01) {
		t.Errorf("RTO retransmission an RTT later: %.3f, want %.3f", got, w/4)
	}
	f.advance(10)
	if got := f.retx(rue.RetxRTO, 3).Fcwnd.Float(); !near(got, 0.01, 0.001) {
		t.Errorf("third RTO: fcwnd %.4f, want the 0.01 floor", got)
	}
	if f.s.Stats.RetxCuts != 2 || f.s.Stats.RetxFloor != 1 || f.s.Stats.HeldByMark != 1 {
		t.Errorf("stats %+v", f.s.Stats)
	}
	// The datapath's ncwnd is untouched by retransmissions.
	if f.r.Ncwnd != 64 {
		t.Errorf("ncwnd %d after retransmissions, want 64", f.r.Ncwnd)
	}
}

// EventUndo (spurious timeouts) restores the window from before the
// cuts, and leaves alone a window that has grown past it since.
func TestSwiftUndoRestoresTheWindow(t *testing.T) {
	f := newFlow(t, SwiftConfig{BaseTarget: 10 * time.Microsecond, FSRange: -1})
	f.advance(100)
	f.ack(5, 0, 1, 0)
	before := f.ev.Fcwnd
	f.advance(10)
	f.retx(rue.RetxRTO, 1)
	f.advance(10)
	f.retx(rue.RetxRTO, 1)
	if f.ev.Fcwnd >= before/2 {
		t.Fatalf("two RTOs an RTT apart left fcwnd %v of %v", f.ev.Fcwnd, before)
	}
	undo := func(w rue.Fixed) rue.Response {
		e := &f.ev
		e.Type, e.UndoFcwnd, e.NumAcked = rue.EventUndo, w, 0
		e.T1, e.T2, e.T3, e.T4 = 0, 0, 0, f.now
		return f.post()
	}
	if r := undo(before); r.Fcwnd != before {
		t.Errorf("undo to %v gave %v", before, r.Fcwnd)
	}
	if r := undo(before / 4); r.Fcwnd != before {
		t.Errorf("undo to a smaller window %v cut %v to %v", before/4, before, r.Fcwnd)
	}
	if f.s.Stats.Undos != 1 || f.s.Stats.Samples != 1 {
		t.Errorf("undos %d samples %d, want 1 and 1", f.s.Stats.Undos, f.s.Stats.Samples)
	}
}

// With CongestedRetxCuts, an early retransmission cuts only when the
// flow's latest delay sample was more than a quarter above its target:
// a loss in a full queue, not a corrupted packet on an idle path.
func TestSwiftCongestedRetransmitCuts(t *testing.T) {
	f := newFlow(t, SwiftConfig{BaseTarget: 10 * time.Microsecond, FSRange: -1, CongestedRetxCuts: true})
	f.advance(100)
	f.ack(5, 0, 1, 0) // 5 µs: below the 10 µs target
	w := f.ev.Fcwnd.Float()
	f.advance(10)
	if got := f.retx(rue.RetxRACK, 1).Fcwnd.Float(); got != w {
		t.Fatalf("RACK retransmission on an idle path: %.3f → %.3f, want no cut", w, got)
	}
	f.ack(12, 0, 1, 0) // above target, within a quarter of it: Swift's own decrease
	w = f.ev.Fcwnd.Float()
	f.advance(30)
	if got := f.retx(rue.RetxTLP, 1).Fcwnd.Float(); got != w {
		t.Errorf("TLP retransmission 20 %% over target: %.3f → %.3f, want no cut", w, got)
	}
	f.ack(30, 0, 1, 0) // a full queue
	w = f.ev.Fcwnd.Float()
	f.advance(40)
	if got := f.retx(rue.RetxRACK, 1).Fcwnd.Float(); !near(got, w/2, 0.01) {
		t.Errorf("RACK retransmission in a full queue: %.3f → %.3f, want halved", w, got)
	}
	if f.s.Stats.RetxIgnored != 2 || f.s.Stats.RetxCuts != 1 {
		t.Errorf("stats %+v", f.s.Stats)
	}
}

// Persistent congestion walks the window down to the floor and no
// further; below one packet it turns into an inter-packet gap of
// srtt/fcwnd, counted from the previous send.
func TestSwiftFloorAndPacing(t *testing.T) {
	f := newFlow(t, SwiftConfig{BaseTarget: 10 * time.Microsecond, FSRange: -1})
	var seq []float64
	for i := 0; i < 20; i++ {
		f.advance(50)
		seq = append(seq, f.ack(40, 0, 1, 0).Fcwnd.Float())
	}
	for i := 1; i < len(seq); i++ {
		if seq[i] > seq[i-1] {
			t.Fatalf("window grew under persistent congestion: %v", seq)
		}
	}
	if got := seq[len(seq)-1]; !near(got, 0.01, 0.001) {
		t.Fatalf("window after 20 congested RTTs = %.4f, want the 0.01 floor: %v", got, seq)
	}
	r := f.r
	srtt := wire.Timestamp(r.RTTState).Duration()
	want := time.Duration(float64(srtt) / r.Fcwnd.Float())
	if d := r.IPG - want; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("IPG %v at fcwnd %.4f and srtt %v, want %v", r.IPG, r.Fcwnd.Float(), srtt, want)
	}
	if rto := 2*srtt + r.IPG; r.RTO < rto-time.Microsecond || r.RTO > rto+time.Microsecond {
		t.Errorf("RTO %v, want 2·srtt + IPG = %v", r.RTO, rto)
	}
	// At or above one packet there is no gap, and the RTO has its floor.
	f.ev.Fcwnd = 4 * rue.One
	f.advance(50)
	r = f.ack(3, 0, 1, 0)
	if r.IPG != 0 || r.RTO != 250*time.Microsecond {
		t.Errorf("fcwnd %.2f: IPG %v, RTO %v; want 0 and the 250 µs floor", r.Fcwnd.Float(), r.IPG, r.RTO)
	}
}

// The decrease marker is 24-bit time: a cut an RTT before the wrap still
// holds the next cut after it, and a long-idle flow is not held.
func TestSwiftMarkerWraps(t *testing.T) {
	f := newFlow(t, SwiftConfig{BaseTarget: 10 * time.Microsecond, FSRange: -1})
	f.now = mask24 - us(5)
	f.ack(20, 0, 1, 0)
	if f.s.Stats.Decreases != 1 {
		t.Fatal("no first cut")
	}
	f.advance(10) // past the wrap, 10 µs after the cut
	f.ack(20, 0, 1, 0)
	if f.s.Stats.Decreases != 1 || f.s.Stats.HeldByMark != 1 {
		t.Errorf("cut again within the RTT across the wrap: %+v", f.s.Stats)
	}
	f.advance(1e6) // a second idle: the marker must not look recent
	f.ack(20, 0, 1, 0)
	if f.s.Stats.Decreases != 2 {
		t.Errorf("held after a long idle: %+v", f.s.Stats)
	}
}

// ncwnd follows the receiver's rx-buffer level: +NicAI per window below
// the target, a level-proportional cut once per RTT above it, a max cut
// on a resource NACK; its fraction survives in cc_opaque.
func TestSwiftNcwnd(t *testing.T) {
	f := newFlow(t, SwiftConfig{})
	for i := 0; i < 64; i++ {
		f.advance(0.2)
		f.ack(4, 0, 1, 3)
	}
	if got := rue.Fixed(f.r.CCOpaque).Float(); f.r.Ncwnd != 65 || !near(got, 65, 0.05) {
		t.Errorf("ncwnd after 64 ACKs at level 3 = %d (%.3f), want 65", f.r.Ncwnd, got)
	}
	f.advance(10)
	f.ack(4, 0, 1, 25) // L 25, T 15: cut min(0.8·10/25, 0.5) = 0.32
	want := uint32(rue.Fixed(f.ev.CCOpaque).Float())
	if got := f.r.Ncwnd; got != 44 || want != 44 {
		t.Errorf("ncwnd after level 25 = %d (opaque %d), want 44", got, want)
	}
	for i := 0; i < 5; i++ { // within the RTT: no further cut
		f.advance(0.5)
		f.ack(4, 0, 1, 25)
	}
	if f.r.Ncwnd != 44 || f.s.Stats.NcwndDown != 1 {
		t.Errorf("ncwnd cut again within an RTT: %d, %+v", f.r.Ncwnd, f.s.Stats)
	}
	f.advance(10)
	f.ev.Type, f.ev.NackCode = rue.EventNACK, uint8(wire.NackInsufficientResources)
	e := &f.ev
	e.T4, e.T1 = f.now, f.now-us(4)
	e.T2, e.T3 = e.T1+us(2), e.T1+us(2)
	w := f.ev.Fcwnd
	r := f.post()
	if r.Ncwnd != 22 || r.Fcwnd != w {
		t.Errorf("resource NACK: ncwnd %d, fcwnd %v → %v; want ncwnd 22, fcwnd unchanged", r.Ncwnd, w, r.Fcwnd)
	}
	// The floor.
	for i := 0; i < 20; i++ {
		f.advance(20)
		f.ack(4, 0, 1, 31)
	}
	if f.r.Ncwnd != 1 {
		t.Errorf("ncwnd under a full receiver = %d, want the floor 1", f.r.Ncwnd)
	}
}

// PLB asks for a new path after PLBRounds congested rounds in a row, and
// never for a flow below its target.
func TestSwiftPLB(t *testing.T) {
	cfg := SwiftConfig{PLB: true, BaseTarget: 10 * time.Microsecond, FSRange: -1, AI: 1e-9, Beta: 1e-9} // windows about fixed
	hot := newFlow(t, cfg)
	hot.ev.Fcwnd = 4 * rue.One
	repaths := 0
	for i := 0; i < 40; i++ { // 10 rounds of 4 packets at 2 × target
		hot.advance(5)
		if hot.ack(20, 0, 1, 0).RandomizePath {
			repaths++
			if i != 19 && i != 39 {
				t.Errorf("repath at ACK %d, want after 5 rounds (ACK 19, 39)", i)
			}
		}
	}
	if repaths != 2 {
		t.Errorf("congested flow repathed %d times in 10 rounds, want 2", repaths)
	}
	cool := newFlow(t, cfg)
	cool.ev.Fcwnd = 4 * rue.One
	for i := 0; i < 40; i++ {
		cool.advance(5)
		d := 5.0
		if i%4 == 0 {
			d = 20 // one in four packets delayed: rounds not congested
		}
		if cool.ack(d, 0, 1, 0).RandomizePath {
			t.Fatal("a healthy flow was repathed")
		}
	}
	if cool.s.Stats.PLBRounds != 10 || cool.s.Stats.PLBCongested != 0 {
		t.Errorf("healthy flow stats %+v", cool.s.Stats)
	}
}

func BenchmarkSwiftHandle(b *testing.B) {
	s := NewSwift(SwiftConfig{PLB: true})
	ev := rue.Event{Type: rue.EventACK, Fcwnd: 32 * rue.One, Ncwnd: 64, NumAcked: 4, RxBufLevel: 10, ForwardHop: 2}
	b.ReportAllocs()
	now := uint32(1000)
	for i := 0; i < b.N; i++ {
		now += 10
		ev.Now = now & mask24
		ev.T4 = now
		ev.T1 = now - 40 - uint32(i&31)
		ev.T2, ev.T3 = ev.T1+20, ev.T1+20
		r, _ := s.Handle(&ev)
		ev.Fcwnd, ev.Ncwnd, ev.FabricMarker, ev.NICMarker, ev.RTTState, ev.CCOpaque, ev.PLBState =
			r.Fcwnd, r.Ncwnd, r.FabricMarker, r.NICMarker, r.RTTState, r.CCOpaque, r.PLBState
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// Below one packet the datapath's gate paces from the previous send: with
// fcwnd held at 0.5 a connection sends one packet every 2 × srtt (the IPG
// Swift returns), not one per srtt as Isekai's ACK-relative gap would give.
func TestSwiftPacingAgainstGate(t *testing.T) {
	s := NewSwift(SwiftConfig{MaxFcwnd: 0.5, MinRTO: time.Millisecond, BaseTarget: 100 * time.Microsecond})
	ua, ub := &pushULP{}, &pushULP{}
	p, err := sim.NewPair(sim.PairConfig{
		AB: link.MemConfig{Delay: 10 * time.Microsecond}, BA: link.MemConfig{Delay: 10 * time.Microsecond},
		Conn: falcon.ConnConfig{SCID: 1, DCID: 2}, ULPA: ua, ULPB: ub, RUEA: s})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 256)
	for i := 0; i < 200; i++ {
		if _, err := p.CA.Push(0, payload); err != nil {
			t.Fatal(err)
		}
	}
	p.RunUntil(func() bool { return ua.done >= 20 }, time.Second) // settle: window and srtt
	n0, t0 := p.CA.Stats.TxTxnPackets.Load(), p.Clock.Now()
	p.RunUntil(func() bool { return ua.done >= 120 }, time.Second)
	n, el := p.CA.Stats.TxTxnPackets.Load()-n0, p.Clock.Now()-t0
	if p.CA.Fcwnd() != rue.One/2 {
		t.Fatalf("fcwnd %v, want 0.5", p.CA.Fcwnd())
	}
	srtt := p.CA.SmoothedRTT()
	gap := el / time.Duration(n)
	if gap < 19*srtt/10 || gap > 21*srtt/10 {
		t.Errorf("%d packets in %v: one per %v, want 2 × srtt (%v)", n, el, gap, 2*srtt)
	}
	if s.Stats.Paced == 0 || p.CA.Stats.RetxRTO.Load() != 0 {
		t.Errorf("paced responses %d, RTO retransmissions %d", s.Stats.Paced, p.CA.Stats.RetxRTO.Load())
	}
}

// slowULP acknowledges pushes at a fixed rate: a receiver whose host
// drains slower than the network delivers.
type slowULP struct {
	held  []wire.RSN
	conn  *falcon.Conn
	every time.Duration
	next  time.Duration
}

func (u *slowULP) OnRequest(c *falcon.Conn, r *falcon.Request) {
	if r.Kind == tl.Push {
		u.conn = c
		u.held = append(u.held, r.RSN)
	}
}
func (u *slowULP) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {}
func (u *slowULP) OnXon(c *falcon.Conn)                                {}

func (u *slowULP) drain(now time.Duration) {
	for len(u.held) > 0 && now >= u.next {
		u.conn.AckPush(u.held[0])
		u.held = u.held[1:]
		u.next = max(u.next, now-u.every) + u.every
	}
}

// Under a slow receiver the rx-buffer level rises past the target and
// Swift shrinks ncwnd from its initial 64, so requests wait at the sender
// instead of filling the receiver; nothing times out.
func TestSwiftNcwndSlowReceiver(t *testing.T) {
	s := NewSwift(SwiftConfig{BaseTarget: 100 * time.Microsecond})
	ua, ub := &pushULP{}, &slowULP{every: 2 * time.Microsecond}
	p, err := sim.NewPair(sim.PairConfig{
		AB: link.MemConfig{Delay: 5 * time.Microsecond}, BA: link.MemConfig{Delay: 5 * time.Microsecond},
		Conn: falcon.ConnConfig{SCID: 1, DCID: 2, InitFcwnd: 128 * rue.One}, ULPA: ua, ULPB: ub, RUEA: s,
		Limits: tl.Limits{CellSize: 256, TxReqPkts: 1024, TxReqCells: 1 << 16, TxDataPkts: 1024, TxDataCell: 1 << 16,
			RxReqPkts: 1024, RxReqCells: 1 << 16, RxNetPkts: 96, RxNetCells: 1 << 16, HoLPkts: 4, HoLCells: 64}})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 256)
	sent, minN := 0, p.CA.Ncwnd()
	end := p.Clock.Now() + 3*time.Millisecond
	for p.Clock.Now() < end {
		for sent < ua.done+200 {
			if _, err := p.CA.Push(0, payload); err != nil {
				break
			}
			sent++
		}
		ub.drain(p.Clock.Now())
		if !p.Step() {
			p.Clock.Advance(time.Microsecond)
		}
		minN = min(minN, p.CA.Ncwnd())
	}
	if s.Stats.NcwndDown == 0 || minN >= 64 {
		t.Errorf("ncwnd never shrank under a slow receiver: min %d, %+v", minN, s.Stats)
	}
	if p.CA.Stats.RetxRTO.Load() != 0 || p.CB.Stats.RxNoResource.Load() != 0 {
		t.Errorf("RTO retransmissions %d, resource NACKs %d", p.CA.Stats.RetxRTO.Load(), p.CB.Stats.RxNoResource.Load())
	}
	if ua.done < 1000 {
		t.Errorf("only %d pushes completed in 3 ms at one per 2 µs", ua.done)
	}
	t.Logf("ncwnd min %d now %d, completed %d, %+v", minN, p.CA.Ncwnd(), ua.done, s.Stats)
}

// By default, losses repaired early leave the window alone; an RTO still
// cuts it.
func TestSwiftEarlyRetxLeaveTheWindow(t *testing.T) {
	f := newFlow(t, SwiftConfig{BaseTarget: 10 * time.Microsecond, FSRange: -1})
	f.advance(100)
	f.ack(5, 0, 1, 0)
	w := f.ev.Fcwnd
	for _, why := range []rue.RetxReason{rue.RetxEarly, rue.RetxRACK, rue.RetxTLP} {
		f.advance(10)
		if got := f.retx(why, 1).Fcwnd; got != w {
			t.Errorf("reason %d cut the window %v → %v", why, w, got)
		}
	}
	f.advance(10)
	if got := f.retx(rue.RetxRTO, 1).Fcwnd.Float(); !near(got, w.Float()/2, 0.01) {
		t.Errorf("RTO: %v → %.3f, want halved", w, got)
	}
	if f.s.Stats.RetxIgnored != 3 || f.s.Stats.RetxCuts != 1 {
		t.Errorf("stats %+v", f.s.Stats)
	}
}

// Whatever the records hold (timestamps and levels come from the network,
// state from a previous engine), Swift's answer stays within its bounds
// (an RTO of 0, before any delay sample, leaves the datapath's as it is).
func TestSwiftBoundsOnArbitraryEvents(t *testing.T) {
	s := NewSwift(SwiftConfig{PLB: true})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		ev := rue.Event{Type: rue.EventType(rng.IntN(3)), T1: rng.Uint32(), T2: rng.Uint32(), T3: rng.Uint32(),
			T4: rng.Uint32(), RetxCount: uint8(rng.Uint32()), RetxReason: rue.RetxReason(rng.IntN(4)),
			NackCode: uint8(rng.IntN(16)), ForwardHop: uint8(rng.IntN(16)), RxBufLevel: uint8(rng.IntN(32)),
			NumAcked: rng.Uint32(), Fcwnd: rue.Fixed(rng.Uint32() >> 11), ConnFcwnd: rue.Fixed(rng.Uint32() >> 11),
			Ncwnd: rng.Uint32(), FabricMarker: rng.Uint32(), NICMarker: rng.Uint32(), RTTState: rng.Uint32(),
			CCOpaque: rng.Uint32(), PLBState: rng.Uint32(), Now: rng.Uint32() & mask24}
		if i%2 == 0 { // plausible magnitudes too
			ev.RTTState, ev.NumAcked, ev.Ncwnd = ev.RTTState&0xfff, ev.NumAcked&0xff, ev.Ncwnd&0x1ff
		}
		r, ok := s.Handle(&ev)
		if !ok || r.Fcwnd < rue.FixedFrom(0.01) || r.Fcwnd > 256*rue.One || r.Ncwnd < 1 || r.Ncwnd > 256 ||
			r.IPG < 0 || r.RTO != 0 && r.RTO < 250*time.Microsecond || r.RTO > time.Duration(math.MaxInt64/2) {
			t.Fatalf("event %+v → response %+v", ev, r)
		}
	}
}

// TestSwiftRequestAlpha [RM-8]: with ReqAlpha set, each delay sample sets
// the connection's request alpha to ReqAlpha × min(1, target/delay,
// target level/rx-buffer level); without it Swift leaves the NIC's alpha.
func TestSwiftRequestAlpha(t *testing.T) {
	f := newFlow(t, SwiftConfig{ReqAlpha: 0.125, FSRange: -1}) // target 7 µs at 0 hops
	f.advance(50)
	if r := f.ack(5, 1, 4, 0); r.AlphaRequest != rue.FixedFrom(0.125) {
		t.Errorf("below target, empty buffer: alpha %v, want 0.125", r.AlphaRequest)
	}
	f.advance(50)
	if r := f.ack(14, 1, 4, 0); !near(r.AlphaRequest.Float(), 0.125*7/14, 0.002) {
		t.Errorf("delay twice the target: alpha %v, want %.4f", r.AlphaRequest, 0.125*7/14)
	}
	f.advance(50)
	if r := f.ack(5, 1, 4, 30); !near(r.AlphaRequest.Float(), 0.125*15/30, 0.002) {
		t.Errorf("rx-buffer level 30 of target 15: alpha %v, want %.4f", r.AlphaRequest, 0.125*15/30)
	}
	g := newFlow(t, SwiftConfig{})
	g.advance(50)
	if r := g.ack(14, 1, 4, 30); r.AlphaRequest != 0 {
		t.Errorf("without ReqAlpha: alpha %v, want 0 (the NIC's)", r.AlphaRequest)
	}
}
