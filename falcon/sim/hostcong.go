package sim

import (
	"strings"
	"time"
)

// HostCongConfig configures RunHostCong: Senders hosts with QPs
// connections each write Size-byte operations in a closed loop (Depth
// outstanding per QP) to one receiver in their rack, whose ULP drains
// pushed data at Factor × its link rate from SlowAt for SlowFor.
type HostCongConfig struct {
	Common
	Senders, QPs, Depth int
	Size                int
	Factor              float64
	SlowAt, SlowFor     time.Duration
	After               time.Duration // run time after the slow window
	Smooth              int           // bins (one base RTT each) averaged
}

// HostCongPoint is one run.
type HostCongPoint struct {
	Senders     int               `json:"senders"`
	QPs         int               `json:"qps_per_sender"`
	Factor      float64           `json:"drain_factor"`
	BaseRTTUs   float64           `json:"base_rtt_us"`
	PreGbps     float64           `json:"pre_gbps"`       // receiver link, before the slow window
	DrainGbps   float64           `json:"drain_gbps"`     // the ULP's rate in the window
	SlowGbps    float64           `json:"slow_link_gbps"` // receiver link, second half of the window
	AdaptUs     float64           `json:"adapt_us"`       // until the link rate ≤ 1.1 × drain (-1: never)
	AdaptRTTs   float64           `json:"adapt_rtts"`     // adapt_us in base RTTs
	RecoverUs   float64           `json:"recover_us"`     // after the window, until ≥ 0.9 × pre (-1: never)
	RecoverRTTs float64           `json:"recover_rtts"`   //
	RetxRTO     uint64            `json:"retx_rto"`       //
	RetxOther   uint64            `json:"retx_other"`     // early, RACK, TLP, NACK
	RxNACKs     uint64            `json:"nacks_received"`
	RxDrops     map[string]uint64 `json:"receiver_drops"`   // the receiver side's connection drop counters
	Series      []float64         `json:"link_gbps_series"` // receiver link, one bin per base RTT
	Events      uint64            `json:"packet_events"`
	WallS       float64           `json:"wall_s"`
}

// RunHostCong runs one point.
func RunHostCong(cfg HostCongConfig) (HostCongPoint, error) {
	wall := time.Now()
	fc := DefaultFabric(1, cfg.Senders+1, 1, cfg.Seed)
	rtt := BaseRTT(fc, true, 4096)
	fc.SampleEvery = rtt
	s := New(Config{Fabric: fc, Conn: cfg.Common.Conn(), RUE: cfg.RUE, Seed: cfg.Seed, Limits: cfg.Common.Limits()})
	t0 := s.Now()
	slowAt, slowEnd := t0+cfg.SlowAt, t0+cfg.SlowAt+cfg.SlowFor
	end := slowEnd + cfg.After
	down := s.Fabric.Down(0)
	s.Fabric.Watch(down)
	for src := 1; src <= cfg.Senders; src++ {
		for j := 0; j < cfg.QPs; j++ {
			qp, err := s.Connect(src, 0, 1)
			if err != nil {
				return HostCongPoint{}, err
			}
			qp.Closed(Write, cfg.Size, cfg.Depth, -1, end, nil)
		}
	}
	rx := s.Hosts[0]
	drain := uint64(cfg.Factor * float64(fc.HostRate))
	s.At(slowAt, func() { rx.Drain = drain })
	s.At(slowEnd, func() { rx.Drain = 0 })
	s.Run(end)
	s.Fabric.StopSampling()
	series := s.Fabric.Metrics(down).Series
	rate := float64(fc.HostRate) / 1e9
	p := HostCongPoint{Senders: cfg.Senders, QPs: cfg.QPs, Factor: cfg.Factor, BaseRTTUs: us(rtt), DrainGbps: round(float64(drain)/1e9, 3)}
	k := max(1, cfg.Smooth)
	smooth := make([]float64, len(series))
	for i := range series {
		var sum float64
		n := 0
		for j := max(0, i-k+1); j <= i; j++ {
			sum += series[j].Utilization
			n++
		}
		smooth[i] = sum / float64(n) * rate
		p.Series = append(p.Series, round(series[i].Utilization*rate, 2))
	}
	mean := func(from, to time.Duration) float64 {
		var sum float64
		n := 0
		for _, x := range series {
			if x.At > from && x.At <= to {
				sum += x.Utilization
				n++
			}
		}
		if n == 0 {
			return 0
		}
		return sum / float64(n) * rate
	}
	pre := mean(t0+cfg.SlowAt/2, slowAt)
	p.PreGbps = round(pre, 3)
	p.SlowGbps = round(mean(slowAt+cfg.SlowFor/2, slowEnd), 3)
	p.AdaptUs, p.RecoverUs, p.AdaptRTTs, p.RecoverRTTs = -1, -1, -1, -1
	for i, x := range series {
		if x.At > slowAt && x.At <= slowEnd && smooth[i] <= 1.1*float64(drain)/1e9 {
			p.AdaptUs = us(x.At - slowAt)
			break
		}
	}
	for i, x := range series {
		if x.At > slowEnd && smooth[i] >= 0.9*pre {
			p.RecoverUs = us(x.At - slowEnd)
			break
		}
	}
	if p.AdaptUs >= 0 {
		p.AdaptRTTs = round(p.AdaptUs*1e3/float64(rtt), 2)
	}
	if p.RecoverUs >= 0 {
		p.RecoverRTTs = round(p.RecoverUs*1e3/float64(rtt), 2)
	}
	t := Totals(s.QPs)
	p.RetxRTO, p.RetxOther = t.RetxRTO, t.RetxEarly+t.RetxRACK+t.RetxTLP+t.RetxOther
	p.RxDrops = map[string]uint64{}
	for _, q := range s.QPs {
		p.RxNACKs += q.Conn.Stats.RxNACK.Load()
		for _, d := range q.Peer.Stats.Set() {
			if v := d.Counter.Load(); v > 0 && strings.HasPrefix(d.Name, "rx_drop") {
				p.RxDrops[d.Name] += v
			}
		}
	}
	p.Events = s.Fabric.Events
	p.WallS = round(time.Since(wall).Seconds(), 3)
	return p, nil
}
