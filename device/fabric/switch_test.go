package fabric

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"falconnic/device/l2"
	"falconnic/internal/clock"
)

// frameRecorder is a l2.Sink that keeps a copy of every frame it gets.
type frameRecorder struct {
	mu     sync.Mutex
	frames [][]byte
}

func (r *frameRecorder) Deliver(frame []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, append([]byte(nil), frame...))
}

func (r *frameRecorder) take() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.frames
	r.frames = nil
	return f
}

func testMAC(last byte) ethAddr { return ethAddr{0x52, 0x54, 0, 0, 0, last} }

var bcastMAC = ethAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// frame builds an Ethernet frame dst ← src of EtherType typ with a payload of
// n bytes (IPv4 by default).
func testFrame(dst, src ethAddr, typ uint16, n int) []byte {
	f := make([]byte, ethHeaderLen+n)
	copy(f[0:], dst[:])
	copy(f[6:], src[:])
	binary.BigEndian.PutUint16(f[12:], typ)
	for i := range n {
		f[ethHeaderLen+i] = byte(i)
	}
	return f
}

type switchRig struct {
	clk   *clock.Manual
	sw    *Switch
	ports []*SwitchPort
	recs  []*frameRecorder
}

func newSwitchRig(t *testing.T, n int) *switchRig {
	t.Helper()
	r := &switchRig{clk: clock.NewManual(0)}
	r.sw = NewSwitch(SwitchOptions{Clock: r.clk, MACAge: 10 * time.Second})
	for i := range n {
		p := r.sw.AddPort(string(rune('a' + i)))
		rec := &frameRecorder{}
		p.Connect(rec)
		r.ports = append(r.ports, p)
		r.recs = append(r.recs, rec)
	}
	return r
}

// got returns how many frames each port received since the last call.
func (r *switchRig) got() []int {
	out := make([]int, len(r.recs))
	for i, rec := range r.recs {
		out[i] = len(rec.take())
	}
	return out
}

func eqInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (r *switchRig) expect(t *testing.T, what string, want ...int) {
	t.Helper()
	if got := r.got(); !eqInts(got, want) {
		t.Errorf("%s: frames per port = %v, want %v", what, got, want)
	}
}

func TestSwitchFloodsBroadcastToAllOtherPorts(t *testing.T) {
	r := newSwitchRig(t, 3)
	r.ports[0].Deliver(testFrame(bcastMAC, testMAC(1), 0x0806, 28))
	r.expect(t, "bcastMAC from a", 0, 1, 1)
	if got := r.sw.c.Flooded.Load(); got != 1 {
		t.Errorf("Flooded = %d, want 1", got)
	}
}

func TestSwitchFloodsMulticastAndUnknownUnicast(t *testing.T) {
	r := newSwitchRig(t, 3)
	multicast := ethAddr{0x01, 0x00, 0x5e, 0, 0, 1}
	r.ports[1].Deliver(testFrame(multicast, testMAC(2), 0x0800, 20))
	r.expect(t, "multicast from b", 1, 0, 1)
	r.ports[1].Deliver(testFrame(testMAC(9), testMAC(2), 0x0800, 20))
	r.expect(t, "unknown unicast from b", 1, 0, 1)
}

func TestSwitchForwardsLearnedUnicastToOnePort(t *testing.T) {
	r := newSwitchRig(t, 3)
	r.ports[2].Deliver(testFrame(bcastMAC, testMAC(3), 0x0806, 28)) // c announces mac 3
	r.got()
	r.ports[0].Deliver(testFrame(testMAC(3), testMAC(1), 0x0800, 64))
	r.expect(t, "unicast a→mac3", 0, 0, 1)
	r.ports[2].Deliver(testFrame(testMAC(1), testMAC(3), 0x0800, 64))
	r.expect(t, "reply c→mac1 (learned from the unicast)", 1, 0, 0)
	if got := r.sw.c.Forwarded.Load(); got != 2 {
		t.Errorf("Forwarded = %d, want 2", got)
	}
	want := []byte(testFrame(testMAC(1), testMAC(3), 0x0800, 64))
	r.ports[2].Deliver(want)
	if f := r.recs[0].take(); len(f) != 1 || !bytes.Equal(f[0], want) {
		t.Errorf("forwarded frame changed: %x", f)
	}
}

func TestSwitchNeverSendsBackToIngress(t *testing.T) {
	r := newSwitchRig(t, 2)
	r.ports[0].Deliver(testFrame(bcastMAC, testMAC(1), 0x0806, 28))
	r.ports[0].Deliver(testFrame(bcastMAC, testMAC(2), 0x0806, 28)) // mac 2 also behind a
	r.got()
	r.ports[0].Deliver(testFrame(testMAC(2), testMAC(1), 0x0800, 20))
	r.expect(t, "unicast to a station on the ingress port", 0, 0)
	if got := r.ports[0].c.RxFiltered.Load(); got != 1 {
		t.Errorf("RxFiltered = %d, want 1", got)
	}
}

func TestSwitchAgesOutLearnedAddresses(t *testing.T) {
	r := newSwitchRig(t, 3)
	r.ports[2].Deliver(testFrame(bcastMAC, testMAC(3), 0x0806, 28))
	r.got()
	r.clk.Advance(10 * time.Second) // exactly the age: still valid
	r.ports[0].Deliver(testFrame(testMAC(3), testMAC(1), 0x0800, 20))
	r.expect(t, "at the age limit", 0, 0, 1)
	r.clk.Advance(10*time.Second + 1) // mac 3 silent for longer than the age
	r.ports[0].Deliver(testFrame(testMAC(3), testMAC(1), 0x0800, 20))
	r.expect(t, "after aging", 0, 1, 1)
	if n := r.sw.Sweep(); n != 1 {
		t.Errorf("Sweep removed %d, want 1 (mac 3; mac 1 is fresh)", n)
	}
	if got := r.sw.c.Aged.Load(); got != 1 {
		t.Errorf("MACAged = %d, want 1", got)
	}
}

func TestSwitchRefreshesOnTraffic(t *testing.T) {
	r := newSwitchRig(t, 2)
	for range 5 {
		r.ports[1].Deliver(testFrame(bcastMAC, testMAC(2), 0x0806, 28))
		r.clk.Advance(6 * time.Second)
	}
	r.got()
	r.ports[0].Deliver(testFrame(testMAC(2), testMAC(1), 0x0800, 20))
	if got := r.sw.c.Forwarded.Load(); got != 1 {
		t.Errorf("Forwarded = %d, want 1: a station that keeps talking never ages out", got)
	}
}

func TestSwitchLearnsStationMove(t *testing.T) {
	r := newSwitchRig(t, 3)
	r.ports[1].Deliver(testFrame(bcastMAC, testMAC(5), 0x0806, 28))
	r.ports[2].Deliver(testFrame(bcastMAC, testMAC(5), 0x0806, 28))
	r.got()
	r.ports[0].Deliver(testFrame(testMAC(5), testMAC(1), 0x0800, 20))
	r.expect(t, "after the move", 0, 0, 1)
	if got := r.sw.c.Moved.Load(); got != 1 {
		t.Errorf("MACMoved = %d, want 1", got)
	}
}

func TestSwitchDropsControlFrames(t *testing.T) {
	r := newSwitchRig(t, 2)
	r.ports[1].Deliver(testFrame(bcastMAC, testMAC(2), 0x0806, 28)) // learn mac 2
	r.got()
	plain := testFrame(testMAC(2), testMAC(1), l2.EtherTypeControl, 32)
	tagged := testFrame(testMAC(2), testMAC(1), etherVLAN, 36)
	binary.BigEndian.PutUint16(tagged[16:], l2.EtherTypeControl)
	qinq := testFrame(bcastMAC, testMAC(1), etherQinQ, 40)
	binary.BigEndian.PutUint16(qinq[16:], etherVLAN)
	binary.BigEndian.PutUint16(qinq[20:], l2.EtherTypeControl)
	for _, f := range [][]byte{plain, tagged, qinq} {
		r.ports[0].Deliver(f)
	}
	r.expect(t, "control frames", 0, 0)
	if got := r.ports[0].c.RxControl.Load(); got != 3 {
		t.Errorf("RxControl = %d, want 3", got)
	}
	if r.sw.macs.lookup(testMAC(1), r.clk.Now()) != nil {
		t.Error("a dropped control frame taught the switch its source address")
	}
}

func TestSwitchDropsMalformedFrames(t *testing.T) {
	r := newSwitchRig(t, 2)
	r.sw = NewSwitch(SwitchOptions{Clock: r.clk, MaxFrame: 1514})
	a, b := r.sw.AddPort("a"), r.sw.AddPort("b")
	a.Connect(r.recs[0])
	b.Connect(r.recs[1])
	a.Deliver(testFrame(bcastMAC, testMAC(1), 0x0800, 0)[:13])
	a.Deliver(nil)
	a.Deliver(testFrame(bcastMAC, testMAC(1), 0x0800, 1501))
	a.Deliver(testFrame(bcastMAC, bcastMAC, 0x0800, 20))
	r.expect(t, "malformed", 0, 0)
	for _, c := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"rx_runt", a.c.RxRunt.Load(), 2},
		{"rx_too_big", a.c.RxTooBig.Load(), 1},
		{"rx_group_source", a.c.RxGroupSource.Load(), 1},
		{"rx_frames", a.c.RxFrames.Load(), 4},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	// The shortest legal frame (header only) is forwarded.
	a.Deliver(testFrame(bcastMAC, testMAC(1), 0x0800, 0))
	r.expect(t, "header-only frame", 0, 1)
}

func TestSwitchRemovePortForgetsItsAddresses(t *testing.T) {
	r := newSwitchRig(t, 3)
	r.ports[2].Deliver(testFrame(bcastMAC, testMAC(3), 0x0806, 28))
	r.got()
	r.sw.RemovePort(r.ports[2])
	r.ports[0].Deliver(testFrame(testMAC(3), testMAC(1), 0x0800, 20))
	r.expect(t, "to an address of a removed port", 0, 1, 0)
	r.ports[2].Deliver(testFrame(bcastMAC, testMAC(3), 0x0806, 28))
	r.expect(t, "from a removed port", 0, 0, 0)
	if got := r.ports[2].c.RxPortRemoved.Load(); got != 1 {
		t.Errorf("RxPortRemoved = %d, want 1", got)
	}
	if got := len(r.sw.Status().Ports); got != 2 {
		t.Errorf("status lists %d ports, want 2", got)
	}
}

func TestSwitchCountsUnconnectedEgress(t *testing.T) {
	r := newSwitchRig(t, 2)
	idle := r.sw.AddPort("idle")
	r.ports[0].Deliver(testFrame(bcastMAC, testMAC(1), 0x0806, 28))
	r.expect(t, "bcastMAC", 0, 1)
	if got := idle.c.TxNotConnected.Load(); got != 1 {
		t.Errorf("TxNotConnected = %d, want 1", got)
	}
}

func TestSwitchTableFull(t *testing.T) {
	clk := clock.NewManual(0)
	sw := NewSwitch(SwitchOptions{Clock: clk, MaxMACs: 2, MACAge: time.Second})
	a := sw.AddPort("a")
	for i := range 3 {
		a.Deliver(testFrame(bcastMAC, testMAC(byte(i+1)), 0x0806, 28))
	}
	if got := sw.c.TableFull.Load(); got != 1 {
		t.Errorf("MACTableFull = %d, want 1", got)
	}
	clk.Advance(2 * time.Second)
	a.Deliver(testFrame(bcastMAC, testMAC(7), 0x0806, 28)) // full of stale entries: they make room
	if got, want := sw.macs.len(), 1; got != want {
		t.Errorf("table holds %d entries, want %d", got, want)
	}
}

func TestSwitchStatusCounters(t *testing.T) {
	r := newSwitchRig(t, 2)
	r.ports[0].Deliver(testFrame(bcastMAC, testMAC(1), 0x0806, 28))
	st := r.sw.Status()
	if len(st.MACs) != 1 || st.MACs[0].MAC != "52:54:00:00:00:01" || st.MACs[0].Port != "a" {
		t.Errorf("MACs = %+v", st.MACs)
	}
	if st.Ports[0].Counters["rx_bytes"] != 42 || st.Ports[1].Counters["tx_frames"] != 1 {
		t.Errorf("port counters = %+v", st.Ports)
	}
	for _, set := range []interface{ Snapshot() map[string]uint64 }{r.sw.Counters(), r.ports[0].Counters()} {
		for name := range set.Snapshot() {
			if name == "" {
				t.Error("counter without a name")
			}
		}
	}
}

// countingSink is a sink that keeps nothing.
type countingSink struct{ n int }

func (d *countingSink) Deliver(frame []byte) { d.n++ }

func BenchmarkSwitchForward(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			sw := NewSwitch(SwitchOptions{})
			var sinks [4]countingSink
			var ports [4]*SwitchPort
			for i := range ports {
				ports[i] = sw.AddPort("p")
				ports[i].Connect(&sinks[i])
				ports[i].Deliver(testFrame(bcastMAC, testMAC(byte(i+1)), 0x0806, 28))
			}
			f := testFrame(testMAC(2), testMAC(1), 0x0800, size-ethHeaderLen)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for b.Loop() {
				ports[0].Deliver(f)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
			if sinks[1].n < b.N {
				b.Fatalf("delivered %d of %d", sinks[1].n, b.N)
			}
		})
	}
}

func TestSwitchForwardingDoesNotAllocate(t *testing.T) {
	sw := NewSwitch(SwitchOptions{Clock: clock.NewManual(0)})
	var sinks [3]countingSink
	var ports [3]*SwitchPort
	for i := range ports {
		ports[i] = sw.AddPort("p")
		ports[i].Connect(&sinks[i])
		ports[i].Deliver(testFrame(bcastMAC, testMAC(byte(i+1)), 0x0806, 28))
	}
	unicast := testFrame(testMAC(2), testMAC(1), 0x0800, 100)
	flood := testFrame(bcastMAC, testMAC(1), 0x0800, 100)
	if n := testing.AllocsPerRun(1000, func() { ports[0].Deliver(unicast); ports[0].Deliver(flood) }); n != 0 {
		t.Errorf("%v allocations per forwarded frame pair, want 0", n)
	}
}

// FuzzSwitchDeliver feeds arbitrary guest frames to a switch: it must never
// panic, never send a frame back to its ingress port, never forward a
// control-channel frame, and forward frames unchanged.
func FuzzSwitchDeliver(f *testing.F) {
	f.Add([]byte(testFrame(bcastMAC, testMAC(1), 0x0806, 28)), uint8(0))
	f.Add([]byte(testFrame(testMAC(2), testMAC(1), l2.EtherTypeControl, 10)), uint8(1))
	f.Add([]byte(testFrame(testMAC(2), testMAC(1), etherVLAN, 10)), uint8(2))
	f.Add([]byte{1, 2, 3}, uint8(0))
	f.Fuzz(func(t *testing.T, fr []byte, in uint8) {
		r := newSwitchRig(t, 3)
		r.ports[1].Deliver(testFrame(bcastMAC, testMAC(2), 0x0806, 28)) // some learned state
		r.got()
		ingress := int(in) % 3
		r.ports[ingress].Deliver(fr)
		for i, rec := range r.recs {
			for _, got := range rec.take() {
				switch {
				case i == ingress:
					t.Fatalf("frame sent back to ingress port %d", i)
				case isControlFrame(got):
					t.Fatal("control frame forwarded")
				case !bytes.Equal(got, fr):
					t.Fatal("frame changed in the switch")
				}
			}
		}
	})
}

func TestSwitchFullTableSweepsAtMostOncePerEighthOfTheAge(t *testing.T) {
	clk := clock.NewManual(0)
	sw := NewSwitch(SwitchOptions{Clock: clk, MaxMACs: 2, MACAge: 8 * time.Second})
	a := sw.AddPort("a")
	a.Deliver(testFrame(bcastMAC, testMAC(1), 0x0806, 28))
	clk.Set(7500 * time.Millisecond)
	a.Deliver(testFrame(bcastMAC, testMAC(2), 0x0806, 28))
	a.Deliver(testFrame(bcastMAC, testMAC(3), 0x0806, 28)) // full, nothing stale: sweeps at 7.5 s, learns nothing
	clk.Set(8200 * time.Millisecond)                       // mac 1 is stale now
	a.Deliver(testFrame(bcastMAC, testMAC(4), 0x0806, 28)) // within age/8 of the last sweep: no sweep
	if got := sw.c.TableFull.Load(); got != 2 {
		t.Errorf("MACTableFull = %d, want 2", got)
	}
	clk.Set(8600 * time.Millisecond)
	a.Deliver(testFrame(bcastMAC, testMAC(5), 0x0806, 28)) // sweep allowed again: mac 1 goes, mac 5 in
	if sw.macs.lookup(testMAC(5), clk.Now()) != a || sw.c.Aged.Load() != 1 {
		t.Errorf("mac 5 not learned after the sweep (aged %d)", sw.c.Aged.Load())
	}
}

func TestSwitchLockedPortAcceptsOnlyItsMAC(t *testing.T) {
	r := newSwitchRig(t, 3)
	if err := r.ports[0].LockSource(net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}); err != nil {
		t.Fatal(err)
	}
	// Traffic to the locked MAC goes to its port before it has said a word.
	r.ports[1].Deliver(testFrame(testMAC(1), testMAC(2), 0x0800, 20))
	r.expect(t, "to the pinned MAC", 1, 0, 0)
	r.ports[0].Deliver(testFrame(bcastMAC, testMAC(9), 0x0800, 20))
	r.expect(t, "spoofed source on the locked port", 0, 0, 0)
	r.ports[2].Deliver(testFrame(bcastMAC, testMAC(1), 0x0800, 20))
	r.expect(t, "another port claiming the pinned MAC", 0, 0, 0)
	if r.ports[0].c.RxSpoofed.Load() != 1 || r.ports[2].c.RxPinnedSource.Load() != 1 {
		t.Errorf("RxSpoofed %d, RxPinnedSource %d", r.ports[0].c.RxSpoofed.Load(), r.ports[2].c.RxPinnedSource.Load())
	}
	r.clk.Advance(time.Hour) // pinned entries never age
	r.sw.Sweep()
	r.ports[1].Deliver(testFrame(testMAC(1), testMAC(2), 0x0800, 20))
	r.expect(t, "to the pinned MAC an hour later", 1, 0, 0)
	if st := r.sw.Status(); !st.MACs[0].Static || st.MACs[0].Port != "a" {
		t.Errorf("status MACs %+v", st.MACs)
	}
	if err := r.ports[1].LockSource(net.HardwareAddr{1, 0, 0, 0, 0, 1}); err == nil {
		t.Error("locked a port to a multicast address")
	}
	r.sw.RemovePort(r.ports[0])
	r.ports[2].Deliver(testFrame(bcastMAC, testMAC(1), 0x0800, 20))
	r.expect(t, "the MAC is free once its port is gone", 0, 1, 0)
}
