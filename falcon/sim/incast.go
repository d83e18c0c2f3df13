package sim

import (
	"math"
	"time"
)

// IncastConfig configures RunIncast: Senders hosts, each with QPs
// connections to one receiver in the same rack, every QP writing Size-byte
// operations in a closed loop (one outstanding).
type IncastConfig struct {
	Common
	Senders int
	QPs     []int
	Size    int
	// Warmup precedes the measurement Window. Window 0 sizes it to 2.6 ×
	// the ideal operation latency (at least 10 ms), or ShortWindow when
	// that exceeds MaxWindow.
	Warmup, Window, MaxWindow, ShortWindow time.Duration
}

// IncastPoint is one (senders, QPs) run.
type IncastPoint struct {
	Senders     int     `json:"senders"`
	QPs         int     `json:"qps_per_sender"`
	Size        int     `json:"size"`
	WindowMs    float64 `json:"window_ms"`
	Utilization float64 `json:"utilization"`  // receiver downlink, wire bytes
	GoodputGbps float64 `json:"goodput_gbps"` // completed transaction bytes
	Jain        float64 `json:"jain"`
	CoV         float64 `json:"qp_goodput_cov"` // coefficient of variation over QPs
	MinQPGbps   float64 `json:"min_qp_gbps"`
	MaxQPGbps   float64 `json:"max_qp_gbps"`
	QPsStarved  int     `json:"qps_at_zero"`
	Ops         uint64  `json:"ops"`
	IdealUs     float64 `json:"ideal_us"`
	P50Us       float64 `json:"p50_us"`
	P99Us       float64 `json:"p99_us"`
	P50Ideal    float64 `json:"p50_over_ideal"`
	P99Ideal    float64 `json:"p99_over_ideal"`
	// Censored operations were still running at the end: they count with
	// their age. LatencyUnknown: the run was too short to judge p99.
	Censored       int     `json:"ops_running_at_end"`
	LatencyUnknown bool    `json:"latency_unknown"`
	TxPackets      uint64  `json:"tx_packets"`
	RetxRTO        uint64  `json:"retx_rto"`
	RTOPct         float64 `json:"rto_pct"`
	// RetxULPPoke is the part of RetxRTO that resent packets the
	// receiver reported holding (not lost).
	RetxULPPoke uint64 `json:"retx_ulp_poke"`
	// The other retransmissions, by reason: RACK, tail-loss probes, early
	// (OOO distance), and the rest (OWN, NACK, Go-Back-N).
	RetxRACK  uint64            `json:"retx_rack"`
	RetxTLP   uint64            `json:"retx_tlp"`
	RetxEarly uint64            `json:"retx_early"`
	RetxOther uint64            `json:"retx_other"`
	Drops     map[string]uint64 `json:"drops"`
	Events    uint64            `json:"packet_events"`
	WallS     float64           `json:"wall_s"`
}

// IncastTable is the TX window and initiator table size of the incast
// connections.
const IncastTable = 64

// RunIncast runs one point per entry of cfg.QPs.
func RunIncast(cfg IncastConfig) ([]IncastPoint, error) {
	if cfg.Senders <= 0 {
		cfg.Senders = 5
	}
	if cfg.Size <= 0 {
		cfg.Size = 1 << 20
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = time.Millisecond
	}
	if cfg.MaxWindow == 0 {
		cfg.MaxWindow = 150 * time.Millisecond
	}
	if cfg.ShortWindow == 0 {
		cfg.ShortWindow = 30 * time.Millisecond
	}
	var out []IncastPoint
	for _, q := range cfg.QPs {
		p, err := incastRun(cfg, q)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

func incastRun(cfg IncastConfig, qps int) (IncastPoint, error) {
	wall := time.Now()
	fc := DefaultFabric(1, cfg.Senders+1, 1, cfg.Seed)
	cc := cfg.Common.Conn()
	// Tables of 64 (the fixed window keeps 32 packets in flight) let
	// 2 × 5,000 connections fit in half a gigabyte.
	cc.TxWindow, cc.MaxTxns = IncastTable, IncastTable
	s := New(Config{Fabric: fc, Conn: cc, RUE: cfg.RUE, Seed: cfg.Seed, Limits: cfg.Common.Limits()})
	n := cfg.Senders * qps
	ideal := time.Duration(float64(n)*float64(cfg.Size)*8/float64(fc.HostRate)*1e9) + BaseRTT(s.Fabric.Config(), true, 4096)
	win := cfg.Window
	if win == 0 {
		// Long enough to judge p99 ≤ 2.5 × ideal; when that exceeds
		// MaxWindow, latency cannot be judged and a short window serves
		// the rate goals.
		win = max(time.Duration(2.6*float64(ideal)), 10*time.Millisecond)
		if win > cfg.MaxWindow {
			win = cfg.ShortWindow
		}
	}
	t0 := s.Now()
	end := t0 + cfg.Warmup + win
	var rec Recorder
	for src := 1; src <= cfg.Senders; src++ {
		for j := 0; j < qps; j++ {
			qp, err := s.Connect(src, 0, 1)
			if err != nil {
				return IncastPoint{}, err
			}
			qp.Closed(Write, cfg.Size, 1, -1, end, &rec)
		}
	}
	s.Run(t0 + cfg.Warmup)
	down := s.Fabric.Down(0)
	tx0 := s.Fabric.Metrics(down).TxBytes
	before := make([]uint64, len(s.QPs))
	for i, q := range s.QPs {
		before[i] = q.TxnBytes
	}
	s.Run(end)
	secs := win.Seconds()
	p := IncastPoint{Senders: cfg.Senders, QPs: qps, Size: cfg.Size, WindowMs: round(secs*1e3, 3), Ops: rec.Ops,
		IdealUs: us(ideal)}
	p.Utilization = round(float64(s.Fabric.Metrics(down).TxBytes-tx0)*8/(float64(fc.HostRate)*secs), 4)
	share := make([]float64, len(s.QPs))
	var total uint64
	for i, q := range s.QPs {
		b := q.TxnBytes - before[i]
		total += b
		share[i] = float64(b) * 8 / secs / 1e9
		if b == 0 {
			p.QPsStarved++
		}
	}
	p.GoodputGbps = round(float64(total)*8/secs/1e9, 3)
	p.Jain = round(Jain(share), 4)
	p.CoV = round(cov(share), 4)
	p.MinQPGbps, p.MaxQPGbps = round(minOf(share), 4), round(maxOf(share), 4)
	// Operations still running count with their age (a lower bound of
	// their latency); a quantile that falls on such a bound is unknown
	// unless it already exceeds the target.
	lat := rec.Lat
	for _, q := range s.QPs {
		lat = q.AppendAges(lat, s.Now())
	}
	p.Censored = len(lat) - len(rec.Lat)
	if len(lat) > 0 {
		p50, p99 := Percentile(lat, 0.5), Percentile(lat, 0.99)
		p.P50Us, p.P99Us = us(p50), us(p99)
		p.P50Ideal = round(float64(p50)/float64(ideal), 3)
		p.P99Ideal = round(float64(p99)/float64(ideal), 3)
		// Undetermined: the window is shorter than the target and some
		// operations are still running.
		if p.Censored > 0 && s.Now()-t0 < time.Duration(2.5*float64(ideal)) {
			p.LatencyUnknown = true
		}
	}
	t := Totals(s.QPs)
	p.TxPackets, p.RetxRTO, p.RetxULPPoke = t.TxPackets, t.RetxRTO, t.RetxULPPoke
	p.RetxRACK, p.RetxTLP, p.RetxEarly, p.RetxOther = t.RetxRACK, t.RetxTLP, t.RetxEarly, t.RetxOther
	if t.TxPackets > 0 {
		p.RTOPct = round(100*float64(t.RetxRTO)/float64(t.TxPackets), 4)
	}
	p.Drops = FabricDrops(s.Fabric)
	p.Events = s.Fabric.Events
	p.WallS = round(time.Since(wall).Seconds(), 3)
	return p, nil
}

func minOf(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	m := x[0]
	for _, v := range x {
		m = min(m, v)
	}
	return m
}

func maxOf(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// cov returns the coefficient of variation (standard deviation over mean).
func cov(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += v
	}
	m := s / float64(len(x))
	if m == 0 {
		return 0
	}
	var d float64
	for _, v := range x {
		d += (v - m) * (v - m)
	}
	return math.Sqrt(d/float64(len(x))) / m
}
