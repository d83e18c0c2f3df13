package fabric

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"falconnic/device/l2"
	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// waitBound is the generous bound a loopback test waits for a datagram that
// must arrive. Tests never sleep; they wait for the event itself.
const waitBound = 10 * time.Second

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// inbox is a l2.Sink and Receiver that hands copies to a channel.
type inbox struct{ ch chan inboxItem }

type inboxItem struct {
	from netip.AddrPort
	flow uint32
	b    []byte
}

func newInbox() *inbox { return &inbox{ch: make(chan inboxItem, 1024)} }

func (in *inbox) Deliver(frame []byte) {
	in.ch <- inboxItem{b: append([]byte(nil), frame...)}
}

func (in *inbox) ReceiveFabric(from netip.AddrPort, flow uint32, payload []byte) {
	in.ch <- inboxItem{from: from, flow: flow, b: append([]byte(nil), payload...)}
}

func (in *inbox) next(t *testing.T, what string) inboxItem {
	t.Helper()
	select {
	case it := <-in.ch:
		return it
	case <-time.After(waitBound):
		t.Fatalf("%s: nothing arrived within %v", what, waitBound)
		return inboxItem{}
	}
}

// none checks that nothing is queued now (callers first wait for a later
// datagram on the same path, so an unwanted one would already be here).
func (in *inbox) none(t *testing.T, what string) {
	t.Helper()
	select {
	case it := <-in.ch:
		t.Errorf("%s: unexpected % x", what, it.b)
	default:
	}
}

// node is one daemon's datapath: a switch, a NIC-like port and a fabric.
type node struct {
	sw  *Switch
	nic *SwitchPort
	in  *inbox
	fab *Fabric
}

func newNode(t *testing.T, opts Options) *node {
	t.Helper()
	if !opts.Listen.IsValid() {
		opts.Listen = loopback
	}
	fab, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{sw: NewSwitch(SwitchOptions{Clock: opts.Clock}), in: newInbox(), fab: fab}
	n.nic = n.sw.AddPort("nic")
	n.nic.Connect(n.in)
	up := n.sw.AddPort("fabric")
	up.Connect(fab)
	fab.SetFrameSink(up)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fab.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fabric Run: %v", err)
		}
	})
	return n
}

func mesh(t *testing.T, nodes ...*node) {
	t.Helper()
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				if err := a.fab.AddPeer(b.fab.LocalAddr()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func TestFabricCarriesFramesBetweenDaemons(t *testing.T) {
	a, b, c := newNode(t, Options{}), newNode(t, Options{}), newNode(t, Options{})
	mesh(t, a, b, c)

	arp := testFrame(bcastMAC, testMAC(1), 0x0806, 28)
	a.nic.Deliver(arp)
	if got := b.in.next(t, "broadcast at b").b; !bytes.Equal(got, arp) {
		t.Fatalf("b got % x, want % x", got, arp)
	}
	c.in.next(t, "broadcast at c")

	reply := testFrame(testMAC(1), testMAC(2), 0x0806, 28)
	b.nic.Deliver(reply)
	if got := a.in.next(t, "unicast reply at a").b; !bytes.Equal(got, reply) {
		t.Fatalf("a got % x, want % x", got, reply)
	}

	// a has learned that mac 2 lives behind b: unicast goes to b only.
	ip := testFrame(testMAC(2), testMAC(1), 0x0800, 1400)
	a.nic.Deliver(ip)
	if got := b.in.next(t, "unicast at b").b; !bytes.Equal(got, ip) {
		t.Fatalf("b got % x", got)
	}
	if got := a.fab.c.TxFlooded.Load(); got != 1 {
		t.Errorf("a flooded %d frames, want 1 (the first broadcast only)", got)
	}
	// c's fabric port never sends a frame it got from the fabric back into it.
	if got := c.fab.c.TxDatagrams.Load(); got != 0 {
		t.Errorf("c sent %d datagrams, want 0 (split horizon)", got)
	}
	c.in.none(t, "c after unicast")
	st := a.fab.Status()
	for _, p := range st.Peers {
		if heard := p.LastRx != nil; heard != (p.Addr == b.fab.LocalAddr().String()) {
			t.Errorf("peer %s: heard=%v; a has heard from b only", p.Addr, heard)
		}
	}
	if len(st.MACs) != 1 || st.MACs[0].MAC != "52:54:00:00:00:02" || st.MACs[0].Port != b.fab.LocalAddr().String() {
		t.Errorf("a's fabric MACs = %+v", st.MACs)
	}
}

func TestFabricNeverCarriesControlFrames(t *testing.T) {
	a, b := newNode(t, Options{}), newNode(t, Options{})
	mesh(t, a, b)
	ctl := testFrame(bcastMAC, testMAC(1), l2.EtherTypeControl, 30)
	a.fab.Deliver(ctl) // bypassing a's switch, which would drop it too
	if got := a.fab.c.TxControl.Load(); got != 1 {
		t.Errorf("TxControl = %d, want 1", got)
	}
	// A peer that sends one anyway is dropped at the receiver.
	raw, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(b.fab.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	b.fab.AddPeer(raw.LocalAddr().(*net.UDPAddr).AddrPort())
	raw.Write(fabricDatagram(KindEthernet, 0, ctl))
	marker := testFrame(bcastMAC, testMAC(3), 0x0800, 20)
	raw.Write(fabricDatagram(KindEthernet, 0, marker))
	if got := b.in.next(t, "marker").b; !bytes.Equal(got, marker) {
		t.Fatalf("b got % x, want the marker", got)
	}
	if got := b.fab.drops[dropControl].Load(); got != 1 {
		t.Errorf("RxControl = %d, want 1", got)
	}
}

func TestFabricCountsBadDatagrams(t *testing.T) {
	b := newNode(t, Options{})
	peer, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(b.fab.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	stranger, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(b.fab.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	b.fab.AddPeer(peer.LocalAddr().(*net.UDPAddr).AddrPort())

	good := fabricDatagram(KindEthernet, 1, testFrame(bcastMAC, testMAC(1), 0x0800, 20))
	stranger.Write(good)
	for _, bad := range [][]byte{
		{1, 2, 3},
		append([]byte{0xde, 0xad}, good[2:]...),
		append(append([]byte(nil), good[:2]...), append([]byte{9}, good[3:]...)...),
		good[:len(good)-2],
		fabricDatagram(KindFalcon, 0, []byte{1}), // no Falcon receiver yet
	} {
		peer.Write(bad)
	}
	peer.Write(good)
	b.in.next(t, "good datagram after the bad ones")
	// Loopback queues datagrams at the receiving socket in send order, so
	// everything sent before the good datagram has been handled by now.
	for name, want := range map[string]uint64{
		"rx_unknown_peer": 1, "rx_short": 1, "rx_bad_magic": 1, "rx_bad_version": 1, "rx_bad_length": 1, "rx_no_receiver": 1, "rx_delivered": 1,
	} {
		if got := b.fab.Counters().Snapshot()[name]; got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	b.in.none(t, "after the stranger's datagram")
}

func TestFabricDropsUnknownPeers(t *testing.T) {
	f, err := New(Options{Listen: loopback, Paths: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := newInbox()
	f.SetFrameSink(in)
	peer := netip.MustParseAddrPort("192.0.2.1:7000")
	f.AddPeer(peer)
	good := fabricDatagram(KindEthernet, 1, testFrame(bcastMAC, testMAC(1), 0x0800, 20))
	for _, src := range []string{"192.0.2.1:6999", "192.0.2.1:7002", "192.0.2.2:7000", "[2001:db8::1]:7000"} {
		f.receive(netip.MustParseAddrPort(src), good)
	}
	if got := f.drops[dropUnknownPeer].Load(); got != 4 {
		t.Errorf("RxUnknownPeer = %d, want 4", got)
	}
	for _, src := range []string{"192.0.2.1:7000", "192.0.2.1:7001", "[::ffff:192.0.2.1]:7001"} {
		f.receive(netip.MustParseAddrPort(src), good)
	}
	if got := len(in.ch); got != 3 {
		t.Errorf("delivered %d from the peer's path ports, want 3", got)
	}
}

func TestFabricFlowLabelPicksSourcePort(t *testing.T) {
	raw, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	f, err := New(Options{Listen: loopback, Paths: 4, Peers: []netip.AddrPort{raw.LocalAddr().(*net.UDPAddr).AddrPort()}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	link := f.Link(raw.LocalAddr().(*net.UDPAddr).AddrPort(), KindFalcon)
	base := f.LocalAddr().Port()
	buf := make([]byte, 2048)
	raw.SetReadDeadline(time.Now().Add(waitBound))
	for flow := uint32(0); flow < 8; flow++ {
		link.Send([]byte{byte(flow)}, flow)
		n, src, err := raw.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		h, payload, ok := Decode(buf[:n])
		if !ok || h.FlowLabel() != flow || h.Kind() != KindFalcon || payload[0] != byte(flow) {
			t.Fatalf("flow %d: got % x", flow, buf[:n])
		}
		if want := base + uint16(flow%4); src.Port() != want {
			t.Errorf("flow %d left from port %d, want %d", flow, src.Port(), want)
		}
	}
}

func TestFabricLinkAndReceiverPerKind(t *testing.T) {
	a, b := newNode(t, Options{Paths: 2}), newNode(t, Options{Paths: 2})
	mesh(t, a, b)
	falcon, cm := newInbox(), newInbox()
	if err := b.fab.Handle(KindFalcon, falcon); err != nil {
		t.Fatal(err)
	}
	if err := b.fab.Handle(KindCM, ReceiverFunc(cm.ReceiveFabric)); err != nil {
		t.Fatal(err)
	}
	if err := b.fab.Handle(KindEthernet, cm); !errors.Is(err, ErrBadKind) {
		t.Errorf("Handle(KindEthernet) = %v, want ErrBadKind", err)
	}
	a.fab.Link(b.fab.LocalAddr(), KindFalcon).Send([]byte("pkt"), 0x00012345)
	a.fab.Link(b.fab.LocalAddr(), KindCM).Send([]byte("hello"), 1)
	it := falcon.next(t, "falcon packet")
	if string(it.b) != "pkt" || it.flow != 0x00012345 || it.from != a.fab.LocalAddr() {
		t.Errorf("falcon receiver got %q flow %#x from %v", it.b, it.flow, it.from)
	}
	if it := cm.next(t, "cm message"); string(it.b) != "hello" || it.from != a.fab.LocalAddr() {
		t.Errorf("cm receiver got %q from %v", it.b, it.from)
	}
}

func TestFabricSendErrors(t *testing.T) {
	f, err := New(Options{Listen: loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stranger := netip.MustParseAddrPort("127.0.0.1:9")
	if err := f.Send(KindFalcon, stranger, 0, []byte{1}); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("send to a stranger: %v", err)
	}
	f.AddPeer(stranger)
	if err := f.Send(KindFalcon, stranger, 0, make([]byte, MaxPayload+1)); !errors.Is(err, ErrTooBig) {
		t.Errorf("oversize send: %v", err)
	}
	if err := f.Send(0, stranger, 0, []byte{1}); !errors.Is(err, ErrBadKind) {
		t.Errorf("kind 0: %v", err)
	}
	f.Deliver([]byte{1, 2, 3})
	snap := f.Counters().Snapshot()
	for _, name := range []string{"tx_no_peer", "tx_too_big", "tx_bad_kind", "tx_runt"} {
		if snap[name] != 1 {
			t.Errorf("%s = %d, want 1", name, snap[name])
		}
	}
	g, err := New(Options{Listen: loopback, Paths: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.AddPeer(netip.MustParseAddrPort("192.0.2.1:7000"))
	for _, bad := range []netip.AddrPort{
		netip.MustParseAddrPort("192.0.2.1:7003"), // sends from 7003..7006: overlaps 7000..7003
		netip.MustParseAddrPort("192.0.2.1:6997"),
		netip.AddrPortFrom(g.LocalAddr().Addr(), g.LocalAddr().Port()+1), // overlaps ourselves
		netip.MustParseAddrPort("192.0.2.1:0"),
	} {
		if err := g.AddPeer(bad); err == nil {
			t.Errorf("AddPeer(%v) accepted", bad)
		}
	}
	if err := g.AddPeer(netip.MustParseAddrPort("192.0.2.1:7004")); err != nil {
		t.Errorf("adjacent port range refused: %v", err)
	}
	if _, err := New(Options{Listen: loopback, Paths: MaxPaths + 1}); err == nil {
		t.Error("accepted too many paths")
	}
	if _, err := New(Options{Listen: loopback, Impair: Impairment{LossPercent: 101}}); err == nil {
		t.Error("accepted 101% loss")
	}
}

// impairRig sends numbered Falcon payloads from a fabric to a raw socket.
type impairRig struct {
	clk *clock.Manual
	f   *Fabric
	raw *net.UDPConn
}

func newImpairRig(t *testing.T, im Impairment) *impairRig {
	t.Helper()
	raw, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	clk := clock.NewManual(0)
	f, err := New(Options{Listen: loopback, Clock: clk, Impair: im,
		Peers: []netip.AddrPort{raw.LocalAddr().(*net.UDPAddr).AddrPort()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &impairRig{clk: clk, f: f, raw: raw}
}

func (r *impairRig) send(seq ...uint32) {
	for _, s := range seq {
		var p [4]byte
		binary.BigEndian.PutUint32(p[:], s)
		r.f.Send(KindFalcon, r.raw.LocalAddr().(*net.UDPAddr).AddrPort(), 0, p[:])
	}
}

func (r *impairRig) recv(t *testing.T, n int) []uint32 {
	t.Helper()
	buf := make([]byte, 2048)
	r.raw.SetReadDeadline(time.Now().Add(waitBound))
	var out []uint32
	for range n {
		m, _, err := r.raw.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("after %v: %v", out, err)
		}
		_, payload, ok := Decode(buf[:m])
		if !ok {
			t.Fatalf("bad datagram % x", buf[:m])
		}
		out = append(out, binary.BigEndian.Uint32(payload))
	}
	return out
}

func TestFabricImpairmentReorders(t *testing.T) {
	r := newImpairRig(t, Impairment{ReorderPercent: 100, Seed: 1, Hold: time.Second})
	r.send(1, 2, 3, 4, 5)
	if got, want := fmt.Sprint(r.recv(t, 4)), "[2 1 4 3]"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
	r.clk.Advance(time.Second) // 5 waited for a successor for the hold time
	if got := r.recv(t, 1); got[0] != 5 {
		t.Errorf("held datagram = %d, want 5", got[0])
	}
	if got := r.f.c.TxImpairReorder.Load(); got != 3 {
		t.Errorf("TxImpairReorder = %d, want 3", got)
	}
}

func TestFabricImpairmentLossIsSeeded(t *testing.T) {
	run := func() ([]uint32, uint64) {
		// 100 small datagrams fit the receiving socket's default buffer
		// (the test reads only after sending them all).
		r := newImpairRig(t, Impairment{LossPercent: 30, Seed: 42})
		for i := range uint32(100) {
			r.send(i)
		}
		drops := r.f.c.TxImpairDrop.Load()
		return r.recv(t, 100-int(drops)), drops
	}
	got1, drops1 := run()
	got2, drops2 := run()
	if drops1 < 10 || drops1 > 50 {
		t.Errorf("dropped %d of 100 at 30%%", drops1)
	}
	if drops1 != drops2 || fmt.Sprint(got1) != fmt.Sprint(got2) {
		t.Errorf("same seed, different losses: %d vs %d", drops1, drops2)
	}
	for i := 1; i < len(got1); i++ {
		if got1[i] <= got1[i-1] {
			t.Fatalf("loss alone reordered: %v", got1)
		}
	}
}

func TestFabricSetImpairmentReleasesHeld(t *testing.T) {
	r := newImpairRig(t, Impairment{ReorderPercent: 100, Seed: 1, Hold: time.Hour})
	r.send(1)
	if err := r.f.SetImpairment(Impairment{}); err != nil {
		t.Fatal(err)
	}
	r.send(2)
	if got := fmt.Sprint(r.recv(t, 2)); got != "[1 2]" {
		t.Errorf("order %s, want [1 2]", got)
	}
	if r.f.Impairment().Active() {
		t.Error("impairment still active")
	}
}

// BenchmarkFabricLoopback measures encapsulation, a loopback UDP hop and
// decapsulation into the peer's switch port.
func BenchmarkFabricLoopback(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			tx, err := New(Options{Listen: loopback})
			if err != nil {
				b.Fatal(err)
			}
			rx, err := New(Options{Listen: loopback})
			if err != nil {
				b.Fatal(err)
			}
			tx.AddPeer(rx.LocalAddr())
			rx.AddPeer(tx.LocalAddr())
			sink := &countingRx{}
			rx.SetFrameSink(sink)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); rx.Run(ctx) }()
			f := testFrame(testMAC(2), testMAC(1), 0x0800, size-ethHeaderLen)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for b.Loop() {
				tx.Deliver(f)
			}
			elapsed := b.Elapsed()
			// Let the receiver drain what is still queued (bounded).
			deadline := time.Now().Add(2 * time.Second)
			for sink.load() < uint64(b.N) && time.Now().Before(deadline) {
				before := sink.load()
				time.Sleep(20 * time.Millisecond)
				if sink.load() == before {
					break
				}
			}
			got := sink.load()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tx-frames/s")
			b.ReportMetric(float64(got)/elapsed.Seconds(), "rx-frames/s")
			b.ReportMetric(100*float64(uint64(b.N)-min(got, uint64(b.N)))/float64(b.N), "loss%")
			cancel()
			wg.Wait()
			tx.Close()
		})
	}
}

type countingRx struct {
	mu sync.Mutex
	n  uint64
}

func (c *countingRx) Deliver([]byte) { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *countingRx) load() uint64   { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

func TestCounterTablesAreComplete(t *testing.T) {
	f, err := New(Options{Listen: loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sw := NewSwitch(SwitchOptions{})
	for name, set := range map[string]stats.Set{
		"switch": sw.Counters(), "port": sw.AddPort("p").Counters(), "fabric": f.Counters(),
	} {
		seen := map[string]bool{}
		for _, d := range set {
			if d.Name == "" || d.Help == "" || d.Counter == nil || seen[d.Name] {
				t.Errorf("%s counter %q: empty or duplicate row", name, d.Name)
			}
			seen[d.Name] = true
		}
	}
}

func TestFabricSendDoesNotAllocate(t *testing.T) {
	raw, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	f, err := New(Options{Listen: loopback, Peers: []netip.AddrPort{raw.LocalAddr().(*net.UDPAddr).AddrPort()}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fr := testFrame(bcastMAC, testMAC(1), 0x0800, 100)
	f.Deliver(fr) // warm the buffer pool
	if n := testing.AllocsPerRun(100, func() { f.Deliver(fr) }); n != 0 {
		t.Errorf("%v allocations per sent frame, want 0", n)
	}
}
