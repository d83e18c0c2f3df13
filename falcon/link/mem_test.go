package link

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

type delivery struct {
	at   clock.Time
	seq  uint32
	flow uint32
	pkt  []byte
}

// numbered returns a packet of n bytes whose first 4 bytes hold seq.
func numbered(seq uint32, n int) []byte {
	b := make([]byte, max(n, 4))
	binary.BigEndian.PutUint32(b, seq)
	return b
}

// advance moves the clock forward by d, polling at every due time on the way.
func advance(clk *clock.Manual, m *Mem, d time.Duration, out *[]delivery) {
	target := clk.Now() + d
	rx := func(pkt []byte, flow uint32) {
		*out = append(*out, delivery{clk.Now(), binary.BigEndian.Uint32(pkt), flow, bytes.Clone(pkt)})
	}
	for {
		due, ok := m.NextDue()
		if !ok || due > target {
			break
		}
		clk.Set(due)
		m.Poll(rx)
	}
	clk.Set(target)
	m.Poll(rx)
}

// drain advances the clock from one due time to the next until the link is
// empty, recording every delivery.
func drain(clk *clock.Manual, m *Mem) []delivery {
	var out []delivery
	for {
		m.Poll(func(pkt []byte, flow uint32) {
			out = append(out, delivery{clk.Now(), binary.BigEndian.Uint32(pkt), flow, bytes.Clone(pkt)})
		})
		due, ok := m.NextDue()
		if !ok {
			return out
		}
		clk.Set(due)
	}
}

func TestMemPerfectLinkDeliversInOrderAfterDelay(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: 5 * time.Microsecond})
	buf := make([]byte, 64)
	var got []delivery
	for i := uint32(0); i < 10; i++ {
		binary.BigEndian.PutUint32(buf, i)
		m.Send(buf, 100+i)
		buf[0] = 0xff // the link copied: reusing the buffer changes nothing
		if i == 0 {
			if due, ok := m.NextDue(); !ok || due != 5*time.Microsecond {
				t.Fatalf("NextDue = %v, %v", due, ok)
			}
		}
		advance(clk, m, time.Microsecond, &got)
	}
	got = append(got, drain(clk, m)...)
	if len(got) != 10 {
		t.Fatalf("delivered %d", len(got))
	}
	for i, d := range got {
		if d.seq != uint32(i) || d.flow != 100+uint32(i) || d.at != time.Duration(i+5)*time.Microsecond || d.pkt[0] == 0xff {
			t.Errorf("delivery %d: %+v", i, d)
		}
	}
	if m.Stats.Sent.Load() != 10 || m.Stats.Delivered.Load() != 10 || len(m.Stats.Set().NonZero()) != 2 {
		t.Errorf("counters %v", m.Stats.Set().Snapshot())
	}
}

func TestMemPollDeliversOnlyDuePackets(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: 10 * time.Microsecond})
	m.Send(numbered(1, 8), 0)
	clk.Advance(9 * time.Microsecond)
	if n := m.Poll(func([]byte, uint32) { t.Error("early delivery") }); n != 0 {
		t.Error("Poll before due")
	}
	clk.Advance(time.Microsecond)
	if n := m.Poll(func([]byte, uint32) {}); n != 1 {
		t.Error("Poll at due")
	}
	if _, ok := m.NextDue(); ok || m.Len() != 0 {
		t.Error("link not empty")
	}
}

// TestMemSerialization: at 8 Mb/s a 1000-byte packet takes 1 ms on the
// wire; back-to-back packets queue behind each other.
func TestMemSerialization(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: 100 * time.Microsecond, RateBitsPerSec: 8_000_000})
	for i := uint32(0); i < 3; i++ {
		m.Send(numbered(i, 1000), 0)
	}
	var got []delivery
	advance(clk, m, 10*time.Millisecond, &got)
	m.Send(numbered(3, 500), 0) // link idle again: starts now
	got = append(got, drain(clk, m)...)
	want := []time.Duration{1100 * time.Microsecond, 2100 * time.Microsecond, 3100 * time.Microsecond, 10600 * time.Microsecond}
	for i, d := range got {
		if d.at != want[i] {
			t.Errorf("packet %d delivered at %v, want %v", i, d.at, want[i])
		}
	}
}

// A priority packet waits only for the packet on the wire, not for the
// queue behind it; the queue leaves its serialization later.
func TestMemPriorityJumpsTheQueue(t *testing.T) {
	clk := clock.NewManual(0)
	small := func(p []byte) bool { return len(p) < 100 }
	m := NewMem(clk, MemConfig{RateBitsPerSec: 8_000_000, Priority: small}) // 1 µs per byte
	for i := uint32(0); i < 3; i++ {
		m.Send(numbered(i, 1000), 0) // ends at 1, 2, 3 ms
	}
	clk.Set(500 * time.Microsecond)
	m.Send(numbered(9, 10), 0) // behind packet 0 only: 1 ms + 10 µs
	m.Send(numbered(4, 1000), 0)
	got := drain(clk, m)
	want := map[uint32]time.Duration{0: time.Millisecond, 9: 1010 * time.Microsecond, 1: 2 * time.Millisecond,
		2: 3 * time.Millisecond, 4: 4010 * time.Microsecond}
	if len(got) != len(want) {
		t.Fatalf("delivered %d packets, want %d", len(got), len(want))
	}
	for _, d := range got {
		if d.at != want[d.seq] {
			t.Errorf("packet %d at %v, want %v", d.seq, d.at, want[d.seq])
		}
	}
	// An idle link: the priority packet starts at once.
	clk.Set(10 * time.Millisecond)
	m.Send(numbered(5, 10), 0)
	if got := drain(clk, m); len(got) != 1 || got[0].at != 10010*time.Microsecond {
		t.Errorf("on an idle link: %+v", got)
	}
}

// within checks an observed count against n·p with a generous ±6σ bound.
func within(t *testing.T, what string, got uint64, n int, p float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	if math.Abs(float64(got)-mean) > 6*sd+1 {
		t.Errorf("%s: %d of %d, expected about %.0f", what, got, n, mean)
	}
}

const statN = 20000

// sendMany sends n numbered packets 100 ns apart and returns what the link
// delivered meanwhile and afterwards.
func sendMany(m *Mem, clk *clock.Manual, n int) []delivery {
	var got []delivery
	for i := 0; i < n; i++ {
		m.Send(numbered(uint32(i), 64), uint32(i%4))
		advance(clk, m, 100*time.Nanosecond, &got)
	}
	return append(got, drain(clk, m)...)
}

func TestMemRandomDrop(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: time.Microsecond, DropProb: 0.1, Seed: 1})
	got := sendMany(m, clk, statN)
	dropped := m.Stats.DroppedRandom.Load()
	within(t, "dropped", dropped, statN, 0.1)
	if uint64(len(got))+dropped != statN || m.Stats.Delivered.Load() != uint64(len(got)) {
		t.Errorf("delivered %d + dropped %d != %d", len(got), dropped, statN)
	}
	for i := 1; i < len(got); i++ {
		if got[i].seq <= got[i-1].seq {
			t.Fatal("drop must not reorder")
		}
	}
}

func TestMemReorder(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: time.Microsecond, ReorderProb: 0.05, ReorderDelay: 2 * time.Microsecond, Seed: 2})
	got := sendMany(m, clk, statN)
	if len(got) != statN {
		t.Fatalf("reorder lost packets: %d", len(got))
	}
	within(t, "reordered", m.Stats.Reordered.Load(), statN, 0.05)
	// Every held-back packet is overtaken by the ~20 sent during its hold.
	overtaken := 0
	maxSeen := uint32(0)
	for i, d := range got {
		if i > 0 && d.seq < maxSeen {
			overtaken++
		}
		maxSeen = max(maxSeen, d.seq)
	}
	if overtaken < int(m.Stats.Reordered.Load())/2 {
		t.Errorf("only %d packets arrived behind later ones (%d reordered)", overtaken, m.Stats.Reordered.Load())
	}
}

func TestMemDuplicate(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{DupProb: 0.1, Seed: 3})
	got := sendMany(m, clk, statN)
	dups := m.Stats.Duplicated.Load()
	within(t, "duplicated", dups, statN, 0.1)
	if uint64(len(got)) != statN+dups {
		t.Errorf("delivered %d, want %d", len(got), statN+dups)
	}
	seen := map[uint32]int{}
	for _, d := range got {
		seen[d.seq]++
	}
	twice := 0
	for _, c := range seen {
		if c == 2 {
			twice++
		}
	}
	if len(seen) != statN || uint64(twice) != dups {
		t.Errorf("%d distinct, %d twice, %d dups", len(seen), twice, dups)
	}
}

// TestMemCorruptionIsCaughtByICV: the link flips one bit in a copy; the
// receiver's ICV check rejects exactly the corrupted copies.
func TestMemCorruptionIsCaughtByICV(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{CorruptProb: 0.05, Seed: 4})
	buf := make([]byte, 0, 128)
	for i := 0; i < statN; i++ {
		p := wire.AppendPushData(buf[:0], &wire.TxnFields{PSN: wire.PSN(i)}, []byte("payload"))
		m.Send(wire.SealICV(p), 0)
	}
	bad, good := 0, 0
	m.Poll(func(pkt []byte, flow uint32) {
		body, ok := wire.OpenICV(pkt)
		if !ok {
			bad++
			return
		}
		if _, err := wire.Parse(body); err != nil {
			t.Fatalf("ICV passed but Parse failed: %v", err)
		}
		good++
	})
	within(t, "corrupted", m.Stats.Corrupted.Load(), statN, 0.05)
	if uint64(bad) != m.Stats.Corrupted.Load() || good+bad != statN {
		t.Errorf("ICV rejected %d, link corrupted %d", bad, m.Stats.Corrupted.Load())
	}
}

func TestMemQueueLimitTailDrops(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: time.Millisecond, QueueLimit: 4})
	for i := uint32(0); i < 10; i++ {
		m.Send(numbered(i, 16), 0)
	}
	if m.Len() != 4 || m.Stats.DroppedQueueFull.Load() != 6 {
		t.Fatalf("held %d, tail-dropped %d", m.Len(), m.Stats.DroppedQueueFull.Load())
	}
	got := drain(clk, m)
	for i, d := range got {
		if d.seq != uint32(i) {
			t.Errorf("kept packet %d is %d, want the first four", i, d.seq)
		}
	}
	m.Send(numbered(42, 16), 0) // room again
	if m.Len() != 1 {
		t.Error("queue did not free")
	}
}

func transcript(seed int64) string {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: time.Microsecond, RateBitsPerSec: 1e9, DropProb: 0.1, ReorderProb: 0.1, DupProb: 0.1, CorruptProb: 0.1, Seed: seed, QueueLimit: 50})
	var sb strings.Builder
	for _, d := range sendMany(m, clk, 300) {
		fmt.Fprintf(&sb, "%v %d %d %x\n", d.at, d.seq, d.flow, d.pkt)
	}
	return sb.String()
}

func TestMemIsDeterministicPerSeed(t *testing.T) {
	a, b, c := transcript(7), transcript(7), transcript(8)
	if a != b {
		t.Error("same seed, different transcript")
	}
	if a == c {
		t.Error("different seeds, same transcript")
	}
}

func TestMemReceiverMaySend(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{})
	m.Send(numbered(1, 8), 0)
	var order []uint32
	rx := func(pkt []byte, flow uint32) {
		s := binary.BigEndian.Uint32(pkt)
		order = append(order, s)
		if s < 3 {
			m.Send(numbered(s+1, 8), 0) // echo on the same link
		}
	}
	if n := m.Poll(rx); n != 1 {
		t.Errorf("first Poll delivered %d, want 1 (packets sent during Poll wait)", n)
	}
	m.Poll(rx)
	m.Poll(rx)
	if fmt.Sprint(order) != "[1 2 3]" {
		t.Errorf("order %v", order)
	}
}

func TestMemPair(t *testing.T) {
	clk := clock.NewManual(0)
	ab, ba := NewMemPair(clk, MemConfig{Delay: time.Microsecond}, MemConfig{Delay: 3 * time.Microsecond})
	ab.Send([]byte("ping"), 1)
	clk.Advance(time.Microsecond)
	ab.Poll(func(pkt []byte, flow uint32) { ba.Send([]byte("pong"), flow) })
	if due, _ := ba.NextDue(); due != 4*time.Microsecond {
		t.Errorf("pong due at %v", due)
	}
	clk.Advance(3 * time.Microsecond)
	var got string
	ba.Poll(func(pkt []byte, flow uint32) { got = string(pkt) })
	if got != "pong" {
		t.Errorf("got %q", got)
	}
}

// TestMemSteadyStateDoesNotAllocate: once buffers exist, Send+Poll reuse them.
func TestMemSteadyStateDoesNotAllocate(t *testing.T) {
	clk := clock.NewManual(0)
	m := NewMem(clk, MemConfig{Delay: time.Microsecond, RateBitsPerSec: 100e9, DropProb: 0.01, ReorderProb: 0.01, DupProb: 0.01, CorruptProb: 0.01, Seed: 9})
	pkt := make([]byte, 4096)
	rx := func([]byte, uint32) {}
	step := func() {
		for i := 0; i < 8; i++ {
			m.Send(pkt, uint32(i))
		}
		clk.Advance(20 * time.Microsecond)
		m.Poll(rx)
	}
	for i := 0; i < 100; i++ {
		step()
	}
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("Send+Poll allocates %v per run", a)
	}
}

func TestFuncAndDiscard(t *testing.T) {
	var got uint32
	var l Link = Func(func(pkt []byte, flow uint32) { got = flow })
	l.Send(nil, 9)
	Discard.Send([]byte{1}, 1)
	if got != 9 {
		t.Error("Func did not forward")
	}
}
