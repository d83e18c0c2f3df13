package firmware

import (
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
)

// DelaySelect picks the delay signal [S §10.1]: full RTT, fabric delay
// (RTT minus the receiver's ACK holding time), forward or reverse one-way
// delay (synchronised clocks only).
type DelaySelect uint8

// Delay signals.
const (
	DelayRTT DelaySelect = iota
	DelayFabric
	DelayForward
	DelayReverse
)

// sample returns an ACK or NACK event's round trip and the delay sel
// picks, in Falcon time units (24-bit, wrapping); ok is false when the
// timestamps make no sample. A zero delay is a sample like any other: a
// link with no queue (two ports of one daemon, whose frames can leave and
// arrive within one unit) reads zero, and such ACKs must still count. A
// round trip that reads as zero took less than a unit, and counts as one.
// A negative one (or delay) is no sample: the timestamps do not describe
// one packet's trip.
func (sel DelaySelect) sample(ev *rue.Event) (rtt, delay int32, ok bool) {
	if ev.Type == rue.EventRetx || ev.T1 == 0 && ev.T2 == 0 {
		return 0, 0, false
	}
	r := wrap24(ev.T4, ev.T1)
	hold := max(wrap24(ev.T3, ev.T2), 0)
	var d int32
	switch sel {
	case DelayRTT:
		d = r
	case DelayFabric:
		d = r - hold
	case DelayForward:
		d = wrap24(ev.T2, ev.T1)
	case DelayReverse:
		d = wrap24(ev.T4, ev.T3)
	}
	if r < 0 || d < 0 {
		return 0, 0, false
	}
	return max(r, 1), d, true
}

// FixedConfig configures Fixed. Zero fields take the defaults noted.
type FixedConfig struct {
	Fcwnd     rue.Fixed     // default 32 packets
	Ncwnd     uint32        // default 64
	RTOScalar float64       // default 2.0 (digest §6.10)
	MinRTO    time.Duration // default 250 µs
	// Alpha weighs the old value in the RTT EWMA (new = α·old + (1−α)·sample,
	// Isekai's convention); default 0.75.
	Alpha float64
	Delay DelaySelect // default DelayFabric (Isekai's default)
}

// Fixed is a fixed-window RUE.
type Fixed struct {
	cfg              FixedConfig
	Events, Samples  uint64
	lastRTT, lastRTO time.Duration
}

// NewFixed returns a Fixed RUE.
func NewFixed(cfg FixedConfig) *Fixed {
	if cfg.Fcwnd == 0 {
		cfg.Fcwnd = 32 * rue.One
	}
	if cfg.Ncwnd == 0 {
		cfg.Ncwnd = 64
	}
	if cfg.RTOScalar == 0 {
		cfg.RTOScalar = 2
	}
	if cfg.MinRTO == 0 {
		cfg.MinRTO = 250 * time.Microsecond
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.75
	}
	if cfg.Delay == 0 {
		cfg.Delay = DelayFabric
	}
	return &Fixed{cfg: cfg}
}

// sample is the configured delay of an ACK/NACK event in Falcon time
// units (DelaySelect.sample), at least one: the smoothed delay's zero
// means "none yet".
func (f *Fixed) sample(ev *rue.Event) (uint32, bool) {
	_, d, ok := f.cfg.Delay.sample(ev)
	return uint32(max(d, 1)), ok
}

// Handle answers at once: the configured windows and an RTO from the
// smoothed delay carried in the event's rtt_state.
func (f *Fixed) Handle(ev *rue.Event) (rue.Response, bool) {
	f.Events++
	r := rue.Response{Conn: ev.Conn, Flow: ev.Flow, CCMetadata: ev.CCMetadata, Fcwnd: f.cfg.Fcwnd, Ncwnd: f.cfg.Ncwnd,
		FabricMarker: ev.FabricMarker, NICMarker: ev.NICMarker, NcwndUp: ev.NcwndUp, DelayState: ev.DelayState,
		RTTState: ev.RTTState, BaseDelay: ev.BaseDelay, CCOpaque: ev.CCOpaque, RTO: ev.RTO}
	if s, ok := f.sample(ev); ok {
		f.Samples++
		if r.RTTState == 0 {
			r.RTTState = s
		} else {
			r.RTTState = uint32(f.cfg.Alpha*float64(r.RTTState) + (1-f.cfg.Alpha)*float64(s))
		}
		r.DelayState = s
	}
	if r.RTTState != 0 {
		srtt := wire.Timestamp(r.RTTState).Duration()
		r.RTO = max(time.Duration(f.cfg.RTOScalar*float64(srtt)), f.cfg.MinRTO)
		f.lastRTT, f.lastRTO = srtt, r.RTO
	}
	return r, true
}

// Smoothed returns the last smoothed delay and RTO it computed.
func (f *Fixed) Smoothed() (rtt, rto time.Duration) { return f.lastRTT, f.lastRTO }
