package sim

import (
	"time"

	"falconnic/falcon/fabric"
)

// GoodputSeries samples the bytes of transactions completed by qps every
// period from start to end, as Gb/s per bin.
type GoodputSeries struct {
	Period time.Duration
	Start  time.Duration
	Gbps   []float64
}

// SampleGoodput starts a series over qps.
func (s *Sim) SampleGoodput(qps []*QP, period, start, end time.Duration) *GoodputSeries {
	g := &GoodputSeries{Period: period, Start: start}
	var last uint64
	sum := func() uint64 {
		var b uint64
		for _, q := range qps {
			b += q.TxnBytes
		}
		return b
	}
	var tick func()
	tick = func() {
		b := sum()
		if s.Now() > start {
			g.Gbps = append(g.Gbps, float64(b-last)*8/period.Seconds()/1e9)
		}
		last = b
		if s.Now()+period <= end {
			s.At(s.Now()+period, tick)
		}
	}
	s.At(start, tick)
	return g
}

// Mean returns the mean goodput of the bins within [from, to).
func (g *GoodputSeries) Mean(from, to time.Duration) float64 {
	var sum float64
	n := 0
	for i, v := range g.Gbps {
		t := g.Start + time.Duration(i)*g.Period // bin i covers [t, t+period)
		if t >= from && t+g.Period <= to {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// LinkFailConfig configures RunLinkFail: two racks of Hosts hosts, Spines
// spines, every host writing open-loop to its partner in the other rack
// (a permutation) at Load of its link, over QPs connections of Flows
// flows; at FailAt the link between leaf 0 and spine 0 fails.
type LinkFailConfig struct {
	Common
	Hosts, Spines, QPs int
	Load               float64
	Size               int
	Flows              []int
	Modes              []string // "blackhole", "withdrawn", "flap"
	FailAt, End        time.Duration
	Bin                time.Duration
	Smooth             int // bins averaged when judging recovery
}

// LinkFailPoint is one (mode, flows) run.
type LinkFailPoint struct {
	Mode      string  `json:"mode"`
	Flows     int     `json:"flows"`
	PreGbps   float64 `json:"pre_failure_gbps"`
	MinGbps   float64 `json:"min_after_gbps"`
	PostGbps  float64 `json:"last_ms_gbps"`
	RecoverUs float64 `json:"recover_90pct_us"` // -1: never within the run
	// RecoverFwdUs is the end of the first bin, after the first one that
	// fell below 90 % of the pre-failure mean, that is back at 90 % and
	// from which the goodput averaged over the next Smooth bins is too
	// (0: no bin fell; -1: never back). The goal judges it: the trailing
	// average of RecoverUs keeps a deep dip in its window for Smooth bins
	// after the goodput is back, so it reads at least Smooth bins whatever
	// the transport does.
	RecoverFwdUs float64           `json:"recover_90pct_fwd_us"`
	Recovered    bool              `json:"recovered"`
	Stalled      int               `json:"stalled_connections"`
	Dead         int               `json:"dead_connections"`
	Connections  int               `json:"connections"`
	RetxRTO      uint64            `json:"retx_rto"`
	Drops        map[string]uint64 `json:"drops"`
	Series       []float64         `json:"goodput_gbps_series"`
	BinUs        float64           `json:"bin_us"`
	Events       uint64            `json:"packet_events"`
	WallS        float64           `json:"wall_s"`
}

// RunLinkFail runs one point per mode and flow count.
func RunLinkFail(cfg LinkFailConfig) ([]LinkFailPoint, error) {
	var out []LinkFailPoint
	for _, m := range cfg.Modes {
		for _, f := range cfg.Flows {
			p, err := linkFailRun(cfg, m, f)
			if err != nil {
				return out, err
			}
			out = append(out, p)
		}
	}
	return out, nil
}

func linkFailRun(cfg LinkFailConfig, mode string, flows int) (LinkFailPoint, error) {
	wall := time.Now()
	fc := DefaultFabric(2, cfg.Hosts, cfg.Spines, cfg.Seed)
	s := New(Config{Fabric: fc, Conn: cfg.Common.Conn(), RUE: cfg.RUE, Seed: cfg.Seed, Limits: cfg.Common.Limits()})
	t0 := s.Now()
	end := t0 + cfg.End
	n := 2 * cfg.Hosts
	rate := cfg.Load * float64(fc.HostRate) / (8 * float64(cfg.Size)) / float64(cfg.QPs) // ops/s per QP
	for h := 0; h < n; h++ {
		dst := (h + cfg.Hosts) % n
		for j := 0; j < cfg.QPs; j++ {
			qp, err := s.Connect(h, dst, flows)
			if err != nil {
				return LinkFailPoint{}, err
			}
			qp.Poisson(Write, cfg.Size, rate, t0, end, nil)
		}
	}
	failAt := t0 + cfg.FailAt
	switch mode {
	case "withdrawn":
		s.Fabric.Fail(failAt, 0, 0, fabric.Withdrawn)
	case "flap":
		s.Fabric.Flap(failAt, 0, 0, fabric.Blackhole, 500*time.Microsecond, 500*time.Microsecond, 5)
	default:
		s.Fabric.Fail(failAt, 0, 0, fabric.Blackhole)
	}
	g := s.SampleGoodput(s.QPs, cfg.Bin, t0, end)
	// Stalled: no transaction completed over the last quarter of the run
	// while operations wait.
	tail := end - cfg.End/4
	var atTail []uint64
	s.At(tail, func() {
		for _, q := range s.QPs {
			atTail = append(atTail, q.TxnBytes)
		}
	})
	s.Run(end)
	p := LinkFailPoint{Mode: mode, Flows: flows, Connections: len(s.QPs), BinUs: us(cfg.Bin)}
	pre := g.Mean(t0+cfg.FailAt/2, failAt)
	p.PreGbps = round(pre, 3)
	p.PostGbps = round(g.Mean(end-time.Millisecond, end), 3)
	// Recovery: from the failure to the first time the goodput, averaged
	// over the last Smooth bins, is back at 90 % of the pre-failure mean
	// after it fell below (0 if it never fell; -1 if it never came back).
	p.MinGbps = -1
	k := max(1, cfg.Smooth)
	dipped, back := false, time.Duration(-1)
	for i := range g.Gbps {
		t := t0 + time.Duration(i)*cfg.Bin
		if t+cfg.Bin <= failAt {
			continue
		}
		if v := g.Gbps[i]; p.MinGbps < 0 || v < p.MinGbps {
			p.MinGbps = round(v, 3)
		}
		var sum float64
		for j := max(0, i-k+1); j <= i; j++ {
			sum += g.Gbps[j]
		}
		avg := sum / float64(i-max(0, i-k+1)+1)
		if avg < 0.9*pre {
			dipped = true
		} else if dipped {
			back = t + cfg.Bin - failAt
			break
		}
	}
	// The forward figure looks for recovery from the first bin after the
	// failure that fell below 90 % (a good bin before the dip is not a
	// recovery); 0 when none fell.
	first := 0
	for first < len(g.Gbps) && t0+time.Duration(first+1)*cfg.Bin <= failAt {
		first++
	}
	first = firstBelow(g.Gbps, first, 0.9*pre)
	p.RecoverFwdUs = 0
	if first < len(g.Gbps) {
		p.RecoverFwdUs = -1
		if i := recoveredFrom(g.Gbps, first, 0.9*pre, k); i >= 0 {
			p.RecoverFwdUs = us(t0 + time.Duration(i+1)*cfg.Bin - failAt)
		}
	}
	switch {
	case !dipped:
		p.Recovered, p.RecoverUs = true, 0
	case back < 0:
		p.RecoverUs = -1
	default:
		p.Recovered, p.RecoverUs = true, us(back)
	}
	for i, q := range s.QPs {
		if q.Conn.Dead() {
			p.Dead++
		}
		if i < len(atTail) && q.TxnBytes == atTail[i] && (q.Outstanding() > 0 || q.Conn.Dead()) {
			p.Stalled++
		}
	}
	p.RetxRTO = Totals(s.QPs).RetxRTO
	p.Drops = FabricDrops(s.Fabric)
	for _, v := range g.Gbps {
		p.Series = append(p.Series, round(v, 2))
	}
	p.Events = s.Fabric.Events
	p.WallS = round(time.Since(wall).Seconds(), 3)
	return p, nil
}

// firstBelow returns the first bin i ≥ from whose goodput is below level
// (len(gbps) if none is).
func firstBelow(gbps []float64, from int, level float64) int {
	for from < len(gbps) && gbps[from] >= level {
		from++
	}
	return from
}

// recoveredFrom returns the first bin i ≥ first whose goodput, and the
// mean of bins [i, i+k), reach level; -1 if none does.
func recoveredFrom(gbps []float64, first int, level float64, k int) int {
	for i := first; i+k <= len(gbps); i++ {
		if gbps[i] < level {
			continue
		}
		var sum float64
		for _, v := range gbps[i : i+k] {
			sum += v
		}
		if sum/float64(k) >= level {
			return i
		}
	}
	return -1
}
