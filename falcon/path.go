package falcon

import (
	"strconv"
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
)

// PathPolicy chooses the flow (path) of a connection's new packets
// [digest §7]; retransmissions keep their flow.
type PathPolicy uint8

// Path policies.
const (
	// PathRoundRobin takes the flows in turn.
	PathRoundRobin PathPolicy = iota
	// PathWeighted is round robin weighted by the flows' fabric windows
	// (Gen2): weight wᵢ = clamp(round(15·fcwndᵢ/Σ fcwnd), 1, 15), served
	// smoothly (each pick goes to the flow with the most accumulated
	// credit).
	PathWeighted
	// PathMaxOpen takes the flow with the most open window, fcwndᵢ minus
	// its packets in flight (Gen3, the paper's policy); ties go round robin.
	PathMaxOpen
	numPathPolicies
)

var pathPolicyNames = [numPathPolicies]string{"round-robin", "weighted", "max-open"}

// String returns the policy's name as the benches spell it.
func (p PathPolicy) String() string {
	if p < numPathPolicies {
		return pathPolicyNames[p]
	}
	return "PathPolicy(" + strconv.Itoa(int(p)) + ")"
}

// ParsePathPolicy returns the policy named s.
func ParsePathPolicy(s string) (PathPolicy, bool) {
	for i, n := range pathPolicyNames {
		if n == s {
			return PathPolicy(i), true
		}
	}
	return 0, false
}

// pickFlow chooses the flow of a new packet by the connection's policy and
// counts the packet in flight on it.
func (c *Conn) pickFlow() uint8 {
	n := uint8(c.cfg.Flows)
	var f uint8
	switch {
	case n == 1:
		f = 0
	case c.cfg.PathPolicy == PathWeighted:
		f = c.pickWeighted()
	case c.cfg.PathPolicy == PathMaxOpen:
		f = c.pickMaxOpen()
	default:
		f = c.nextFlow
		c.nextFlow = (f + 1) % n
	}
	c.flows[f].out++
	return f
}

// flowWeight is flow i's weight out of 15 by its share of the window.
func (c *Conn) flowWeight(i int) int32 {
	w := int32((15*uint64(c.flows[i].fcwnd) + uint64(c.fcwnd)/2) / uint64(max(c.fcwnd, 1)))
	return min(max(w, 1), 15)
}

func (c *Conn) pickWeighted() uint8 {
	best, total := -1, int32(0)
	for i := 0; i < c.cfg.Flows; i++ {
		w := c.flowWeight(i)
		total += w
		c.flows[i].credit += w
		if best < 0 || c.flows[i].credit > c.flows[best].credit {
			best = i
		}
	}
	c.flows[best].credit -= total
	return uint8(best)
}

func (c *Conn) pickMaxOpen() uint8 {
	n := c.cfg.Flows
	best, bestOpen := -1, int64(0)
	for k := 0; k < n; k++ {
		i := (int(c.nextFlow) + k) % n
		open := int64(c.flows[i].fcwnd) - int64(c.flows[i].out)*int64(rue.One)
		if best < 0 || open > bestOpen {
			best, bestOpen = i, open
		}
	}
	c.nextFlow = uint8((best + 1) % n)
	return uint8(best)
}

// landed takes an acknowledged packet off its flow's in-flight count.
func (c *Conn) landed(flow uint8) {
	if f := &c.flows[c.flowIndex(flow)]; f.out > 0 {
		f.out--
	}
}

// repath gives flow id a new random label: new entropy in the upper 18
// bits, the low 2 bits keep the flow id [S §10.4].
func (c *Conn) repath(id uint8) {
	id %= uint8(c.cfg.Flows)
	c.cfg.FlowLabels[id] = (c.ep.rng.Uint32()<<2 | uint32(id)) & (1<<20 - 1)
}

// plbRepath is PLB's request from the RUE: honoured unless a protective
// reroute of the flow is recent (its hold suspends congestion repaths, as
// Linux PLB does after an RTO).
func (c *Conn) plbRepath(id uint8, now time.Duration) {
	f := &c.flows[id%uint8(c.cfg.Flows)]
	if f.holdUntil > now {
		c.Stats.RepathHeld.Inc()
		return
	}
	c.repath(id)
	c.Stats.Repath.Inc()
}

// reroute is protective reroute (the paper §3.2): a retransmission timeout
// on a flow (and, with RerouteOnProbe, a tail-loss probe) moves it to a new
// path at once, at most once per two RTTs (one RTO before an RTT sample), and holds PLB off it for a random
// time in [RerouteHold, 2·RerouteHold). It reports whether it moved the
// flow.
func (c *Conn) reroute(id uint8, now time.Duration) bool {
	if !c.cfg.ProtectiveReroute {
		return false
	}
	f := &c.flows[id%uint8(c.cfg.Flows)]
	if f.rerouted && now-f.rerouteAt < c.rerouteGap() {
		return false
	}
	f.rerouted, f.rerouteAt = true, now
	hold := c.cfg.RerouteHold
	f.holdUntil = now + hold + time.Duration(uint64(c.ep.rng.Uint32())*uint64(hold)>>32)
	c.repath(id)
	c.Stats.Reroute.Inc()
	return true
}

// FlowState is one flow's view for status displays and tests.
type FlowState struct {
	Label    uint32        // current flow label (low 2 bits: the flow id)
	Fcwnd    rue.Fixed     // the flow's fabric window
	InFlight uint32        // packets sent on it and not yet acknowledged
	RTT      time.Duration // the RUE's smoothed RTT (rtt_state)
	Delay    time.Duration // the RUE's latest delay sample (delay_state)
}

// Flows returns the state of each of the connection's flows.
func (c *Conn) Flows() []FlowState {
	out := make([]FlowState, c.cfg.Flows)
	for i := range out {
		f := &c.flows[i]
		out[i] = FlowState{Label: c.cfg.FlowLabels[i], Fcwnd: f.fcwnd, InFlight: f.out,
			RTT: wire.Timestamp(f.rttState).Duration(), Delay: wire.Timestamp(f.delayState).Duration()}
	}
	return out
}

// Ncwnd returns the enforced NIC window.
func (c *Conn) Ncwnd() uint32 { return c.ncwnd }

// rerouteGap is the least time between two reroutes of a flow: two RTTs,
// long enough for the moved packet to be acknowledged on its new path.
func (c *Conn) rerouteGap() time.Duration { return 2 * c.rtt.Or(c.rto/2) }
