package fabric

import (
	"testing"
	"time"

	"falconnic/internal/clock"
)

type got struct {
	at   time.Duration
	flow uint32
	m    Meta
	n    int
}

// rig is a fabric on a manual clock with every host recording deliveries.
type rig struct {
	clk *clock.Manual
	f   *Fabric
	rx  [][]got
}

func newRig(cfg Config) *rig {
	r := &rig{clk: clock.NewManual(0)}
	r.f = New(r.clk, cfg)
	r.rx = make([][]got, r.f.Hosts())
	for h := range r.rx {
		r.f.Attach(h, func(pkt []byte, flow uint32, m Meta) {
			r.rx[h] = append(r.rx[h], got{r.clk.Now(), flow, m, len(pkt)})
		})
	}
	return r
}

// run moves the clock event by event until nothing is pending or limit.
func (r *rig) run(limit time.Duration) {
	for {
		t, ok := r.f.NextDue()
		if !ok || t > limit {
			return
		}
		r.clk.Set(max(t, r.clk.Now()))
		r.f.Poll()
	}
}

const ns = time.Nanosecond

func base() Config {
	return Config{Racks: 2, HostsPerRack: 3, Spines: 4, HostRate: 100e9, SpineRate: 100e9,
		HostDelay: time.Microsecond, SpineDelay: 2 * time.Microsecond, Pipeline: 600 * ns, Seed: 1}
}

func TestArrivalTimeAndHopsInsideRack(t *testing.T) {
	r := newRig(base())
	r.f.Send(0, 1, make([]byte, 1000), 7) // 1000 B at 100 Gb/s: 80 ns per link
	r.run(time.Second)
	want := 80*ns + time.Microsecond + 600*ns + 80*ns + time.Microsecond
	if len(r.rx[1]) != 1 || r.rx[1][0].at != want || r.rx[1][0].m.Hops != 1 || r.rx[1][0].flow != 7 {
		t.Fatalf("got %+v, want one packet at %v with 1 hop", r.rx[1], want)
	}
	if p := r.f.Path(0, 1, 7); len(p) != 2 {
		t.Fatalf("path inside a rack = %v", p)
	}
}

func TestArrivalTimeAndHopsAcrossRacks(t *testing.T) {
	r := newRig(base())
	r.f.Send(0, 3, make([]byte, 1000), 7)
	r.run(time.Second)
	want := 4*80*ns + 2*time.Microsecond + 4*time.Microsecond + 3*600*ns
	if len(r.rx[3]) != 1 || r.rx[3][0].at != want || r.rx[3][0].m.Hops != 3 || r.rx[3][0].m.Src != 0 {
		t.Fatalf("got %+v, want one packet at %v with 3 hops", r.rx[3], want)
	}
	p := r.f.Path(0, 3, 7)
	if len(p) != 4 || r.f.Metrics(p[1]).TxPackets != 1 || r.f.Metrics(p[2]).TxPackets != 1 {
		t.Fatalf("path %v did not carry the packet", p)
	}
}

func TestIncastQueuesAtTheDownlink(t *testing.T) {
	r := newRig(base())
	r.f.Send(0, 1, make([]byte, 1000), 0)
	r.f.Send(2, 1, make([]byte, 1000), 0)
	r.f.Send(0, 1, make([]byte, 1000), 0)
	r.run(time.Second)
	rx := r.rx[1]
	if len(rx) != 3 {
		t.Fatalf("delivered %d", len(rx))
	}
	// The two packets of host 0 serialize back to back on its uplink and
	// on the downlink: 80 ns apart.
	if rx[1].at-rx[0].at != 80*ns {
		t.Fatalf("second packet %v after the first, want 80ns", rx[1].at-rx[0].at)
	}
	m := r.f.Metrics(r.f.Down(1))
	if m.TxPackets != 3 || m.QueueDelay.Count != 3 || m.MaxQueueBytes < 1000 {
		t.Fatalf("downlink metrics %+v", m)
	}
}

// With Priority, a host NIC serves a picked packet ahead of its queue
// (behind the packet on the wire); switches keep one FIFO.
func TestHostNICServesPriorityFirst(t *testing.T) {
	c := base()
	c.Priority = func(p []byte) bool { return len(p) < 100 }
	r := newRig(c)
	for range 3 {
		r.f.Send(0, 1, make([]byte, 1000), 0) // 80 ns each on the uplink
	}
	ack := make([]byte, 50) // 4 ns
	r.f.Send(0, 1, ack, 0)
	r.run(time.Second)
	rx := r.rx[1]
	if len(rx) != 4 {
		t.Fatalf("delivered %d", len(rx))
	}
	if rx[1].n != 50 {
		t.Fatalf("second delivery is %d bytes, want the 50-byte packet right behind the first", rx[1].n)
	}
	// Without Priority it comes last.
	r = newRig(base())
	for range 3 {
		r.f.Send(0, 1, make([]byte, 1000), 0)
	}
	r.f.Send(0, 1, ack, 0)
	r.run(time.Second)
	if rx := r.rx[1]; len(rx) != 4 || rx[3].n != 50 {
		t.Fatalf("FIFO: %d deliveries, last of %d bytes", len(rx), rx[len(rx)-1].n)
	}
}

func TestECMPIsStablePerLabelAndMovesWithIt(t *testing.T) {
	f := New(clock.NewManual(0), Config{Racks: 2, HostsPerRack: 1, Spines: 4, Seed: 3})
	count := make([]int, 4)
	moved := false
	first := f.SpineOf(0, 1, 0)
	for label := uint32(0); label < 4000; label++ {
		s := f.SpineOf(0, 1, label)
		if s != f.SpineOf(0, 1, label) {
			t.Fatal("ECMP not deterministic")
		}
		count[s]++
		moved = moved || s != first
	}
	if !moved {
		t.Fatal("no flow label moved the flow")
	}
	for s, n := range count {
		if n < 800 || n > 1200 {
			t.Fatalf("spine %d got %d of 4000 labels", s, n)
		}
	}
	// Each leaf salts its stage: the reverse direction hashes independently.
	g := New(clock.NewManual(0), Config{Racks: 2, HostsPerRack: 1, Spines: 4, Seed: 4})
	same := 0
	for label := uint32(0); label < 400; label++ {
		if f.SpineOf(0, 1, label) == g.SpineOf(0, 1, label) {
			same++
		}
	}
	if same > 200 {
		t.Fatalf("another seed keeps %d of 400 choices", same)
	}
}

func TestPortCapDrops(t *testing.T) {
	cfg := base()
	cfg.PortBytes = 2500
	r := newRig(cfg)
	// Host 0 and host 1 both send 3 packets to host... make the downlink
	// of host 1 the bottleneck: two senders at line rate into one port.
	for k := 0; k < 10; k++ {
		r.f.Send(0, 1, make([]byte, 1000), 0)
		r.f.Send(2, 1, make([]byte, 1000), 0)
	}
	r.run(time.Second)
	d := r.f.Metrics(r.f.Down(1)).Drops[DropPortCap]
	if d == 0 || r.f.Stats.Drops[DropPortCap].Load() != d {
		t.Fatalf("port-cap drops: link %d, fabric %d", d, r.f.Stats.Drops[DropPortCap].Load())
	}
	if int(d)+len(r.rx[1]) != 20 {
		t.Fatalf("%d dropped + %d delivered != 20", d, len(r.rx[1]))
	}
	if m := r.f.Metrics(r.f.Down(1)).MaxQueueBytes; m > 2500 {
		t.Fatalf("queue reached %d > cap", m)
	}
}

func TestDynamicThresholdLimitsOneQueue(t *testing.T) {
	cfg := base()
	cfg.PoolBytes = 10000
	cfg.Alpha = 1 // a queue may hold at most the free pool: half of it when alone
	r := newRig(cfg)
	for k := 0; k < 20; k++ {
		r.f.Send(0, 1, make([]byte, 1000), 0)
		r.f.Send(2, 1, make([]byte, 1000), 0)
	}
	r.run(time.Second)
	m := r.f.Metrics(r.f.Down(1))
	if m.Drops[DropThreshold] == 0 {
		t.Fatalf("no dynamic-threshold drops: %+v", m.Drops)
	}
	if m.MaxQueueBytes > 5000 {
		t.Fatalf("queue reached %d, above alpha x free", m.MaxQueueBytes)
	}
}

func TestECNMarkReachesTheReceiver(t *testing.T) {
	cfg := base()
	cfg.ECNBytes = 1500
	r := newRig(cfg)
	for k := 0; k < 5; k++ {
		r.f.Send(0, 1, make([]byte, 1000), 0)
		r.f.Send(2, 1, make([]byte, 1000), 0)
	}
	r.run(time.Second)
	marked := 0
	for _, g := range r.rx[1] {
		if g.m.ECN {
			marked++
		}
	}
	if marked == 0 || marked == len(r.rx[1]) || uint64(marked) != r.f.Stats.DeliveredECN.Load() {
		t.Fatalf("%d of %d delivered packets marked", marked, len(r.rx[1]))
	}
	if r.f.Metrics(r.f.Down(1)).ECNMarked == 0 {
		t.Fatal("downlink counted no marks")
	}
}

// labelOn returns a flow label host 0 → host 1 hashes onto spine s.
func labelOn(f *Fabric, s int) uint32 {
	for l := uint32(0); ; l++ {
		if f.SpineOf(0, 1, l) == s {
			return l
		}
	}
}

func failRig(mode Mode) (*rig, uint32, uint32) {
	cfg := Config{Racks: 2, HostsPerRack: 1, Spines: 2, Convergence: 100 * time.Microsecond, Seed: 1}
	r := newRig(cfg)
	bad, good := labelOn(r.f, 0), labelOn(r.f, 1)
	r.f.Fail(10*time.Microsecond, 0, 0, mode)
	for k := 0; k < 40; k++ {
		at := time.Duration(k) * 5 * time.Microsecond
		r.f.At(at, func() {
			r.f.Send(0, 1, make([]byte, 100), bad)
			r.f.Send(0, 1, make([]byte, 100), good)
		})
	}
	r.run(time.Second)
	return r, bad, good
}

func TestBlackholeKeepsDroppingHashedFlows(t *testing.T) {
	r, bad, good := failRig(Blackhole)
	byLabel := map[uint32]int{}
	for _, g := range r.rx[1] {
		byLabel[g.flow]++
	}
	// Sends at 0 and 5 µs pass; from 10 µs on spine 0 drops, forever.
	if byLabel[bad] != 2 || byLabel[good] != 40 {
		t.Fatalf("delivered by label: bad %d good %d", byLabel[bad], byLabel[good])
	}
	if r.f.Stats.Drops[DropLinkDown].Load() != 38 || r.f.Withdrawn(0, 0) {
		t.Fatalf("link-down drops %d, withdrawn %v", r.f.Stats.Drops[DropLinkDown].Load(), r.f.Withdrawn(0, 0))
	}
}

func TestWithdrawnLinkLeavesECMPAfterConvergence(t *testing.T) {
	r, bad, _ := failRig(Withdrawn)
	n := 0
	for _, g := range r.rx[1] {
		if g.flow == bad {
			n++
			if g.at > 10*time.Microsecond && g.at < 110*time.Microsecond {
				t.Fatalf("bad-label packet delivered at %v, during convergence", g.at)
			}
		}
	}
	// 2 before the failure; sends at 110..195 µs (18) rerouted.
	if n != 20 || !r.f.Withdrawn(0, 0) {
		t.Fatalf("bad label delivered %d, want 20 (withdrawn %v)", n, r.f.Withdrawn(0, 0))
	}
	if s := r.f.SpineOf(0, 1, bad); s != 1 {
		t.Fatalf("withdrawn spine still picked: %d", s)
	}
}

func TestFlapRestoresTheLink(t *testing.T) {
	cfg := Config{Racks: 2, HostsPerRack: 1, Spines: 2, Seed: 1}
	r := newRig(cfg)
	bad := labelOn(r.f, 0)
	r.f.Flap(10*time.Microsecond, 0, 0, Blackhole, 10*time.Microsecond, 10*time.Microsecond, 2)
	for k := 0; k < 10; k++ {
		r.f.At(time.Duration(k)*5*time.Microsecond+time.Microsecond, func() { r.f.Send(0, 1, make([]byte, 100), bad) })
	}
	r.run(time.Second)
	// Down over [10,20) and [30,40) µs: sends at 11, 16, 31, 36 µs are lost.
	if len(r.rx[1]) != 6 || r.f.Stats.Drops[DropLinkDown].Load() != 4 || r.f.Stats.LinkFailures.Load() != 2 {
		t.Fatalf("delivered %d, dropped %d", len(r.rx[1]), r.f.Stats.Drops[DropLinkDown].Load())
	}
}

func TestDegradeAndLoss(t *testing.T) {
	r := newRig(base())
	r.f.Degrade(0, r.f.Up(0), 50e9) // 1000 B now take 160 ns on the uplink
	r.f.LossAt(0, r.f.Up(2), 1)
	r.f.SetDelay(r.f.Down(1), 3*time.Microsecond)
	r.f.At(0, func() {
		r.f.Send(0, 1, make([]byte, 1000), 0)
		r.f.Send(2, 3, make([]byte, 1000), 0)
	})
	r.run(time.Second)
	want := 160*ns + time.Microsecond + 600*ns + 80*ns + 3*time.Microsecond
	if len(r.rx[1]) != 1 || r.rx[1][0].at != want {
		t.Fatalf("degraded uplink, longer downlink: %+v, want at %v", r.rx[1], want)
	}
	if len(r.rx[3]) != 0 || r.f.Metrics(r.f.Up(2)).Drops[DropLoss] != 1 {
		t.Fatal("lossy uplink delivered")
	}
}

func TestBackgroundLoadAndSeries(t *testing.T) {
	cfg := base()
	cfg.SampleEvery = 10 * time.Microsecond
	r := newRig(cfg)
	down := r.f.Down(1)
	r.f.Watch(down)
	r.f.AddBackground(Background{Src: 0, Dst: 1, Link: -1, Load: 0.5, Size: 1000, Stop: 100 * time.Microsecond})
	r.f.AddBackground(Background{Link: r.f.Up(3), Load: 0.25, Size: 1000, Stop: 100 * time.Microsecond})
	r.run(101 * time.Microsecond)
	r.f.StopSampling()
	r.run(time.Second)
	if len(r.rx[1]) != 0 {
		t.Fatal("background reached a receiver")
	}
	s := r.f.Metrics(down).Series
	if len(s) < 9 {
		t.Fatalf("series has %d samples", len(s))
	}
	for _, p := range s[1:9] {
		if p.Utilization < 0.45 || p.Utilization > 0.55 {
			t.Fatalf("utilization sample %+v, want 0.5", p)
		}
	}
	if got := r.f.Metrics(r.f.Up(3)).TxPackets; got != 313 && got != 312 {
		t.Fatalf("one-link background sent %d packets, want ~312", got)
	}
	if r.f.Stats.BackgroundDelivered.Load() != r.f.Stats.BackgroundSent.Load() {
		t.Fatal("background packets lost on an idle fabric")
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	r := newRig(base())
	for h := range r.rx {
		r.f.Attach(h, func([]byte, uint32, Meta) {})
	}
	pkt := make([]byte, 4096)
	step := func() {
		for k := 0; k < 8; k++ {
			r.f.Send(0, 3, pkt, uint32(k))
			r.f.Send(1, 2, pkt, uint32(k))
		}
		r.clk.Advance(100 * time.Microsecond)
		r.f.Poll()
	}
	step()
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Fatalf("%.1f allocations per step", a)
	}
}

func TestHistogramQuantile(t *testing.T) {
	var h Histogram
	for i := 0; i < 99; i++ {
		h.add(100 * ns)
	}
	h.add(10 * time.Microsecond)
	if q := h.Quantile(0.5); q != 128*ns {
		t.Fatalf("p50 %v", q)
	}
	if q := h.Quantile(0.999); q != 16384*ns {
		t.Fatalf("p99.9 %v", q)
	}
}

func TestNoRouteWhenEverySpineIsWithdrawn(t *testing.T) {
	cfg := Config{Racks: 2, HostsPerRack: 1, Spines: 2, Convergence: time.Microsecond, Seed: 1}
	r := newRig(cfg)
	r.f.Fail(0, 0, 0, Withdrawn)
	r.f.Fail(0, 1, 1, Withdrawn) // spine 1 loses rack 1
	r.f.At(10*time.Microsecond, func() { r.f.Send(0, 1, make([]byte, 100), 0) })
	r.run(time.Second)
	if r.f.SpineOf(0, 1, 0) != -1 || r.f.Stats.Drops[DropNoRoute].Load() != 1 || len(r.rx[1]) != 0 {
		t.Fatalf("spine %d, no-route drops %d", r.f.SpineOf(0, 1, 0), r.f.Stats.Drops[DropNoRoute].Load())
	}
	r.f.Restore(20*time.Microsecond, 0, 0)
	r.f.At(30*time.Microsecond, func() { r.f.Send(0, 1, make([]byte, 100), 0) })
	r.run(time.Second)
	if len(r.rx[1]) != 1 {
		t.Fatal("restored spine not used")
	}
}

func TestSharedPoolFull(t *testing.T) {
	cfg := base()
	cfg.PoolBytes = 3000 // no dynamic threshold: only the pool limits
	r := newRig(cfg)
	for k := 0; k < 5; k++ {
		r.f.Send(0, 1, make([]byte, 1000), 0)
		r.f.Send(2, 1, make([]byte, 1000), 0)
	}
	r.run(time.Second)
	if r.f.Stats.Drops[DropPoolFull].Load() == 0 || r.f.Metrics(r.f.Down(1)).MaxQueueBytes > 3000 {
		t.Fatalf("pool drops %d, queue %d", r.f.Stats.Drops[DropPoolFull].Load(), r.f.Metrics(r.f.Down(1)).MaxQueueBytes)
	}
	if len(r.f.Stats.Set()) != 10+int(NumCauses) {
		t.Fatal("a drop cause has no counter")
	}
}
