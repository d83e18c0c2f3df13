package sim

import (
	"math"
	"slices"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/fabric"
	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
)

// Doc is what every `falconnic bench` prints: the setup, one record per
// point, and the goals with today's values.
type Doc struct {
	Setup  any    `json:"setup"`
	Points []any  `json:"points"`
	Goals  []Goal `json:"goals"`
}

// Goal is one target a bench checks.
type Goal struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Op     string  `json:"op"` // ">=" or "<="
	Target float64 `json:"target"`
	Met    bool    `json:"met"`
}

// NewGoal evaluates value op target.
func NewGoal(name string, value float64, op string, target float64) Goal {
	met := false
	switch op {
	case ">=":
		met = value >= target
	case "<=":
		met = value <= target
	}
	if math.IsNaN(value) || math.IsInf(value, 0) {
		met = false
		value = -1
	}
	return Goal{Name: name, Value: round(value, 4), Op: op, Target: target, Met: met}
}

// AllMet reports whether every goal is met.
func (d *Doc) AllMet() bool {
	for _, g := range d.Goals {
		if !g.Met {
			return false
		}
	}
	return true
}

// Common carries the settings every fabric bench shares.
type Common struct {
	Seed  uint64
	Quick bool
	// RUE returns a host's congestion-control engine (the firmware);
	// nil keeps every window at its initial value.
	RUE func(h int) rue.Engine
	// Retarget, when the firmware has a target delay, returns its engine
	// with the base target replaced (for a bench whose path is not the
	// emulated fabric the targets were chosen for); nil otherwise.
	Retarget func(base time.Duration) func(h int) rue.Engine
	// Firmware names the engine ("fixed", "swift"); FirmwareDesc
	// describes it for the setup record.
	Firmware, FirmwareDesc string
	// MinRTO is the firmware's RTO floor (for goals stated in RTOs).
	MinRTO time.Duration
	// InitFcwnd is every connection's initial fabric window (0: the
	// endpoint's default, 32): the firmware's choice, as the connection
	// manager would make it.
	InitFcwnd rue.Fixed
	// RACKTLP turns on RACK and tail-loss probes (Gen3 loss recovery) on
	// every connection.
	RACKTLP bool
	// AckHoles (with RACKTLP) has receivers acknowledge a packet beyond a
	// hole, or filling one, at once.
	AckHoles bool
	// GateInFlight has fcwnd bound the packets in flight rather than the
	// PSN distance from the window's base (falcon.ConnConfig.GateInFlight).
	GateInFlight bool
	// AckPerConn turns per-flow ACKs off (falcon.ConnConfig.AckPerConn).
	AckPerConn bool
	// Reroute turns on protective reroute on every connection.
	Reroute bool
	// RerouteOnProbe also reroutes on tail-loss probes.
	RerouteOnProbe bool
	// Policy is the path policy of connections with several flows.
	Policy falcon.PathPolicy
	// Alpha is the NIC's dynamic threshold on Tx request packets per
	// connection (tl.Limits.Alpha; 0: none).
	Alpha float64
}

// Limits returns the NICs' resource pools with the common settings.
func (c Common) Limits() tl.Limits {
	l := tl.DefaultLimits()
	l.Alpha = c.Alpha
	return l
}

// Conn returns the benches' connection template with the common
// settings applied.
func (c Common) Conn() falcon.ConnConfig {
	cc := DefaultConn()
	cc.InitFcwnd = c.InitFcwnd
	cc.RACK, cc.TLP, cc.AckHoles = c.RACKTLP, c.RACKTLP, c.RACKTLP && c.AckHoles
	cc.AckPerConn = c.AckPerConn
	cc.GateInFlight = c.GateInFlight
	cc.ProtectiveReroute, cc.RerouteOnProbe = c.Reroute, c.Reroute && c.RerouteOnProbe
	cc.PathPolicy = c.Policy
	return cc
}

// Wire overheads the ideals count: a push's Falcon header plus envelope,
// and an ACK's.
const (
	pushOverhead = 24 + falcon.EnvelopeLen
	ackBytes     = 32 + falcon.EnvelopeLen
)

// DefaultFabric is the fabric the benches use unless they say otherwise:
// 100 Gb/s everywhere, 500 ns host links, 1 µs leaf–spine links, Isekai's
// 600 ns switch pipeline, 512 KiB per port within an 8 MiB shared pool
// at dynamic-threshold α 8, ECN marking from 150 KB, routing convergence
// 1 ms.
func DefaultFabric(racks, hostsPerRack, spines int, seed uint64) fabric.Config {
	return fabric.Config{Racks: racks, HostsPerRack: hostsPerRack, Spines: spines,
		HostRate: 100e9, SpineRate: 100e9, HostDelay: 500 * time.Nanosecond, SpineDelay: time.Microsecond,
		Pipeline: 600 * time.Nanosecond, PortBytes: 512 << 10, PoolBytes: 8 << 20, Alpha: 8, ECNBytes: 150000,
		Convergence: time.Millisecond, Seed: seed, Priority: AckFirst}
}

// DefaultConn is the connection template of the benches: ordered, 4 KiB
// MTU, the endpoint's defaults otherwise (fixed initial window 32).
func DefaultConn() falcon.ConnConfig {
	return falcon.ConnConfig{Ordered: true, MTU: 4096}
}

// BaseRTT is the unloaded round trip of one mtu-byte push and its ACK
// between two hosts of one rack (sameRack) or of two racks: serialization
// and propagation on every link, the pipeline of every switch.
func BaseRTT(c fabric.Config, sameRack bool, mtu int) time.Duration {
	ser := func(bytes int, rate uint64) time.Duration {
		return time.Duration(uint64(bytes) * 8 * uint64(time.Second) / rate)
	}
	one := func(bytes int) time.Duration {
		d := 2*(ser(bytes, c.HostRate)+c.HostDelay) + c.Pipeline
		if !sameRack {
			d += 2*(ser(bytes, c.SpineRate)+c.SpineDelay) + 2*c.Pipeline
		}
		return d
	}
	return one(mtu+pushOverhead) + one(ackBytes)
}

// Percentile returns the q-quantile (0..1) of d (sorted in place).
func Percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// Jain returns Jain's fairness index of x (1 = equal shares).
func Jain(x []float64) float64 {
	var s, s2 float64
	for _, v := range x {
		s += v
		s2 += v * v
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(x)) * s2)
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func us(d time.Duration) float64 { return round(float64(d)/1e3, 3) }

// ConnTotals sums the initiator-side counters of qps. RetxRTO counts
// every resend on the RTO timer; RetxULPPoke is the part of it that went
// to packets the peer held for its ULP (not lost).
type ConnTotals struct {
	TxPackets, RetxRTO, RetxEarly, RetxRACK, RetxTLP, RetxOther uint64
	RetxULPPoke                                                 uint64
}

// Totals sums the counters of the initiator side of qps.
func Totals(qps []*QP) ConnTotals {
	var t ConnTotals
	for _, q := range qps {
		s := &q.Conn.Stats
		t.TxPackets += s.TxTxnPackets.Load()
		t.RetxRTO += s.RetxRTO.Load() + s.RetxULPPoke.Load()
		t.RetxULPPoke += s.RetxULPPoke.Load()
		t.RetxEarly += s.RetxEarly.Load()
		t.RetxRACK += s.RetxRACK.Load()
		t.RetxTLP += s.RetxTLP.Load()
		t.RetxOther += s.RetxOWN.Load() + s.RetxNack.Load() + s.RetxGBN.Load()
	}
	return t
}

// FabricDrops returns the fabric's drops by cause name (nonzero only).
func FabricDrops(f *fabric.Fabric) map[string]uint64 {
	m := map[string]uint64{}
	for c := range fabric.NumCauses {
		if n := f.Stats.Drops[c].Load(); n > 0 {
			m[c.String()] = n
		}
	}
	return m
}
