package sim

import (
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/fabric"
	"falconnic/falcon/wire"
)

func twoHosts() Config {
	return Config{
		Fabric: fabric.Config{Racks: 1, HostsPerRack: 2, HostDelay: time.Microsecond, Pipeline: 600 * time.Nanosecond, Seed: 1},
		Conn:   falcon.ConnConfig{Ordered: true, MTU: 4096},
		Seed:   1,
	}
}

// A closed loop of writes completes every operation exactly once and
// records one latency each.
func TestClosedLoopWrites(t *testing.T) {
	s := New(twoHosts())
	qp, err := s.Connect(0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var rec Recorder
	qp.Closed(Write, 1<<20, 2, 10, 0, &rec)
	if !s.RunUntil(func() bool { return rec.Ops == 10 }, time.Second) {
		t.Fatalf("%d of 10 ops done by %v", rec.Ops, s.Now())
	}
	if len(rec.Lat) != 10 || rec.Bytes != 10<<20 || s.Hosts[1].Drained != 10<<20 {
		t.Fatalf("rec %d lat, %d bytes, drained %d", len(rec.Lat), rec.Bytes, s.Hosts[1].Drained)
	}
	// 10 MiB at 100 Gb/s is 839 µs; with headers and the fixed window
	// the run takes a little longer, never less.
	if el := s.Now() - time.Millisecond; el < 839*time.Microsecond || el > 2*time.Millisecond {
		t.Fatalf("10 MiB took %v", el)
	}
}

// Reads pull the data from the peer.
func TestClosedLoopReads(t *testing.T) {
	s := New(twoHosts())
	qp, _ := s.Connect(0, 1, 1)
	var rec Recorder
	qp.Closed(Read, 8192, 1, 20, 0, &rec)
	if !s.RunUntil(func() bool { return rec.Ops == 20 }, time.Second) {
		t.Fatalf("%d of 20 reads done", rec.Ops)
	}
}

// Open-loop arrivals queue behind flow control and all complete.
func TestPoissonArrivals(t *testing.T) {
	s := New(twoHosts())
	qp, _ := s.Connect(0, 1, 1)
	var rec Recorder
	qp.Poisson(Write, 64<<10, 50000, s.Now(), s.Now()+2*time.Millisecond, &rec) // ~26 Gb/s
	s.Run(s.Now() + 3*time.Millisecond)
	if rec.Ops < 70 || rec.Ops > 130 || qp.Outstanding() != 0 {
		t.Fatalf("%d ops done (want ~100), %d outstanding", rec.Ops, qp.Outstanding())
	}
}

// Many connections: 5 senders × 1000 QPs into one receiver (with buffers
// deep enough for no drop) run in the event-driven loop, which visits only
// due connections, and every operation completes.
func TestManyConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cfg := twoHosts()
	cfg.Fabric.HostsPerRack = 6
	s := New(cfg)
	var rec Recorder
	for src := 1; src <= 5; src++ {
		for j := 0; j < 1000; j++ {
			qp, err := s.Connect(src, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			qp.Closed(Write, 16<<10, 1, 1, 0, &rec)
		}
	}
	start := time.Now()
	if !s.RunUntil(func() bool { return rec.Ops == 5000 }, s.Now()+100*time.Millisecond) {
		t.Fatalf("%d of 5000 ops completed", rec.Ops)
	}
	t.Logf("5x1000 QPs, 16 KiB each: %d ops in %v sim, %v wall, %d fabric events", rec.Ops, s.Now()-time.Millisecond, time.Since(start), s.Fabric.Events)
}

// The fabric's hop count and ECN marks reach the receiving connection,
// which echoes them in the ACKs the sender gets: 1 switch inside a rack, 3
// across racks; marks once queues pass the ECN threshold.
func TestAcksEchoHopsAndECN(t *testing.T) {
	cfg := Config{Fabric: DefaultFabric(2, 3, 2, 1), Conn: DefaultConn(), Seed: 1}
	cfg.Fabric.ECNBytes = 8 << 10
	hops := map[int]map[uint8]int{} // sender host → hop count → ACKs
	var ecn uint16
	cfg.Tap = func(h int, tx bool, pkt []byte) {
		p, err := wire.Parse(pkt)
		if tx || err != nil || (p.Type() != wire.TypeBACK && p.Type() != wire.TypeEACK) {
			return
		}
		if hops[h] == nil {
			hops[h] = map[uint8]int{}
		}
		hops[h][p.Ack().HopCount()]++
		ecn = max(ecn, p.Ack().ECNCount())
	}
	s := New(cfg)
	var rec Recorder
	for _, src := range []int{1, 2} { // host 0's rack: an incast into it
		qp, _ := s.Connect(src, 0, 1)
		qp.Closed(Write, 256<<10, 1, 4, 0, &rec)
	}
	far, _ := s.Connect(3, 0, 1) // rack 1
	far.Closed(Write, 4096, 1, 4, 0, &rec)
	if !s.RunUntil(func() bool { return rec.Ops == 12 }, s.Now()+time.Second) {
		t.Fatalf("%d of 12 ops", rec.Ops)
	}
	if len(hops[1]) != 1 || hops[1][1] == 0 || len(hops[3]) != 1 || hops[3][3] == 0 {
		t.Fatalf("hop counts in ACKs by sender: %v", hops)
	}
	if ecn == 0 || s.Fabric.Stats.DeliveredECN.Load() == 0 {
		t.Fatal("no ECN mark echoed under incast")
	}
}

// A draining receiver acknowledges pushes in order at its drain rate.
func TestDrainPacesAcks(t *testing.T) {
	s := New(twoHosts())
	qp, _ := s.Connect(0, 1, 1)
	s.Hosts[1].Drain = 10e9 // a tenth of the link
	var rec Recorder
	qp.Closed(Write, 1<<20, 1, 2, 0, &rec)
	start := s.Now()
	if !s.RunUntil(func() bool { return rec.Ops == 2 }, s.Now()+time.Second) {
		t.Fatalf("%d of 2 ops", rec.Ops)
	}
	// 2 MiB at 10 Gb/s take 1.68 ms.
	if el := s.Now() - start; el < 1677*time.Microsecond || el > 1800*time.Microsecond {
		t.Fatalf("2 MiB through a 10 Gb/s drain took %v", el)
	}
	if qp.Failed != 0 || s.Hosts[1].Drained < 2<<20 {
		t.Fatalf("failed %d, drained %d", qp.Failed, s.Hosts[1].Drained)
	}
}

// BenchmarkSimIncast runs 5 senders × 10 QPs of 1 MiB writes for 2 ms of
// simulated time on today's windows and reports packet events per second
// of wall time with Falcon endpoints on the fabric, and the data packets
// (transaction packets sent, retransmissions included) per second.
func BenchmarkSimIncast(b *testing.B) {
	var events, pkts uint64
	for i := 0; i < b.N; i++ {
		s := New(Config{Fabric: DefaultFabric(1, 6, 1, 1), Conn: DefaultConn(), Seed: 1})
		for src := 1; src <= 5; src++ {
			for j := 0; j < 10; j++ {
				qp, _ := s.Connect(src, 0, 1)
				qp.Closed(Write, 1<<20, 1, -1, 0, nil)
			}
		}
		s.Run(s.Now() + 2*time.Millisecond)
		events += s.Fabric.Events
		pkts += Totals(s.QPs).TxPackets
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(pkts)/b.Elapsed().Seconds(), "data-pkts/s")
}

// recoveredFrom finds the first bin back at the level whose next k bins
// average at it too: a lone good bin amid a dip does not count, and the
// dip itself is not held in the window.
func TestRecoveredFrom(t *testing.T) {
	g := []float64{100, 40, 95, 30, 95, 100, 90, 95, 100, 100}
	for _, tc := range []struct {
		first, k, want int
	}{
		{1, 1, 2},   // the lone 95 at once
		{1, 3, 4},   // 95, 30, 95 averages 73: from bin 4
		{1, 5, 4},   // 95 100 90 95 100
		{5, 5, 5},   // already back
		{1, 20, -1}, // past the series
	} {
		if got := recoveredFrom(g, tc.first, 90, tc.k); got != tc.want {
			t.Errorf("first %d k %d: bin %d, want %d", tc.first, tc.k, got, tc.want)
		}
	}
	if got := recoveredFrom([]float64{10, 20, 30}, 0, 90, 1); got != -1 {
		t.Errorf("never back: bin %d, want -1", got)
	}
	// A good bin before the dip is not a recovery: the search starts at
	// the first bin below the level.
	g = []float64{100, 95, 60, 100, 100, 100, 100, 100}
	if got := recoveredFrom(g, 0, 90, 5); got != 0 {
		t.Errorf("from the failure: bin %d, want 0 (the mean of 100 95 60 100 100 is 91)", got)
	}
	if got := recoveredFrom(g, firstBelow(g, 0, 90), 90, 5); got != 3 {
		t.Errorf("from the dip: bin %d, want 3", got)
	}
	if got := firstBelow(g, 0, 90); got != 2 {
		t.Errorf("firstBelow = %d, want 2", got)
	}
	if got := firstBelow([]float64{95, 100}, 0, 90); got != 2 {
		t.Errorf("firstBelow with no dip = %d, want len 2", got)
	}
}

// AckFirst picks ACKs and NACKs, not transaction packets.
func TestAckFirst(t *testing.T) {
	for _, c := range []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"BACK", wire.AppendBACK(nil, &wire.AckFields{}), true},
		{"EACK", wire.AppendEACK(nil, &wire.AckFields{}), true},
		{"NACK", wire.AppendNACK(nil, &wire.NackFields{}), true},
		{"push data", wire.AppendPushData(nil, &wire.TxnFields{}, make([]byte, 64)), false},
		{"pull request", wire.AppendPullRequest(nil, &wire.TxnFields{}), false},
		{"pull data", wire.AppendPullData(nil, &wire.TxnFields{}, make([]byte, 64)), false},
		{"empty", nil, false},
	} {
		if got := AckFirst(c.frame); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
