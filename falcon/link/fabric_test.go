package link

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"falconnic/internal/clock"
)

type fabricRx struct {
	host int
	at   clock.Time
	seq  uint32
	flow uint32
}

// runFabric polls f at every due time until it is empty.
func runFabric(clk *clock.Manual, f *Fabric) {
	for {
		f.Poll()
		due, ok := f.NextDue()
		if !ok {
			return
		}
		clk.Set(due)
	}
}

func attachAll(clk *clock.Manual, f *Fabric, hosts int, out *[]fabricRx) {
	for h := 0; h < hosts; h++ {
		f.Attach(h, func(pkt []byte, flow uint32) {
			*out = append(*out, fabricRx{h, clk.Now(), binary.BigEndian.Uint32(pkt), flow})
		})
	}
}

// TestFabricLatency: one 1000-byte packet at 8 Gb/s host links and 80 Gb/s
// core crosses uplink (1 µs + 2 µs), core (0.1 µs + 5 µs) and downlink
// (1 µs + 2 µs).
func TestFabricLatency(t *testing.T) {
	clk := clock.NewManual(0)
	f := NewFabric(clk, FabricConfig{Hosts: 2, Paths: 4, HostRateBitsPerSec: 8e9, PathRateBitsPerSec: 80e9,
		HostDelay: 2 * time.Microsecond, PathDelay: 5 * time.Microsecond})
	var got []fabricRx
	attachAll(clk, f, 2, &got)
	f.Link(0, 1).Send(numbered(7, 1000), 42)
	runFabric(clk, f)
	want := 1*time.Microsecond + 2*time.Microsecond + 100*time.Nanosecond + 5*time.Microsecond + 1*time.Microsecond + 2*time.Microsecond
	if len(got) != 1 || got[0].host != 1 || got[0].at != want || got[0].seq != 7 || got[0].flow != 42 {
		t.Fatalf("got %+v, want arrival at %v", got, want)
	}
}

// TestFabricIncast: four senders at line rate into one receiver queue at
// the receiver's downlink; with a 20 KB queue the excess is tail-dropped
// there and the receiver gets its downlink rate.
func TestFabricIncast(t *testing.T) {
	clk := clock.NewManual(0)
	f := NewFabric(clk, FabricConfig{Hosts: 5, Paths: 2, HostRateBitsPerSec: 8e9, QueueBytes: 20000,
		HostDelay: time.Microsecond})
	var got []fabricRx
	attachAll(clk, f, 5, &got)
	const perSender = 200
	for i := 0; i < perSender; i++ {
		for s := 1; s <= 4; s++ {
			f.Link(s, 0).Send(numbered(uint32(i), 1000), uint32(s))
		}
		// each sender paces at line rate: 1000 B every 1 µs
		clk.Advance(time.Microsecond)
		f.Poll()
	}
	runFabric(clk, f)
	drops := f.Stats.DroppedDownlink.Load()
	if f.Stats.DroppedUplink.Load() != 0 || f.Stats.DroppedCore.Load() != 0 {
		t.Errorf("drops before the downlink: %v", f.Stats.Set().NonZero())
	}
	if uint64(len(got))+drops != 4*perSender {
		t.Errorf("delivered %d + dropped %d != %d", len(got), drops, 4*perSender)
	}
	// The downlink serves 1 packet/µs for ~200 µs + what the queue held.
	if len(got) < perSender || len(got) > perSender+25 {
		t.Errorf("delivered %d, want about %d", len(got), perSender+20)
	}
	if hw := f.QueueHighWater(StageDownlink, 0); hw > 20000 || hw < 19000 {
		t.Errorf("downlink high water %d", hw)
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].at - got[i-1].at; gap < time.Microsecond {
			t.Fatalf("downlink delivered faster than its rate: gap %v", gap)
		}
	}
}

func TestFabricECMPSpreadsFlowsAndKeepsEachOnOnePath(t *testing.T) {
	clk := clock.NewManual(0)
	const paths = 4
	f := NewFabric(clk, FabricConfig{Hosts: 2, Paths: paths, Seed: 5})
	count := make([]int, paths)
	for flow := uint32(0); flow < 4000; flow++ {
		p := f.PathOf(0, 1, flow)
		if p != f.PathOf(0, 1, flow) {
			t.Fatal("ECMP is not a function of the flow")
		}
		count[p]++
	}
	for p, c := range count {
		if c < 800 || c > 1200 {
			t.Errorf("path %d got %d of 4000 flows", p, c)
		}
	}
	g := NewFabric(clk, FabricConfig{Hosts: 2, Paths: paths, Seed: 6})
	same := 0
	for flow := uint32(0); flow < 400; flow++ {
		if f.PathOf(0, 1, flow) == g.PathOf(0, 1, flow) {
			same++
		}
	}
	if same > 200 {
		t.Errorf("seed does not salt the hash: %d of 400 equal", same)
	}
}

// TestFabricSlowPathAndRepath: a flow on a path with extra delay arrives
// late; relabelling it (PLB) moves it to a fast path. Per-flow order holds.
func TestFabricSlowPathAndRepath(t *testing.T) {
	clk := clock.NewManual(0)
	f := NewFabric(clk, FabricConfig{Hosts: 2, Paths: 2, PathDelay: time.Microsecond, Seed: 1})
	var got []fabricRx
	attachAll(clk, f, 2, &got)
	slow := uint32(0)
	for f.PathOf(0, 1, slow) != 1 {
		slow++
	}
	fast := slow + 1
	for f.PathOf(0, 1, fast) != 0 {
		fast++
	}
	f.SetPathDelay(1, 50*time.Microsecond)
	for i := uint32(0); i < 10; i++ {
		f.Link(0, 1).Send(numbered(i, 100), slow)
	}
	f.Link(0, 1).Send(numbered(100, 100), fast)
	runFabric(clk, f)
	if len(got) != 11 || got[0].seq != 100 || got[0].at != time.Microsecond {
		t.Fatalf("fast flow should arrive first after 1 µs: %+v", got[0])
	}
	for i := 1; i < 11; i++ {
		if got[i].seq != uint32(i-1) || got[i].at != 51*time.Microsecond {
			t.Errorf("slow packet %d: %+v", i, got[i])
		}
	}
}

func TestFabricPathLossAndBadHosts(t *testing.T) {
	clk := clock.NewManual(0)
	f := NewFabric(clk, FabricConfig{Hosts: 3, Paths: 1, Seed: 3})
	var got []fabricRx
	attachAll(clk, f, 2, &got) // host 2 has no receiver
	f.SetPathLoss(0, 0.25)
	for i := 0; i < statN; i++ {
		f.Link(0, 1).Send(numbered(uint32(i), 64), uint32(i))
	}
	runFabric(clk, f)
	within(t, "path loss", f.Stats.DroppedPathLoss.Load(), statN, 0.25)
	if uint64(len(got))+f.Stats.DroppedPathLoss.Load() != statN {
		t.Error("loss accounting")
	}
	f.SetPathLoss(0, 0)
	f.Link(0, 2).Send([]byte{1, 2, 3, 4}, 0)
	f.Link(0, 3).Send([]byte{1, 2, 3, 4}, 0)
	f.Link(-1, 1).Send([]byte{1, 2, 3, 4}, 0)
	runFabric(clk, f)
	if f.Stats.DroppedNoReceive.Load() != 1 || f.Stats.DroppedNoHost.Load() != 2 {
		t.Errorf("counters %v", f.Stats.Set().Snapshot())
	}
	// Out-of-range configuration calls are ignored.
	f.SetPathDelay(9, time.Second)
	f.SetPathLoss(-1, 1)
	f.Attach(7, nil)
	if f.QueueHighWater(5, 0) != 0 || f.QueueHighWater(StageCore, 9) != 0 {
		t.Error("QueueHighWater out of range")
	}
}

func TestFabricReceiverMaySend(t *testing.T) {
	clk := clock.NewManual(0)
	f := NewFabric(clk, FabricConfig{Hosts: 2})
	var trace []string
	for h := 0; h < 2; h++ {
		f.Attach(h, func(pkt []byte, flow uint32) {
			n := binary.BigEndian.Uint32(pkt)
			trace = append(trace, fmt.Sprintf("%d@%d", n, h))
			if n < 3 {
				f.Link(h, 1-h).Send(numbered(n+1, 8), flow)
			}
		})
	}
	f.Link(0, 1).Send(numbered(0, 8), 0)
	for i := 0; i < 4; i++ {
		if n := f.Poll(); n != 1 {
			t.Fatalf("poll %d delivered %d (zero-delay ping-pong must take one Poll per hop)", i, n)
		}
	}
	if strings.Join(trace, " ") != "0@1 1@0 2@1 3@0" {
		t.Errorf("trace %v", trace)
	}
}

func fabricTranscript(seed int64) string {
	clk := clock.NewManual(0)
	f := NewFabric(clk, FabricConfig{Hosts: 4, Paths: 3, HostRateBitsPerSec: 10e9, PathRateBitsPerSec: 25e9,
		HostDelay: time.Microsecond, PathDelay: 2 * time.Microsecond, QueueBytes: 30000, Seed: seed})
	f.SetPathLoss(2, 0.1)
	var got []fabricRx
	attachAll(clk, f, 4, &got)
	for i := 0; i < 300; i++ {
		f.Link(i%3+1, 0).Send(numbered(uint32(i), 500+i), uint32(i%7))
		clk.Advance(100 * time.Nanosecond)
		f.Poll()
	}
	runFabric(clk, f)
	var sb strings.Builder
	for _, r := range got {
		fmt.Fprintf(&sb, "%v %d %d\n", r.at, r.seq, r.flow)
	}
	return sb.String()
}

func TestFabricIsDeterministicPerSeed(t *testing.T) {
	if fabricTranscript(1) != fabricTranscript(1) {
		t.Error("same seed, different transcript")
	}
	if fabricTranscript(1) == fabricTranscript(2) {
		t.Error("different seeds, same transcript")
	}
}

func TestFabricSteadyStateDoesNotAllocate(t *testing.T) {
	clk := clock.NewManual(0)
	f := NewFabric(clk, FabricConfig{Hosts: 4, Paths: 4, HostRateBitsPerSec: 100e9, PathRateBitsPerSec: 100e9,
		HostDelay: time.Microsecond, PathDelay: time.Microsecond, QueueBytes: 1 << 20})
	for h := 0; h < 4; h++ {
		f.Attach(h, func([]byte, uint32) {})
	}
	pkt := make([]byte, 4096)
	links := []*FabricLink{f.Link(0, 1), f.Link(1, 2), f.Link(2, 3), f.Link(3, 0)}
	step := func() {
		for i, l := range links {
			l.Send(pkt, uint32(i))
		}
		clk.Advance(2 * time.Microsecond)
		f.Poll()
	}
	for i := 0; i < 2000; i++ {
		step()
	}
	if a := testing.AllocsPerRun(500, step); a != 0 {
		t.Errorf("fabric allocates %v per step", a)
	}
}

// BenchmarkFabric moves 4 KiB packets between 4 hosts over 4 paths: one
// Send and one delivery per op.
func BenchmarkFabric(b *testing.B) {
	clk := clock.NewManual(0)
	f := NewFabric(clk, FabricConfig{Hosts: 4, Paths: 4, HostRateBitsPerSec: 100e9, PathRateBitsPerSec: 400e9,
		HostDelay: time.Microsecond, PathDelay: time.Microsecond})
	for h := 0; h < 4; h++ {
		f.Attach(h, func([]byte, uint32) {})
	}
	pkt := make([]byte, 4096)
	links := []*FabricLink{f.Link(0, 1), f.Link(1, 2), f.Link(2, 3), f.Link(3, 0)}
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		links[i&3].Send(pkt, uint32(i))
		clk.Advance(500 * time.Nanosecond)
		f.Poll()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}
