package sim

import (
	"time"

	"falconnic/falcon"
	"falconnic/falcon/fabric"
)

// MultipathConfig configures RunMultipath: two racks of Hosts hosts and
// Spines spines; every host of rack 0 writes Size-byte operations with
// Poisson arrivals at Load of its link to the hosts of rack 1 (one
// connection to each, arrivals split evenly), over connections of Flows
// flows.
type MultipathConfig struct {
	Common
	Hosts, Spines int
	Loads         []float64
	Flows         []int
	Size          int
	Warmup, Run   time.Duration
	// Background is open-loop non-Falcon load put on every leaf 0 → spine
	// link (fraction of its rate; 0: none).
	Background float64
	// Policies are the path policies run for each flow count above one
	// (default round robin); one flow runs once.
	Policies []falcon.PathPolicy
}

// MultipathPoint is one (load, flows) run.
type MultipathPoint struct {
	Load        float64           `json:"load"`
	Flows       int               `json:"flows"`
	Policy      string            `json:"policy"`
	OfferedGbps float64           `json:"offered_gbps"`
	ArrivedGbps float64           `json:"arrived_gbps"` // operations that arrived in the window
	CarriedGbps float64           `json:"carried_gbps"`
	Carried     float64           `json:"carried_over_offered"` // carried over arrived
	Ops         uint64            `json:"ops"`
	Running     int               `json:"ops_running_at_end"`
	P50Us       float64           `json:"p50_us"`
	P99Us       float64           `json:"p99_us"`
	MaxSpineQ   int               `json:"max_spine_queue_bytes"`
	SpineQP99Us float64           `json:"spine_queue_delay_p99_us"` // worst leaf 0 → spine link
	Background  float64           `json:"background_load"`
	RetxRTO     uint64            `json:"retx_rto"`
	Drops       map[string]uint64 `json:"drops"`
	Events      uint64            `json:"packet_events"`
	WallS       float64           `json:"wall_s"`
}

// RunMultipath runs one point per load and flow count.
func RunMultipath(cfg MultipathConfig) ([]MultipathPoint, error) {
	var out []MultipathPoint
	for _, l := range cfg.Loads {
		for _, f := range cfg.Flows {
			pols := cfg.Policies
			if f == 1 || len(pols) == 0 {
				pols = []falcon.PathPolicy{falcon.PathRoundRobin}
			}
			for _, pol := range pols {
				p, err := multipathRun(cfg, l, f, pol)
				if err != nil {
					return out, err
				}
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func multipathRun(cfg MultipathConfig, load float64, flows int, pol falcon.PathPolicy) (MultipathPoint, error) {
	wall := time.Now()
	fc := DefaultFabric(2, cfg.Hosts, cfg.Spines, cfg.Seed)
	cc := cfg.Common.Conn()
	cc.PathPolicy = pol
	s := New(Config{Fabric: fc, Conn: cc, RUE: cfg.RUE, Seed: cfg.Seed, Limits: cfg.Common.Limits()})
	t0 := s.Now()
	measure := t0 + cfg.Warmup
	end := measure + cfg.Run
	var rec Recorder
	rate := load * float64(fc.HostRate) / (8 * float64(cfg.Size)) / float64(cfg.Hosts) // per QP
	for h := 0; h < cfg.Hosts; h++ {
		for d := 0; d < cfg.Hosts; d++ {
			qp, err := s.Connect(h, cfg.Hosts+d, flows)
			if err != nil {
				return MultipathPoint{}, err
			}
			qp.Poisson(Write, cfg.Size, rate, t0, end, &rec)
		}
	}
	if cfg.Background > 0 {
		for sp := 0; sp < cfg.Spines; sp++ {
			up, _ := s.Fabric.SpineLinks(0, sp)
			s.Fabric.AddBackground(fabric.Background{Link: up, Load: cfg.Background, Size: 4096, Poisson: true, Start: t0, Stop: end})
		}
	}
	var before, startedBefore uint64
	s.At(measure, func() {
		for _, q := range s.QPs {
			before += q.TxnBytes
			startedBefore += q.StartedBytes
		}
	})
	s.Run(end)
	var after, started uint64
	for _, q := range s.QPs {
		after += q.TxnBytes
		started += q.StartedBytes
	}
	secs := cfg.Run.Seconds()
	offered := load * float64(fc.HostRate) * float64(cfg.Hosts)
	p := MultipathPoint{Load: load, Flows: flows, Policy: pol.String(), OfferedGbps: round(offered/1e9, 3), Background: cfg.Background}
	carried := float64(after-before) * 8 / secs
	p.CarriedGbps = round(carried/1e9, 3)
	arrived := float64(started-startedBefore) * 8 / secs
	p.ArrivedGbps = round(arrived/1e9, 3)
	if arrived > 0 {
		p.Carried = round(carried/arrived, 4)
	}
	lat := rec.Lat
	for _, q := range s.QPs {
		lat = q.AppendAges(lat, s.Now())
	}
	p.Ops, p.Running = rec.Ops, len(lat)-len(rec.Lat)
	p.P50Us, p.P99Us = us(Percentile(lat, 0.5)), us(Percentile(lat, 0.99))
	for sp := 0; sp < cfg.Spines; sp++ {
		up, _ := s.Fabric.SpineLinks(0, sp)
		m := s.Fabric.Metrics(up)
		p.MaxSpineQ = max(p.MaxSpineQ, m.MaxQueueBytes)
		p.SpineQP99Us = max(p.SpineQP99Us, us(m.QueueDelay.Quantile(0.99)))
	}
	p.RetxRTO = Totals(s.QPs).RetxRTO
	p.Drops = FabricDrops(s.Fabric)
	p.Events = s.Fabric.Events
	p.WallS = round(time.Since(wall).Seconds(), 3)
	return p, nil
}
