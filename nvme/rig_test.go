package nvme

import (
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/sim"
	"falconnic/falcon/wire"
)

// rig is the package's test peer: an initiator NIC (A) and a target NIC
// (B) exporting memory namespaces, over two in-memory Falcon endpoints on
// a manual clock, joined by one path (one unordered connection).
type rig struct {
	t          testing.TB
	pair       *sim.Pair
	ini, tgt   *Engine
	path, back *Path
	done       []*Command
	mem        map[uint16]*MemBackend
}

type rigConfig struct {
	impair     link.MemConfig
	namespaces []NamespaceConfig // Backend nil: a MemBackend of the right size
	maxTxns    uint32
	timeout    time.Duration
	from       *Initiator // the target's path is identified as this initiator (AddPathFrom)
}

func newRig(t testing.TB, rc rigConfig) *rig {
	r := &rig{t: t, mem: make(map[uint16]*MemBackend)}
	cmd := falcon.ConnConfig{SCID: 10, DCID: 20, Protocol: wire.ProtoNVMe, TxReqPSN: 1000, RxReqPSN: 2000,
		TxDataPSN: 3000, RxDataPSN: 4000, TxRSN: 77, RxRSN: 0xfffffff0, MaxTxns: rc.maxTxns}
	imp := rc.impair
	imp2 := imp
	imp2.Seed++
	p, err := sim.NewPair(sim.PairConfig{AB: imp, BA: imp2, Conn: cmd})
	if err != nil {
		t.Fatal(err)
	}
	r.ini = NewEngine(Config{Function: 7, Clock: p.Clock, CommandTimeout: rc.timeout, OnComplete: func(c *Command) { r.done = append(r.done, c) }})
	r.tgt = NewEngine(Config{Function: 9, Clock: p.Clock})
	for _, nc := range rc.namespaces {
		if nc.Backend == nil {
			m := NewMemBackend(int64(nc.Blocks) * int64(nc.BlockSize))
			r.mem[nc.NSID] = m
			nc.Backend = m
		}
		ns, err := NewNamespace(nc)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.tgt.AddNamespace(ns); err != nil {
			t.Fatal(err)
		}
	}
	p.A.SetULP(r.ini)
	p.B.SetULP(r.tgt)
	r.pair = p
	if r.path, err = r.ini.AddPath(p.CA); err != nil {
		t.Fatal(err)
	}
	if rc.from != nil {
		r.back, err = r.tgt.AddPathFrom(p.CB, *rc.from)
	} else {
		r.back, err = r.tgt.AddPath(p.CB)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// submit submits c and fails the test on a refusal.
func (r *rig) submit(c *Command) *Command {
	r.t.Helper()
	if err := r.path.Submit(c); err != nil {
		r.t.Fatalf("submit %v: %v", c.Op, err)
	}
	return c
}

// run steps the simulation until n commands completed in total.
func (r *rig) run(n int) {
	r.t.Helper()
	if !r.pair.RunUntil(func() bool { return len(r.done) >= n }, 10*time.Second) {
		r.t.Fatalf("%d of %d commands completed; initiator %v target %v", len(r.done), n,
			r.ini.Stats.Set().NonZero(), r.tgt.Stats.Set().NonZero())
	}
}

// do submits one command and runs it to completion.
func (r *rig) do(c *Command) Status {
	r.t.Helper()
	n := len(r.done) + 1
	r.submit(c)
	r.run(n)
	return c.Status
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// split cuts b into a scatter list of uneven pieces (like guest buffers).
func split(b []byte) [][]byte {
	var segs [][]byte
	for i, n := 0, 100; len(b) > 0; i++ {
		k := min(len(b), n)
		segs = append(segs, b[:k])
		b = b[k:]
		n = n*3 + 7
	}
	return segs
}
