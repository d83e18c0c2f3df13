package port

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/rue"
	"falconnic/firmware"
)

// Firmware names: the RUE algorithms a port can run.
const (
	FirmwareSwift = "swift" // Swift congestion control (the default)
	FirmwareFixed = "fixed" // fixed windows
)

// FixedNcwnd is the fixed firmware's NIC window, in requests (its
// default): the cap of a connection between two NICs of one daemon under
// any firmware (falcon.ConnConfig.MaxNcwnd), where no receiver's buffers
// push back.
const FixedNcwnd = 64

// Daemon-scale Swift targets. The port runs on the host's real clock, and
// its "fabric delay" (T4 − T1 less the peer's holding time T3 − T2) is not
// an emulated switch's but two goroutine hand-offs and two bursts of the
// other port's work: tens of µs between two ports of one idle daemon, a
// few hundred over UDP loopback, and milliseconds whenever the host runs
// something else (a TCG guest). A datacenter's 25 µs, or the emulated
// fabric's 7 µs, would keep every connection of a daemon at its floor;
// these aim the windows at a delay a daemon meets when it is not
// overloaded and still halve them when the host falls behind.
//
// For the same reason the daemon's Swift keeps at least one packet in
// flight (DaemonMinFcwnd: pacing a connection at one packet per hundred
// round trips, Swift's floor, turns a scheduling hiccup into a stall) and
// times out no sooner than DaemonMinRTO (Isekai's floor): a host that did
// not run the port's goroutine for a quarter of a millisecond makes RTO
// resends of packets that were not lost, and Swift cuts on each.
const (
	DaemonBaseTarget  = 500 * time.Microsecond
	DaemonFlowScaling = 500 * time.Microsecond
	DaemonMinFcwnd    = 1
	DaemonMinRTO      = time.Millisecond
)

// FirmwareSpec chooses a port's firmware and its parameters; zero fields
// take the defaults noted. It is the per-NIC "firmware" object of the
// daemon's config and the argument of a run-time swap.
type FirmwareSpec struct {
	// Name is FirmwareSwift (default) or FirmwareFixed.
	Name string `json:"name,omitempty"`
	// Swift: target delay = base_target + per_hop × hops + flow scaling up
	// to flow_scaling (defaults DaemonBaseTarget, 2 µs — the daemon's
	// fabrics report no hops —, DaemonFlowScaling);
	// ai, beta, max_mdf (1, 0.8, 0.5); fcwnd bounds (DaemonMinFcwnd, 256;
	// below 1 the window becomes pacing); the
	// receiver's target rx-buffer level for ncwnd (15); plb.
	BaseTarget  Duration `json:"base_target,omitzero"`
	PerHop      Duration `json:"per_hop,omitzero"`
	FlowScaling Duration `json:"flow_scaling,omitzero"`
	AI          float64  `json:"ai,omitempty"`
	Beta        float64  `json:"beta,omitempty"`
	MaxMDF      float64  `json:"max_mdf,omitempty"`
	MinFcwnd    float64  `json:"min_fcwnd,omitempty"`
	MaxFcwnd    float64  `json:"max_fcwnd,omitempty"`
	TargetLevel uint8    `json:"target_level,omitempty"`
	PLB         bool     `json:"plb,omitempty"`
	// ReqAlpha, when positive, has Swift set each connection's dynamic
	// threshold on the NIC's Tx request packets [RM-8] (0.125 is Isekai's
	// scale); 0 leaves none.
	ReqAlpha float64 `json:"req_alpha,omitempty"`
	// Fixed: the windows every connection gets (defaults 32 and 64); a
	// connection opened with its own initial window (NVMe's) keeps that.
	Fcwnd float64 `json:"fcwnd,omitempty"`
	Ncwnd uint32  `json:"ncwnd,omitempty"`
	// Both: the RTO floor (default DaemonMinRTO for Swift, 250 µs for
	// fixed, its value before Swift; a connection's own floor, NVMe's,
	// still applies).
	MinRTO Duration `json:"min_rto,omitzero"`
}

// ErrFirmware marks an invalid FirmwareSpec.
var ErrFirmware = errors.New("firmware")

// Check reports whether s names a known firmware with sane parameters.
func (s FirmwareSpec) Check() error {
	_, err := s.build()
	return err
}

// Normalized returns s with its name filled in.
func (s FirmwareSpec) Normalized() FirmwareSpec {
	if s.Name == "" {
		s.Name = FirmwareSwift
	}
	return s
}

// fwEngine is a built firmware: its engine, and the concrete algorithm
// for status.
type fwEngine struct {
	spec  FirmwareSpec
	eng   rue.Engine
	swift *firmware.Swift
	fixed *firmware.Fixed
}

func (s FirmwareSpec) build() (*fwEngine, error) {
	s = s.Normalized()
	bad := func(f string, a ...any) (*fwEngine, error) {
		return nil, fmt.Errorf("%w: %s", ErrFirmware, fmt.Sprintf(f, a...))
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"ai", s.AI}, {"beta", s.Beta}, {"max_mdf", s.MaxMDF}, {"min_fcwnd", s.MinFcwnd}, {"max_fcwnd", s.MaxFcwnd}, {"fcwnd", s.Fcwnd}, {"req_alpha", s.ReqAlpha}} {
		if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			return bad("%s %v must be a finite number ≥ 0", v.name, v.v)
		}
	}
	if s.BaseTarget < 0 || s.PerHop < 0 || s.FlowScaling < 0 || s.MinRTO < 0 {
		return bad("durations must not be negative")
	}
	def := func(v *Duration, d time.Duration) {
		if *v == 0 {
			*v = Duration(d)
		}
	}
	defF := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	switch s.Name {
	case FirmwareSwift:
		// The defaults go into the spec, so status shows what runs.
		def(&s.BaseTarget, DaemonBaseTarget)
		def(&s.PerHop, 2*time.Microsecond)
		def(&s.FlowScaling, DaemonFlowScaling)
		def(&s.MinRTO, DaemonMinRTO)
		defF(&s.AI, 1)
		defF(&s.Beta, 0.8)
		defF(&s.MaxMDF, 0.5)
		defF(&s.MinFcwnd, DaemonMinFcwnd)
		defF(&s.MaxFcwnd, 256)
		if s.TargetLevel == 0 {
			s.TargetLevel = 15
		}
		if s.MaxMDF >= 1 || s.Beta > 1 {
			return bad("swift: max_mdf must be below 1 and beta at most 1")
		}
		if s.MaxFcwnd < s.MinFcwnd || s.MaxFcwnd > 2047 {
			return bad("swift: max_fcwnd %v must lie in [min_fcwnd %v, 2047] (the records' 11-bit window)", s.MaxFcwnd, s.MinFcwnd)
		}
		if s.TargetLevel > 31 {
			return bad("swift: target_level %d out of 1..31", s.TargetLevel)
		}
		sw := firmware.NewSwift(firmware.SwiftConfig{BaseTarget: time.Duration(s.BaseTarget), PerHop: time.Duration(s.PerHop),
			FSRange: time.Duration(s.FlowScaling), AI: s.AI, Beta: s.Beta, MaxMDF: s.MaxMDF,
			MinFcwnd: s.MinFcwnd, MaxFcwnd: s.MaxFcwnd, TargetLevel: s.TargetLevel, PLB: s.PLB, ReqAlpha: s.ReqAlpha,
			MinRTO: time.Duration(s.MinRTO)})
		return &fwEngine{spec: s, eng: sw, swift: sw}, nil
	case FirmwareFixed:
		defF(&s.Fcwnd, 32)
		if s.Ncwnd == 0 {
			s.Ncwnd = FixedNcwnd
		}
		def(&s.MinRTO, 250*time.Microsecond)
		if s.Fcwnd < 1 || s.Fcwnd > 2047 || s.Ncwnd > 1<<16 {
			return bad("fixed: fcwnd %v must lie in [1, 2047] and ncwnd %d at most 65536", s.Fcwnd, s.Ncwnd)
		}
		fx := firmware.NewFixed(firmware.FixedConfig{Fcwnd: rue.FixedFrom(s.Fcwnd), Ncwnd: s.Ncwnd, MinRTO: time.Duration(s.MinRTO)})
		return &fwEngine{spec: s, eng: fx, fixed: fx}, nil
	}
	return bad("unknown firmware %q (want %s or %s)", s.Name, FirmwareSwift, FirmwareFixed)
}

// UseFirmware makes spec the port's firmware (before Run, or on the port's
// goroutine: SwapFirmware). The connections keep their windows, RTT and
// markers, which round-trip through the RUE's records: the new firmware
// takes over from the values the datapath enforces, with no reset.
func (p *Port) UseFirmware(spec FirmwareSpec) error {
	fw, err := spec.build()
	if err != nil {
		return err
	}
	p.rue.fw = fw
	return nil
}

// SwapFirmware replaces a running port's firmware (from any goroutine).
func (p *Port) SwapFirmware(spec FirmwareSpec) error {
	fw, err := spec.build()
	if err != nil {
		return err
	}
	if !p.Call(func(*falcon.Endpoint) { p.rue.fw = fw }) {
		return ErrStopped
	}
	return nil
}

// Firmware returns the spec of the firmware the port runs (on the port's
// goroutine, or before Run).
func (p *Port) Firmware() FirmwareSpec { return p.rue.fw.spec }

// portRUE is the port's congestion control: the chosen firmware. Under
// the fixed firmware a connection opened with an InitFcwnd keeps that
// window (a per-connection option, as NVMe's wider window is); under Swift
// it is where the window starts.
type portRUE struct {
	p  *Port
	fw *fwEngine
}

// Handle implements rue.Engine (on the port's goroutine).
func (r *portRUE) Handle(ev *rue.Event) (rue.Response, bool) {
	resp, ok := r.fw.eng.Handle(ev)
	if ok && r.fw.fixed != nil {
		if w, fixed := r.p.windows[ev.Conn]; fixed {
			resp.Fcwnd = w
		}
	}
	return resp, ok
}

// FirmwareStatus is the port's firmware in the daemon status: which runs,
// its parameters and counters, and the congestion state of its busiest
// connections.
type FirmwareStatus struct {
	Firmware FirmwareSpec      `json:"firmware"`
	Counters map[string]uint64 `json:"counters"`
	// Conns are at most the top-N connections by packets in flight (ties:
	// the lower CID); ConnsTotal counts them all.
	Conns      []ConnCC `json:"conns"`
	ConnsTotal int      `json:"conns_total"`
}

// ConnCC is one connection's congestion state.
type ConnCC struct {
	SCID     uint32 `json:"scid"`
	DCID     uint32 `json:"dcid"`
	Protocol string `json:"protocol"`
	// Fcwnd is the connection's fabric window (the sum over its flows),
	// Ncwnd its NIC window, in packets.
	Fcwnd float64 `json:"fcwnd"`
	Ncwnd uint32  `json:"ncwnd"`
	// RTT is the datapath's smoothed RTT, RTO the enforced timeout.
	RTT      time.Duration `json:"rtt_ns"`
	RTO      time.Duration `json:"rto_ns"`
	InFlight int           `json:"in_flight"`
	// Repaths counts PLB's path changes, Reroutes protective reroutes.
	Repaths  uint64   `json:"repaths"`
	Reroutes uint64   `json:"reroutes"`
	Flows    []FlowCC `json:"flows"`
}

// FlowCC is one flow (path) of a connection.
type FlowCC struct {
	Label    uint32  `json:"label"`
	Fcwnd    float64 `json:"fcwnd"`
	InFlight uint32  `json:"in_flight"`
	// RTT is the firmware's smoothed RTT of the flow (rtt_state), Delay
	// its latest delay sample, Target Swift's target delay at the flow's
	// window (0 under the fixed firmware).
	RTT    time.Duration `json:"rtt_ns"`
	Delay  time.Duration `json:"delay_ns"`
	Target time.Duration `json:"target_ns,omitempty"`
}

// DefaultStatusConns bounds the connections FirmwareStatus lists.
const DefaultStatusConns = 16

// FirmwareStatus reports the firmware and the top connections (on the
// port's goroutine). top ≤ 0 takes DefaultStatusConns.
func (p *Port) FirmwareStatus(top int) FirmwareStatus {
	if top <= 0 {
		top = DefaultStatusConns
	}
	fw := p.rue.fw
	st := FirmwareStatus{Firmware: fw.spec, Counters: fw.counters(), Conns: []ConnCC{}}
	conns := p.ep.Conns()
	live := make([]*falcon.Conn, 0, len(conns))
	for _, c := range conns {
		if !c.Dead() {
			live = append(live, c)
		}
	}
	st.ConnsTotal = len(live)
	sort.SliceStable(live, func(i, j int) bool {
		a, b := live[i].Outstanding(), live[j].Outstanding()
		if a != b {
			return a > b
		}
		return live[i].SCID() < live[j].SCID()
	})
	for _, c := range live[:min(top, len(live))] {
		cfg := c.Config()
		cc := ConnCC{SCID: c.SCID(), DCID: cfg.DCID, Protocol: protoName(cfg.Protocol), Fcwnd: c.Fcwnd().Float(),
			Ncwnd: c.Ncwnd(), RTT: c.SmoothedRTT(), RTO: c.RTO(), InFlight: c.Outstanding(),
			Repaths: c.Stats.Repath.Load(), Reroutes: c.Stats.Reroute.Load()}
		for _, f := range c.Flows() {
			fc := FlowCC{Label: f.Label, Fcwnd: f.Fcwnd.Float(), InFlight: f.InFlight, RTT: f.RTT, Delay: f.Delay}
			if fw.swift != nil {
				fc.Target = fw.swift.TargetDelay(f.Fcwnd.Float(), 0)
			}
			cc.Flows = append(cc.Flows, fc)
		}
		st.Conns = append(st.Conns, cc)
	}
	return st
}

// counters lists the firmware's own counters by name.
func (fw *fwEngine) counters() map[string]uint64 {
	if fw.fixed != nil {
		return map[string]uint64{"events": fw.fixed.Events, "samples": fw.fixed.Samples}
	}
	s := &fw.swift.Stats
	return map[string]uint64{
		"events": s.Events, "samples": s.Samples, "no_sample": s.NoSample,
		"increases": s.Increases, "decreases": s.Decreases, "held_by_marker": s.HeldByMark,
		"retx_cuts": s.RetxCuts, "retx_floor": s.RetxFloor, "retx_ignored": s.RetxIgnored, "undos": s.Undos,
		"at_floor": s.AtFloor, "paced": s.Paced,
		"ncwnd_up": s.NcwndUp, "ncwnd_down": s.NcwndDown, "ncwnd_nack": s.NcwndNack,
		"plb_rounds": s.PLBRounds, "plb_congested": s.PLBCongested, "repaths": s.Repaths, "alpha_set": s.AlphaSet,
	}
}

// Duration is a time.Duration written as a Go duration string ("500us").
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"500us\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
