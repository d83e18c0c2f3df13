package sim

import (
	"errors"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// Recovery is a loss-recovery mode of the loss bench.
type Recovery string

// Recovery modes.
const (
	RACKTLP Recovery = "rack-tlp"     // selective repeat, RACK and TLP on (Gen3)
	OOOOnly Recovery = "ooo-distance" // selective repeat, early retransmit by OOO distance only
	GoBackN Recovery = "go-back-n"    // RoCE-like baseline
)

// lossTLPProbes is how many tail-loss probes go out a PTO apart without
// an ACK: at 5 % loss a probe or its ACK is lost one time in ten, and with
// one probe the connection then waits for the RTO.
const lossTLPProbes = 4

// lossSeed offsets the link seeds from the bench seed.
const lossSeed = 1

// LossConfig configures RunLoss: one ordered connection over an impaired
// in-memory link (both directions), the initiator keeping its transaction
// table full of Size-byte operations, for each op kind, recovery mode and
// drop or reorder probability. Each end runs the firmware of Common.RUE
// (none: the windows stay at InitFcwnd) from Common.InitFcwnd; AckHoles
// applies to the rack-tlp mode.
type LossConfig struct {
	Common
	Ops      []OpKind
	Modes    []Recovery
	Drops    []float64 // percent, per direction (reorder 0)
	Reorders []float64 // percent, per direction (drop 0)
	Count    int       // operations per point
	Size     int
	Delay    time.Duration // one-way propagation
	RateBps  uint64
}

// LossPoint is one run.
type LossPoint struct {
	Op              string  `json:"op"`
	Mode            string  `json:"mode"`
	DropPct         float64 `json:"drop_pct"`
	ReorderPct      float64 `json:"reorder_pct"`
	Ops             int     `json:"ops"`
	Size            int     `json:"size"`
	GoodputGbps     float64 `json:"goodput_gbps"`
	Ratio           float64 `json:"ratio"` // goodput over the same op and mode without impairment
	TxPackets       uint64  `json:"tx_packets"`
	Retransmissions uint64  `json:"retransmissions"`
	RetxRTO         uint64  `json:"retx_rto"`
	Completed       bool    `json:"completed"`
	SimMs           float64 `json:"sim_ms"`
}

// RunLoss runs every (op, mode) at drop 0 (the reference), then the drop
// sweep and the reorder sweep.
func RunLoss(cfg LossConfig) ([]LossPoint, error) {
	if cfg.Count <= 0 {
		cfg.Count = 5000
	}
	if cfg.Size <= 0 {
		cfg.Size = 8192
	}
	if cfg.Delay == 0 {
		cfg.Delay = 5 * time.Microsecond
	}
	if cfg.RateBps == 0 {
		cfg.RateBps = 100e9
	}
	if cfg.Size > 0xffff-256 {
		return nil, errors.New("sim: loss bench: size above one transaction")
	}
	var out []LossPoint
	for _, op := range cfg.Ops {
		for _, m := range cfg.Modes {
			ref, err := lossRun(cfg, op, m, 0, 0)
			if err != nil {
				return out, err
			}
			ref.Ratio = 1
			out = append(out, ref)
			add := func(drop, reorder float64) error {
				if drop == 0 && reorder == 0 {
					return nil
				}
				p, err := lossRun(cfg, op, m, drop, reorder)
				if err != nil {
					return err
				}
				if ref.GoodputGbps > 0 {
					p.Ratio = round(p.GoodputGbps/ref.GoodputGbps, 4)
				}
				out = append(out, p)
				return nil
			}
			for _, d := range cfg.Drops {
				if err := add(d, 0); err != nil {
					return out, err
				}
			}
			for _, r := range cfg.Reorders {
				if err := add(0, r); err != nil {
					return out, err
				}
			}
		}
	}
	return out, nil
}

// lossULP keeps the initiator's table full and answers as a target.
type lossULP struct {
	c       *falcon.Conn
	kind    OpKind
	payload []byte
	issued  int
	done    int
	total   int
}

func (u *lossULP) fill() {
	for u.c != nil && u.issued < u.total {
		var err error
		if u.kind == Read {
			_, err = u.c.Pull(uint64(u.issued), len(u.payload))
		} else {
			_, err = u.c.Push(uint64(u.issued), u.payload)
		}
		if err != nil {
			return
		}
		u.issued++
	}
}

func (u *lossULP) OnRequest(c *falcon.Conn, r *falcon.Request) {
	switch r.Kind {
	case tl.Push:
		c.AckPush(r.RSN)
	case tl.Pull:
		c.PullData(r.RSN, u.payload[:r.Length])
	}
}
func (u *lossULP) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) { u.done++; u.fill() }
func (u *lossULP) OnXon(c *falcon.Conn)                                { u.fill() }

func lossRun(cfg LossConfig, op OpKind, mode Recovery, drop, reorder float64) (LossPoint, error) {
	mc := func(seed int64) link.MemConfig {
		return link.MemConfig{Delay: cfg.Delay, RateBitsPerSec: cfg.RateBps, DropProb: drop / 100,
			ReorderProb: reorder / 100, Seed: seed, Priority: AckFirst}
	}
	ua := &lossULP{kind: op, payload: make([]byte, cfg.Size), total: cfg.Count}
	ub := &lossULP{payload: make([]byte, cfg.Size)}
	seed := int64(cfg.Seed) + lossSeed
	pc := PairConfig{AB: mc(seed), BA: mc(seed + 1), ULPA: ua, ULPB: ub,
		Conn: falcon.ConnConfig{SCID: 1, DCID: 2, Ordered: true, GoBackN: mode == GoBackN, MTU: cfg.Size,
			InitRTO: 200 * time.Microsecond, MinRTO: 50 * time.Microsecond, MaxRetries: 64,
			RACK: mode == RACKTLP, TLP: mode == RACKTLP, TLPProbes: lossTLPProbes, GateInFlight: cfg.GateInFlight, AckHoles: mode == RACKTLP && cfg.AckHoles, InitFcwnd: cfg.InitFcwnd}}
	if cfg.RUE != nil {
		pc.RUEA, pc.RUEB = cfg.RUE(0), cfg.RUE(1)
	}
	p, err := NewPair(pc)
	if err != nil {
		return LossPoint{}, err
	}
	ua.c = p.CA
	start := p.Clock.Now()
	ua.fill()
	ok := p.RunUntil(func() bool { return ua.done == ua.total }, 10*time.Second)
	sim := (p.Clock.Now() - start).Seconds()
	t := Totals([]*QP{{Conn: p.CA}})
	tb := Totals([]*QP{{Conn: p.CB}}) // pulls: the data goes out from B
	pt := LossPoint{Op: op.String(), Mode: string(mode), DropPct: drop, ReorderPct: reorder, Ops: ua.done, Size: cfg.Size,
		TxPackets: t.TxPackets + tb.TxPackets, RetxRTO: t.RetxRTO + tb.RetxRTO,
		Retransmissions: t.RetxRTO + t.RetxEarly + t.RetxRACK + t.RetxTLP + t.RetxOther +
			tb.RetxRTO + tb.RetxEarly + tb.RetxRACK + tb.RetxTLP + tb.RetxOther,
		Completed: ok, SimMs: round(sim*1e3, 4)}
	if sim > 0 {
		pt.GoodputGbps = round(float64(ua.done)*float64(cfg.Size)*8/sim/1e9, 3)
	}
	return pt, nil
}

// AckFirst picks Falcon's ACKs and NACKs: a NIC serves them ahead of its
// queued transaction packets (Isekai's arbiter weighs ack/nack 2 against
// 1 for connections and 1 for retransmissions).
func AckFirst(frame []byte) bool {
	if len(frame) == 0 {
		return false
	}
	switch wire.Packet(frame).Type() {
	case wire.TypeBACK, wire.TypeEACK, wire.TypeNACK:
		return true
	}
	return false
}
