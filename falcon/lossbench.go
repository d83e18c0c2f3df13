package falcon

import (
	"errors"
	"time"

	"falconnic/falcon/link"
	"falconnic/falcon/tl"
)

// LossBenchConfig configures RunLossBench. Zero fields take the defaults
// noted.
type LossBenchConfig struct {
	Losses       []float64     // drop probabilities per direction (default 0, 0.01, 0.05)
	Transactions int           // pushes per run (default 20000)
	Size         int           // bytes per push (default 4096)
	Delay        time.Duration // one-way propagation delay (default 5 µs)
	RateBps      uint64        // link rate (default 100 Gb/s)
	Seed         int64         // link impairment seed (default 1)
	GoBackN      *bool         // nil runs both modes; else only the one given
	Limit        time.Duration // simulated-time cap per run (default 10 s)
	// RACKTLP turns on RACK and TLP (Isekai Gen3) for the selective-repeat
	// runs; Go-Back-N never has them.
	RACKTLP bool
}

// LossBenchPoint is one run's outcome.
type LossBenchPoint struct {
	Mode            string  `json:"mode"` // "selective-repeat" or "go-back-n"
	Loss            float64 `json:"loss"`
	Transactions    int     `json:"transactions"`
	Bytes           int64   `json:"bytes"`
	SimSeconds      float64 `json:"sim_seconds"`
	GoodputGbps     float64 `json:"goodput_gbps"`
	TxPackets       uint64  `json:"tx_packets"`
	Retransmissions uint64  `json:"retransmissions"`
	Completed       bool    `json:"completed"`
	RACKTLP         bool    `json:"rack_tlp"`
}

// LossBenchResult is what RunLossBench returns (JSON-ready).
type LossBenchResult struct {
	Size    int              `json:"size"`
	DelayUs float64          `json:"delay_us"`
	RateGbs float64          `json:"rate_gbps"`
	Points  []LossBenchPoint `json:"points"`
}

// RunLossBench measures push goodput (simulated time) over a lossy
// in-memory link, selective repeat against Go-Back-N: two endpoints, one
// ordered connection, the initiator keeping its transaction table full.
func RunLossBench(cfg LossBenchConfig) (LossBenchResult, error) {
	if cfg.Losses == nil {
		cfg.Losses = []float64{0, 0.01, 0.05}
	}
	if cfg.Transactions == 0 {
		cfg.Transactions = 20000
	}
	if cfg.Size == 0 {
		cfg.Size = 4096
	}
	if cfg.Delay == 0 {
		cfg.Delay = 5 * time.Microsecond
	}
	if cfg.RateBps == 0 {
		cfg.RateBps = 100e9
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Limit == 0 {
		cfg.Limit = 10 * time.Second
	}
	if cfg.Size < 0 || cfg.Size > 0xffff || cfg.Transactions < 0 {
		return LossBenchResult{}, errors.New("falcon: loss bench: bad size or transaction count")
	}
	modes := []bool{false, true}
	if cfg.GoBackN != nil {
		modes = []bool{*cfg.GoBackN}
	}
	res := LossBenchResult{Size: cfg.Size, DelayUs: float64(cfg.Delay) / 1e3, RateGbs: float64(cfg.RateBps) / 1e9}
	for _, loss := range cfg.Losses {
		if loss < 0 || loss >= 1 {
			return res, errors.New("falcon: loss bench: loss must be in [0, 1)")
		}
		for _, gbn := range modes {
			pt, err := lossRun(cfg, loss, gbn)
			if err != nil {
				return res, err
			}
			res.Points = append(res.Points, pt)
		}
	}
	return res, nil
}

type lossULP struct {
	c       *Conn
	payload []byte
	issued  int
	done    int
	total   int
}

func (u *lossULP) fill() {
	for u.c != nil && u.issued < u.total {
		if _, err := u.c.Push(uint64(u.issued), u.payload); err != nil {
			return
		}
		u.issued++
	}
}

func (u *lossULP) OnRequest(c *Conn, r *Request) {
	if r.Kind == tl.Push {
		c.AckPush(r.RSN)
	}
}
func (u *lossULP) OnCompletion(c *Conn, cpl *Completion) { u.done++; u.fill() }
func (u *lossULP) OnXon(c *Conn)                         { u.fill() }

func lossRun(cfg LossBenchConfig, loss float64, gbn bool) (LossBenchPoint, error) {
	mc := func(seed int64) link.MemConfig {
		return link.MemConfig{Delay: cfg.Delay, RateBitsPerSec: cfg.RateBps, DropProb: loss, Seed: seed}
	}
	ua := &lossULP{payload: make([]byte, cfg.Size), total: cfg.Transactions}
	ub := &lossULP{}
	p, err := NewPair(PairConfig{AB: mc(cfg.Seed), BA: mc(cfg.Seed + 1), ULPA: ua, ULPB: ub,
		Conn: ConnConfig{SCID: 1, DCID: 2, Ordered: true, GoBackN: gbn, MTU: max(cfg.Size, 1),
			InitFcwnd: 64 << 10, InitRTO: 200 * time.Microsecond, MinRTO: 50 * time.Microsecond, MaxRetries: 64,
			RACK: cfg.RACKTLP && !gbn, TLP: cfg.RACKTLP && !gbn}})
	if err != nil {
		return LossBenchPoint{}, err
	}
	ua.c = p.CA
	start := p.Clock.Now()
	ua.fill()
	ok := p.RunUntil(func() bool { return ua.done == ua.total }, cfg.Limit)
	sim := (p.Clock.Now() - start).Seconds()
	s := &p.CA.Stats
	pt := LossBenchPoint{Mode: "selective-repeat", Loss: loss, Transactions: ua.done,
		Bytes: int64(ua.done) * int64(cfg.Size), SimSeconds: sim, TxPackets: s.TxTxnPackets.Load(),
		Retransmissions: s.RetxRTO.Load() + s.RetxEarly.Load() + s.RetxOWN.Load() + s.RetxRACK.Load() +
			s.RetxTLP.Load() + s.RetxNack.Load() + s.RetxGBN.Load(),
		Completed: ok, RACKTLP: cfg.RACKTLP && !gbn}
	if gbn {
		pt.Mode = "go-back-n"
	}
	if sim > 0 {
		pt.GoodputGbps = float64(pt.Bytes) * 8 / sim / 1e9
	}
	return pt, nil
}
