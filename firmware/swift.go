package firmware

import (
	"math"
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
)

// SwiftConfig configures Swift. Zero fields take the defaults noted; the
// delays default to the emulated fabric's scale, not a datacenter's (see
// the package documentation).
type SwiftConfig struct {
	// Target delay = BaseTarget + PerHop × hops + flow scaling
	// [S §10.3.2]. Defaults 7 µs and 2 µs (see the package documentation).
	BaseTarget, PerHop time.Duration
	// Flow scaling adds clamp(a/√fcwnd + b, 0, FSRange) with a and b chosen
	// so the term is FSRange at fcwnd FSMin and 0 at FSMax. Defaults 20 µs,
	// 0.1, 256. A negative FSRange turns flow scaling off.
	FSRange      time.Duration
	FSMin, FSMax float64
	// AI is the additive increase per RTT (default 1), Beta the
	// multiplicative-decrease gain (default 0.8), MaxMDF the largest cut
	// per RTT (default 0.5).
	AI, Beta, MaxMDF float64
	// SubOneGain, when positive, bounds the increase per ACK below one
	// packet to SubOneGain × fcwnd (Swift's rule, AI per ACK, lets many
	// small flows jump to a whole packet at once; with a shallow fabric
	// buffer that burst overflows it). 0 keeps Swift's rule.
	SubOneGain float64
	// MinFcwnd and MaxFcwnd bound the fabric window (defaults 0.01, 256);
	// below one packet the window becomes pacing.
	MinFcwnd, MaxFcwnd float64
	// The NIC window (ncwnd) tracks the receiver's rx-buffer level
	// against TargetLevel (default 15 of 31) [S §10.3.3]: NicAI per RTT
	// below it (default 1), a cut of min(NicBeta·(L−T)/L, NicMaxMDF) once
	// per RTT above it (defaults 0.8, 0.5), NicMaxMDF on a resource NACK.
	// Bounds [MinNcwnd, MaxNcwnd] default [1, 256].
	TargetLevel               uint8
	NicAI, NicBeta, NicMaxMDF float64
	MinNcwnd, MaxNcwnd        float64
	Alpha                     float64       // RTT EWMA weight on the old value (default 0.75)
	RTOScalar                 float64       // RTO = RTOScalar × srtt + IPG (default 2)
	MinRTO                    time.Duration // default 250 µs
	RetxLimit                 uint8         // an RTO retransmission this often pins fcwnd at the floor (default 3)
	// EarlyRetxCuts cuts fcwnd for retransmissions found early (OOO
	// distance, RACK, TLP) as for RTOs. Off by default: delay, not loss,
	// is Swift's congestion signal, and Isekai's Falcon posts RETX events
	// to the RUE for timeouts only (gen1/rate_update_engine.cc:
	// PacketEarlyRetransmitted does nothing), so a lossy path keeps its
	// window while the early repairs go on.
	EarlyRetxCuts bool
	// CongestedRetxCuts cuts fcwnd for those early retransmissions only
	// when the flow's latest delay sample was more than a quarter above
	// its target (without the hop term: a RETX event carries no hop
	// count): the loss came from a full queue (an incast's shared
	// buffer), which the delay shows, not from a corrupting or flapping
	// link, which leaves it near or under the target. Once per RTT, as
	// for RTOs.
	CongestedRetxCuts bool
	Delay             DelaySelect // default DelayFabric
	// PLB turns protective load balancing on (default off): a flow is
	// congested when its delay exceeds PLBScale × target (default 1.01), a
	// round when PLBFrac of its packets were (default 0.5); PLBRounds
	// congested rounds in a row ask for a new path (default 5).
	PLB               bool
	PLBScale, PLBFrac float64
	PLBRounds         uint8
	// ReqAlpha, when positive, has Swift set each connection's
	// dynamic-threshold alpha for new requests [RM-8] on every delay
	// sample: ReqAlpha × min(1, target/delay, TargetLevel/rx-buffer level),
	// so a connection whose path or receiver is congested may hold fewer
	// of the NIC's Tx request packets (Isekai's 0.125 is a fair choice).
	// 0 leaves the NIC's alpha in force.
	ReqAlpha float64

	// derived, in Falcon time units
	fsA, fsB, baseU, hopU, rangeU, minRTOU float64
}

// congestedRetxScale: with CongestedRetxCuts, a delay this far over the
// target marks a loss as congestive. At the target itself (1.0), a single
// flow sitting at its target (the loss bench's) blames half its random
// losses on congestion: 5 % loss held pushes to 0.90 of the lossless
// goodput, against 0.97 at 1.25.
const congestedRetxScale = 1.25

// Falcon time units per microsecond (131.072 ns each).
const unitsPerUs = 1000.0 / 131.072

func (c *SwiftConfig) fill() {
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defF := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defD(&c.BaseTarget, 7*time.Microsecond)
	defD(&c.PerHop, 2*time.Microsecond)
	defD(&c.FSRange, 20*time.Microsecond)
	defF(&c.FSMin, 0.1)
	defF(&c.FSMax, 256)
	defF(&c.AI, 1)
	defF(&c.Beta, 0.8)
	defF(&c.MaxMDF, 0.5)
	defF(&c.MinFcwnd, 0.01)
	defF(&c.MaxFcwnd, 256)
	if c.TargetLevel == 0 {
		c.TargetLevel = 15
	}
	defF(&c.NicAI, 1)
	defF(&c.NicBeta, 0.8)
	defF(&c.NicMaxMDF, 0.5)
	defF(&c.MinNcwnd, 1)
	defF(&c.MaxNcwnd, 256)
	defF(&c.Alpha, 0.75)
	defF(&c.RTOScalar, 2)
	defD(&c.MinRTO, 250*time.Microsecond)
	if c.RetxLimit == 0 {
		c.RetxLimit = 3
	}
	if c.Delay == 0 {
		c.Delay = DelayFabric
	}
	defF(&c.PLBScale, 1.01)
	defF(&c.PLBFrac, 0.5)
	if c.PLBRounds == 0 {
		c.PLBRounds = 5
	}
	toU := func(d time.Duration) float64 { return d.Seconds() * 1e6 * unitsPerUs }
	c.baseU, c.hopU = toU(c.BaseTarget), toU(c.PerHop)
	if c.FSRange > 0 {
		c.rangeU = toU(c.FSRange)
		c.fsA = c.rangeU / (1/math.Sqrt(c.FSMin) - 1/math.Sqrt(c.FSMax))
		c.fsB = -c.fsA / math.Sqrt(c.FSMax)
	}
	c.minRTOU = toU(c.MinRTO)
}

// SwiftCounters count what Swift did. Plain integers: an engine is driven
// by one goroutine (its datapath's, or Async's drainer).
type SwiftCounters struct {
	Events, Samples, NoSample        uint64 // events; with a delay sample; ACK/NACK without one
	Increases, Decreases, HeldByMark uint64 // fcwnd steps; decreases skipped as within an RTT of the last
	RetxCuts, RetxFloor              uint64 // fcwnd cut by a retransmission; pinned at the floor by the retry limit
	RetxIgnored                      uint64 // early, RACK and TLP retransmissions left alone (EarlyRetxCuts off)
	Undos                            uint64 // windows restored after spurious timeouts (EventUndo)
	AtFloor, Paced                   uint64 // responses with fcwnd at its floor; below one (an inter-packet gap)
	NcwndUp, NcwndDown, NcwndNack    uint64 // ncwnd steps by rx-buffer level; cuts by a resource NACK
	PLBRounds, PLBCongested, Repaths uint64 // PLB rounds ended, of them congested; path changes asked for
	AlphaSet                         uint64 // responses that set the connection's request alpha
}

// Swift is the Swift congestion control of Falcon's RUE [S §10.3]: a
// delay-based AIMD on the fabric window per connection flow, and an AIMD
// on the NIC window from the receiver's rx-buffer level. It is stateless
// across events: everything it remembers round-trips in the records.
type Swift struct {
	cfg   SwiftConfig
	Stats SwiftCounters
}

// NewSwift returns a Swift RUE.
func NewSwift(cfg SwiftConfig) *Swift {
	cfg.fill()
	return &Swift{cfg: cfg}
}

// Config returns the configuration with defaults filled in.
func (s *Swift) Config() SwiftConfig { return s.cfg }

// State layout in the records (all that Swift keeps):
//
//	RTTState     smoothed RTT (t4 − t1), Falcon units
//	DelayState   latest delay sample (delay_select), Falcon units
//	FabricMarker time of the last fcwnd decrease (24 bits) [S §10.3.6]
//	NICMarker    time of the last ncwnd decrease (24 bits)
//	CCOpaque     ncwnd in rue.Fixed (the integer Ncwnd drops the fraction)
//	PLBState     acked:12 | congested:12 | rounds:8 (low to high)
const (
	mask24   = 1<<24 - 1
	plbField = 1<<12 - 1
)

// wrap24 returns the signed distance a − b in 24-bit arithmetic.
func wrap24(a, b uint32) int32 { return int32((a-b)&mask24<<8) >> 8 }

// since returns the 24-bit time from marker m to now. A marker cannot lie
// ahead: one that seems to was set more than 2^23 units (≈ 1.1 s) ago, by a
// flow idle since, and counts as long past.
func since(now, m uint32) int32 {
	d := wrap24(now, m)
	if d < 0 {
		return 1<<23 - 1
	}
	return d
}

// sample returns the event's RTT and configured delay in Falcon units
// (DelaySelect.sample: a zero delay is a sample, a zero round trip one
// unit).
func (s *Swift) sample(ev *rue.Event) (rtt, delay float64, ok bool) {
	r, d, ok := s.cfg.Delay.sample(ev)
	return float64(r), float64(d), ok
}

// Target returns the target delay in Falcon units for a flow with window
// fcwnd whose packets crossed hops switches.
func (s *Swift) Target(fcwnd float64, hops uint8) float64 {
	c := &s.cfg
	t := c.baseU + float64(hops)*c.hopU
	if c.rangeU > 0 {
		t += min(max(c.fsA/math.Sqrt(max(fcwnd, 1e-6))+c.fsB, 0), c.rangeU)
	}
	return t
}

// TargetDelay is Target as a duration.
func (s *Swift) TargetDelay(fcwnd float64, hops uint8) time.Duration {
	return units(s.Target(fcwnd, hops))
}

// Handle computes the response to one event at once.
func (s *Swift) Handle(ev *rue.Event) (rue.Response, bool) {
	c := &s.cfg
	s.Stats.Events++
	r := rue.Response{Conn: ev.Conn, Flow: ev.Flow, CCMetadata: ev.CCMetadata, FabricMarker: ev.FabricMarker,
		NICMarker: ev.NICMarker, NcwndUp: ev.NcwndUp, DelayState: ev.DelayState, RTTState: ev.RTTState,
		BaseDelay: ev.BaseDelay, CCOpaque: ev.CCOpaque, PLBState: ev.PLBState}
	now := ev.Now & mask24
	fcwnd := ev.Fcwnd.Float()
	ncwnd := rue.Fixed(ev.CCOpaque).Float()
	if ev.CCOpaque == 0 || rue.Fixed(ev.CCOpaque).Int() != ev.Ncwnd {
		// First event, or the datapath's ncwnd was set by someone else
		// (another firmware ran before): start from the enforced value.
		ncwnd = float64(ev.Ncwnd)
	}
	srtt := float64(ev.RTTState)
	acked := float64(ev.NumAcked)

	switch ev.Type {
	case rue.EventACK, rue.EventNACK:
		rtt, d, ok := s.sample(ev)
		if !ok {
			s.Stats.NoSample++
			break
		}
		s.Stats.Samples++
		if srtt == 0 {
			srtt = rtt
		} else {
			srtt = c.Alpha*srtt + (1-c.Alpha)*rtt
		}
		r.DelayState = uint32(d)
		target := s.Target(fcwnd, ev.ForwardHop)
		sinceDec := since(now, r.FabricMarker)
		resource := ev.Type == rue.EventNACK && ev.NackCode == uint8(wire.NackInsufficientResources)
		if !resource {
			if d < target {
				// At most one window's worth of ACKs counts: a
				// cumulative ACK after a repair must not add more
				// than AI at once.
				acked := min(acked, max(fcwnd, 1))
				if fcwnd >= 1 {
					fcwnd += c.AI * acked / fcwnd
				} else {
					inc := c.AI * acked
					if c.SubOneGain > 0 {
						inc = min(inc, c.SubOneGain*fcwnd*acked)
					}
					fcwnd += inc
				}
				s.Stats.Increases++
			} else if float64(sinceDec) >= rtt {
				fcwnd *= 1 - min(c.Beta*(d-target)/d, c.MaxMDF)
				r.FabricMarker = now
				s.Stats.Decreases++
			} else {
				s.Stats.HeldByMark++
			}
		}
		if float64(sinceDec) > rtt && r.FabricMarker != now {
			// Keep the marker within an RTT of now so 24-bit wrap never
			// makes an old decrease look recent.
			r.FabricMarker = (now - uint32(rtt)) & mask24
		}
		ncwnd = s.nic(ev, &r, ncwnd, acked, rtt, now, resource)
		if c.ReqAlpha > 0 {
			a := c.ReqAlpha * min(1, target/d)
			if ev.RxBufLevel > 0 {
				a = min(a, c.ReqAlpha*float64(c.TargetLevel)/float64(ev.RxBufLevel))
			}
			r.AlphaRequest = max(rue.FixedFrom(a), 1)
			s.Stats.AlphaSet++
		}
		if c.PLB && ev.Type == rue.EventACK {
			s.plb(&r, acked, d > c.PLBScale*target, min(ev.Fcwnd.Float(), float64(ev.Ncwnd)))
		}
	case rue.EventRetx:
		if ev.RetxReason != rue.RetxRTO && !c.EarlyRetxCuts &&
			(!c.CongestedRetxCuts || float64(ev.DelayState) <= congestedRetxScale*s.Target(fcwnd, 0)) {
			s.Stats.RetxIgnored++
			break
		}
		if since(now, r.FabricMarker) >= int32(srtt) {
			if ev.RetxReason == rue.RetxRTO && uint32(ev.RetxCount) >= uint32(c.RetxLimit) {
				fcwnd = c.MinFcwnd
				s.Stats.RetxFloor++
			} else {
				fcwnd *= 1 - c.MaxMDF
				s.Stats.RetxCuts++
			}
			r.FabricMarker = now
		} else {
			s.Stats.HeldByMark++
		}
	case rue.EventUndo:
		// The timeouts that cut the window were spurious: it goes back
		// to where they found it, unless it has grown past that since
		// (RFC 4015's response).
		if u := ev.UndoFcwnd.Float(); u > fcwnd {
			fcwnd = u
			s.Stats.Undos++
		}
	}

	fcwnd = min(max(fcwnd, c.MinFcwnd), c.MaxFcwnd)
	if fcwnd == c.MinFcwnd {
		r.FabricMarker = now // pinned at the floor: hold further cuts an RTT
		s.Stats.AtFloor++
	}
	r.Fcwnd = max(rue.FixedFrom(fcwnd), 1)
	fcwnd = r.Fcwnd.Float() // pace what the datapath enforces
	ncwnd = min(max(ncwnd, c.MinNcwnd), c.MaxNcwnd)
	nf := rue.FixedFrom(ncwnd)
	r.Ncwnd, r.CCOpaque = nf.Int(), uint32(nf)
	r.RTTState = uint32(srtt + 0.5)
	// Pacing [S §10.3.5]: below one packet, one packet per srtt/fcwnd.
	// The datapath's gate measures the gap from the previous send (and
	// keeps one packet in flight), so the gap is the whole interval —
	// not Isekai's srtt/fcwnd − srtt, which counts from the ACK. The gate
	// paces the connection, whose window is the sum over its flows: with
	// several flows one flow's tiny window must not stretch the gap (or
	// the RTO) of the others.
	var ipgU float64
	conn := fcwnd
	if ev.ConnFcwnd > 0 {
		conn = (ev.ConnFcwnd - ev.Fcwnd + r.Fcwnd).Float()
	}
	if conn < 1 && srtt > 0 {
		ipgU = srtt / conn
		s.Stats.Paced++
	}
	r.IPG = units(ipgU)
	if srtt > 0 {
		r.RTO = units(max(c.RTOScalar*srtt+ipgU, c.minRTOU))
	} else {
		r.RTO = ev.RTO
	}
	return r, true
}

// nic steps the NIC window from the receiver's rx-buffer level.
func (s *Swift) nic(ev *rue.Event, r *rue.Response, ncwnd, acked, rtt float64, now uint32, resource bool) float64 {
	c := &s.cfg
	due := float64(since(now, r.NICMarker)) >= rtt
	switch {
	case resource:
		if due {
			ncwnd *= 1 - c.NicMaxMDF
			r.NICMarker = now
			s.Stats.NcwndNack++
		}
	case float64(ev.RxBufLevel) < float64(c.TargetLevel):
		ncwnd += c.NicAI * acked / max(ncwnd, 1)
		r.NcwndUp = true
		s.Stats.NcwndUp++
	case due:
		l := float64(ev.RxBufLevel)
		ncwnd *= 1 - min(c.NicBeta*(l-float64(c.TargetLevel))/l, c.NicMaxMDF)
		r.NICMarker, r.NcwndUp = now, false
		s.Stats.NcwndDown++
	}
	if !due && r.NICMarker != now {
		return ncwnd
	}
	if float64(since(now, r.NICMarker)) > rtt {
		r.NICMarker = (now - uint32(rtt)) & mask24
	}
	return ncwnd
}

// plb is protective load balancing's congestion detector [S §10.4]: a
// round ends once a window's worth of packets was acknowledged; after
// PLBRounds congested rounds in a row the flow asks for a new path.
func (s *Swift) plb(r *rue.Response, acked float64, congested bool, window float64) {
	c := &s.cfg
	a := r.PLBState & plbField
	g := r.PLBState >> 12 & plbField
	n := r.PLBState >> 24
	a = min(a+uint32(acked), plbField)
	if congested {
		g = min(g+uint32(acked), plbField)
	}
	if float64(a) >= max(window, 1) {
		s.Stats.PLBRounds++
		if float64(g) >= c.PLBFrac*float64(a) {
			n++
			s.Stats.PLBCongested++
		} else {
			n = 0
		}
		a, g = 0, 0
		if n >= uint32(c.PLBRounds) {
			r.RandomizePath = true
			s.Stats.Repaths++
			n = 0
		}
	}
	r.PLBState = a | g<<12 | min(n, 255)<<24
}

// units converts Falcon time units to a duration.
func units(u float64) time.Duration {
	return time.Duration(u * 131.072)
}
