package sim

import (
	"time"

	"falconnic/falcon/fabric"
)

// LatencyConfig configures RunLatency: one QP between hosts of two racks
// on an otherwise idle fabric, Ops writes of each size one after another.
type LatencyConfig struct {
	Common
	Sizes []int
	Ops   int
}

// LatencyPoint is one size.
type LatencyPoint struct {
	Size     int     `json:"size"`
	Ops      uint64  `json:"ops"`
	IdealUs  float64 `json:"ideal_us"`
	P50Us    float64 `json:"p50_us"`
	P99Us    float64 `json:"p99_us"`
	P50Ideal float64 `json:"p50_over_ideal"`
	P99Ideal float64 `json:"p99_over_ideal"`
}

// IdealLatency is the unloaded latency of a size-byte write: the base
// round trip of its first packet plus the serialization of the others at
// the host rate (the transaction pipeline never stalls).
func IdealLatency(c fabric.Config, sameRack bool, mtu, size int) time.Duration {
	first := min(size, mtu)
	rest := (size - first + mtu - 1) / mtu
	return BaseRTT(c, sameRack, first) + time.Duration(uint64(rest)*uint64(mtu+pushOverhead)*8*uint64(time.Second)/c.HostRate)
}

// RunLatency runs one point per size.
func RunLatency(cfg LatencyConfig) ([]LatencyPoint, error) {
	if cfg.Ops <= 0 {
		cfg.Ops = 200
	}
	var out []LatencyPoint
	for _, size := range cfg.Sizes {
		fc := DefaultFabric(2, 1, 4, cfg.Seed)
		s := New(Config{Fabric: fc, Conn: cfg.Common.Conn(), RUE: cfg.RUE, Seed: cfg.Seed})
		qp, err := s.Connect(0, 1, 1)
		if err != nil {
			return out, err
		}
		var rec Recorder
		qp.Closed(Write, size, 1, cfg.Ops, 0, &rec)
		s.RunUntil(func() bool { return rec.Ops == uint64(cfg.Ops) }, s.Now()+10*time.Second)
		ideal := IdealLatency(s.Fabric.Config(), false, DefaultConn().MTU, size)
		p := LatencyPoint{Size: size, Ops: rec.Ops, IdealUs: us(ideal)}
		if len(rec.Lat) > 0 {
			p50, p99 := Percentile(rec.Lat, 0.5), Percentile(rec.Lat, 0.99)
			p.P50Us, p.P99Us = us(p50), us(p99)
			p.P50Ideal, p.P99Ideal = round(float64(p50)/float64(ideal), 4), round(float64(p99)/float64(ideal), 4)
		}
		out = append(out, p)
	}
	return out, nil
}
