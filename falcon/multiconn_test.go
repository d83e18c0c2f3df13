package falcon

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"falconnic/falcon/link"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// muxULP routes callbacks to a per-connection propULP.
type muxULP map[*Conn]*propULP

func (m muxULP) OnRequest(c *Conn, r *Request)         { m[c].OnRequest(c, r) }
func (m muxULP) OnCompletion(c *Conn, cpl *Completion) { m[c].OnCompletion(c, cpl) }
func (m muxULP) OnXon(c *Conn)                         { m[c].OnXon(c) }

// TestPropertyManyConnections: several connections (ordered and unordered)
// share each endpoint, its link and its resource pools; under loss and
// reordering every transaction on every connection completes exactly once,
// in order where ordered, and the pools drain.
func TestPropertyManyConnections(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	for seed := uint64(0); seed < uint64(seeds); seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		mem := func(s int64) link.MemConfig {
			return link.MemConfig{Delay: 3 * time.Microsecond, RateBitsPerSec: 100e9, DropProb: rng.Float64() * 0.1,
				ReorderProb: 0.1, ReorderDelay: 5 * time.Microsecond, DupProb: 0.02, Seed: s}
		}
		limits := tl.DefaultLimits()
		if seed%2 == 1 {
			limits = tl.Limits{CellSize: 256, TxReqPkts: 40, TxReqCells: 120, TxDataPkts: 20, TxDataCell: 80,
				RxReqPkts: 30, RxReqCells: 90, RxNetPkts: 16, RxNetCells: 48, HoLPkts: 3, HoLCells: 12, Alpha: 1}
		}
		ua, ub := muxULP{}, muxULP{}
		p, err := NewPair(PairConfig{AB: mem(int64(seed) + 1), BA: mem(int64(seed) + 100), ULPA: ua, ULPB: ub, Limits: limits,
			Conn: ConnConfig{SCID: 1, DCID: 101, Ordered: true, MaxTxns: 32, MaxRetries: 40, PullTimeout: -1}})
		if err != nil {
			t.Fatal(err)
		}
		type pair struct{ a, b *Conn }
		conns := []pair{{p.CA, p.CB}}
		for k := uint32(2); k <= 4; k++ {
			cc := ConnConfig{SCID: k, DCID: 100 + k, Ordered: k%2 == 1, MaxTxns: 32, MaxRetries: 40, PullTimeout: -1,
				TxDataPSN: wire.PSN(k * 1000), TxRSN: wire.RSN(k << 20)}
			ca, cb, err := p.Connect(cc)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, pair{ca, cb})
		}
		const total = 150
		sent := map[*Conn]int{}
		for i, cp := range conns {
			name := fmt.Sprintf("seed %d conn %d", seed, i)
			ord := cp.a.Config().Ordered
			ua[cp.a] = newPropULP(t, name+" A", seed*10+uint64(i), ord)
			ub[cp.b] = newPropULP(t, name+" B", seed*10+uint64(i)+5, ord)
			ua[cp.a].rnrProb, ub[cp.b].rnrProb = 0.02, 0.02
		}
		done := func() bool {
			all := true
			for _, cp := range conns {
				for _, c := range []*Conn{cp.a, cp.b} {
					u := ua[c]
					if u == nil {
						u = ub[c]
					}
					u.runDeferred()
					if sent[c] < total {
						sent[c] += u.submit(c, total-sent[c])
					}
					if sent[c] < total || len(u.want) > 0 || !c.Idle() {
						all = false
					}
				}
			}
			return all
		}
		if !p.RunUntil(done, 20*time.Second) {
			for _, cp := range conns {
				t.Logf("conn %d: A sent %d want %d; B sent %d want %d", cp.a.SCID(), sent[cp.a], len(ua[cp.a].want), sent[cp.b], len(ub[cp.b].want))
			}
			t.Fatalf("seed %d: stalled at %v", seed, p.Clock.Now())
		}
		for _, e := range []*Endpoint{p.A, p.B} {
			r := e.Resources()
			if r.TxReq.Pkt.Used+r.TxData.Pkt.Used+r.RxReq.Pkt.Used+r.RxNet.Pkt.Used != 0 {
				t.Errorf("seed %d: pools not drained: %+v", seed, *r)
			}
		}
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
}
