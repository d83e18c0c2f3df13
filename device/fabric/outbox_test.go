package fabric

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// falconPayload is a Falcon-like payload of n bytes numbered i.
func falconPayload(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i + j)
	}
	if n >= 4 {
		binary.BigEndian.PutUint32(p, uint32(i))
	}
	return p
}

// outboxSizes mixes runs of one size (GSO sends, one with a shorter last
// datagram), single datagrams and one too large to share a GSO send.
var outboxSizes = []int{64, 64, 64, 40, 1024, 4364, 4364, 4364, 4364, 100, 9000, 64, 64}

func TestOutboxHoldsABurstUntilFlush(t *testing.T) {
	for _, opts := range []Options{{}, {NoOffload: true}} {
		t.Run(fmt.Sprintf("nooffload=%v", opts.NoOffload), func(t *testing.T) {
			a, b := newNode(t, opts), newNode(t, opts)
			mesh(t, a, b)
			b.fab.Handle(KindFalcon, b.in)
			ob := a.fab.NewOutbox()
			l := ob.Link(b.fab.LocalAddr(), KindFalcon)
			for i, n := range outboxSizes {
				l.Send(falconPayload(i, n), 5)
			}
			if got := ob.Queued(); got != len(outboxSizes) {
				t.Fatalf("queued %d before Flush, want %d", got, len(outboxSizes))
			}
			if got := a.fab.c.TxDatagrams.Load(); got != 0 {
				t.Fatalf("%d datagrams written before Flush", got)
			}
			ob.Flush()
			if got := ob.Queued(); got != 0 {
				t.Errorf("queued %d after Flush", got)
			}
			for i, n := range outboxSizes {
				it := b.in.next(t, fmt.Sprintf("datagram %d", i))
				if !bytes.Equal(it.b, falconPayload(i, n)) || it.flow != 5 {
					t.Fatalf("datagram %d: flow %d, %d bytes, want flow 5 and %d bytes numbered %d", i, it.flow, len(it.b), n, i)
				}
			}
			c := a.fab.Counters().Snapshot()
			if c["tx_datagrams"] != uint64(len(outboxSizes)) || c["tx_error"] != 0 || c["tx_short"] != 0 {
				t.Errorf("tx_datagrams %d, tx_error %d, tx_short %d; want %d, 0, 0", c["tx_datagrams"], c["tx_error"], c["tx_short"], len(outboxSizes))
			}
			if opts.NoOffload && c["tx_gso"] != 0 {
				t.Errorf("tx_gso %d with offload off", c["tx_gso"])
			}
			if !opts.NoOffload && a.fab.gso.Load() && c["tx_gso"] == 0 {
				t.Errorf("no GSO send for runs of one size")
			}
		})
	}
}

func TestOutboxFlushesWhenFull(t *testing.T) {
	a, b := newNode(t, Options{}), newNode(t, Options{})
	mesh(t, a, b)
	b.fab.Handle(KindFalcon, b.in)
	ob := a.fab.NewOutbox()
	l := ob.Link(b.fab.LocalAddr(), KindFalcon)
	for i := range outboxMax {
		l.Send(falconPayload(i, 64), 1)
	}
	if got := ob.Queued(); got != 0 {
		t.Errorf("queued %d after %d sends, want 0 (a full outbox flushes)", got, outboxMax)
	}
	// 20 datagrams of 16 KiB are more bytes than an outbox holds.
	for i := range 20 {
		l.Send(falconPayload(i, 16<<10), 1)
	}
	if got := ob.Queued(); got*(HeaderLen+16<<10) >= outboxFlushBytes {
		t.Errorf("queued %d of 16 KiB: the outbox should have flushed at %d bytes", got, outboxFlushBytes)
	}
	ob.Flush()
	for i := range outboxMax + 20 {
		b.in.next(t, fmt.Sprintf("datagram %d", i))
	}
}

func TestOutboxCountsRefusedSends(t *testing.T) {
	a, b := newNode(t, Options{}), newNode(t, Options{})
	mesh(t, a, b)
	ob := a.fab.NewOutbox()
	ob.Link(netip.MustParseAddrPort("127.0.0.1:9"), KindFalcon).Send([]byte{1}, 0)
	ob.Link(b.fab.LocalAddr(), Kind(9)).Send([]byte{1}, 0)
	ob.Link(b.fab.LocalAddr(), KindFalcon).Send(make([]byte, MaxPayload+1), 0)
	if got := ob.Queued(); got != 0 {
		t.Errorf("queued %d refused sends", got)
	}
	c := a.fab.Counters().Snapshot()
	for _, name := range []string{"tx_no_peer", "tx_bad_kind", "tx_too_big"} {
		if c[name] != 1 {
			t.Errorf("%s = %d, want 1", name, c[name])
		}
	}
	ob.Link(b.fab.LocalAddr(), KindFalcon).Send([]byte{1}, 0)
	a.fab.Close()
	ob.Flush()
	if got := a.fab.c.TxError.Load(); got != 1 {
		t.Errorf("tx_error %d after a flush on a closed fabric, want 1", got)
	}
}

func TestOutboxSendDoesNotAllocate(t *testing.T) {
	a, b := newNode(t, Options{}), newNode(t, Options{})
	mesh(t, a, b)
	ob := a.fab.NewOutbox()
	l := ob.Link(b.fab.LocalAddr(), KindFalcon)
	p := falconPayload(1, 1024)
	send := func() {
		for range 8 {
			l.Send(p, 2)
		}
		ob.Flush()
	}
	send()
	if n := testing.AllocsPerRun(50, send); n != 0 {
		t.Errorf("%v allocations per burst, want 0", n)
	}
}

func TestGSORunKeepsOneSizeAndPeer(t *testing.T) {
	p, q := &fabricPeer{}, &fabricPeer{}
	d := func(n int) []byte { return make([]byte, n) }
	for _, tc := range []struct {
		name  string
		sizes []int
		peers []*fabricPeer
		want  int
	}{
		{"one", []int{100}, []*fabricPeer{p}, 1},
		{"same size", []int{100, 100, 100}, []*fabricPeer{p, p, p}, 3},
		{"shorter last ends the run", []int{100, 100, 50, 100}, []*fabricPeer{p, p, p, p}, 3},
		{"longer breaks", []int{100, 200}, []*fabricPeer{p, p}, 1},
		{"other peer breaks", []int{100, 100, 100}, []*fabricPeer{p, p, q}, 2},
		{"byte limit", []int{30000, 30000, 30000}, []*fabricPeer{p, p, p}, 2},
	} {
		var ds [][]byte
		for _, n := range tc.sizes {
			ds = append(ds, d(n))
		}
		if got := gsoRun(ds, tc.peers); got != tc.want {
			t.Errorf("%s: run %d, want %d", tc.name, got, tc.want)
		}
	}
	many := make([][]byte, 100)
	peers := make([]*fabricPeer, 100)
	for i := range many {
		many[i], peers[i] = d(64), p
	}
	if got := gsoRun(many, peers); got != gsoMaxSegs {
		t.Errorf("100 small datagrams: run %d, want %d", got, gsoMaxSegs)
	}
}

// A hostile datagram in a batch costs only itself: the good ones around it
// are delivered, each bad one counted by its cause.
func TestHostileDatagramInABatch(t *testing.T) {
	b := newStoppedNode(t, Options{})
	peer, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(loopback))
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if err := b.fab.AddPeer(peer.LocalAddr().(*net.UDPAddr).AddrPort()); err != nil {
		t.Fatal(err)
	}
	b.fab.Handle(KindFalcon, b.in)
	dst := net.UDPAddrFromAddrPort(b.fab.LocalAddr())
	good := func(i int) []byte { return fabricDatagram(KindFalcon, 1, falconPayload(i, 64)) }
	bad := append([]byte{0xde, 0xad}, good(9)[2:]...)
	// Sent before b reads at all: the socket holds them, and the first
	// recvmmsg takes them as one batch.
	for _, d := range [][]byte{good(0), bad, good(1), {1, 2, 3}, good(2)} {
		if _, err := peer.WriteToUDP(d, dst); err != nil {
			t.Fatal(err)
		}
	}
	// A GSO send whose middle segment is hostile: with GRO the receiver
	// takes it as one receive and splits it.
	seg := good(3)
	gso := append(append(append([]byte(nil), seg...), bad[:len(seg)]...), good(4)...)
	if _, _, err := peer.WriteMsgUDP(gso, gsoControl(len(seg)), dst); err != nil {
		t.Fatal(err)
	}
	b.run(t)
	for i := range 5 {
		it := b.in.next(t, fmt.Sprintf("good datagram %d", i))
		if !bytes.Equal(it.b, falconPayload(i, 64)) {
			t.Fatalf("datagram %d: got % x", i, it.b[:8])
		}
	}
	b.in.none(t, "after the good datagrams")
	c := b.fab.Counters().Snapshot()
	if c["rx_bad_magic"] != 2 || c["rx_short"] != 1 || c["rx_delivered"] != 5 {
		t.Errorf("rx_bad_magic %d, rx_short %d, rx_delivered %d; want 2, 1, 5", c["rx_bad_magic"], c["rx_short"], c["rx_delivered"])
	}
	if b.fab.gso.Load() && c["rx_gro"] != 1 {
		t.Errorf("rx_gro %d, want 1 (the GSO send split)", c["rx_gro"])
	}
	if c["rx_batches"] > 2 {
		t.Errorf("rx_batches %d: the queued datagrams were not read as a batch", c["rx_batches"])
	}
}

// gsoControl is a UDP_SEGMENT control message for segments of size n.
func gsoControl(n int) []byte {
	b := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafePointer(&b[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(n))
	return b
}

// stoppedNode is a node whose fabric reads only once run is called.
type stoppedNode struct {
	*node
}

func newStoppedNode(t *testing.T, opts Options) *stoppedNode {
	t.Helper()
	opts.Listen = loopback
	fab, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fab.Close() })
	return &stoppedNode{&node{fab: fab, in: newInbox()}}
}

func (n *stoppedNode) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.fab.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestOutboxTakesAPayloadBuiltInItsRoom(t *testing.T) {
	a, b := newNode(t, Options{}), newNode(t, Options{})
	mesh(t, a, b)
	b.fab.Handle(KindFalcon, b.in)
	ob := a.fab.NewOutbox()
	l := ob.Link(b.fab.LocalAddr(), KindFalcon)
	if r := a.fab.Link(b.fab.LocalAddr(), KindFalcon).Reserve(10); r != nil {
		t.Errorf("a link without an outbox lent room")
	}
	for i := range 3 {
		room := l.Reserve(1000)
		if len(room) != 1000 {
			t.Fatalf("room of %d bytes, want 1000", len(room))
		}
		copy(room, falconPayload(i, 1000))
		l.Send(room, 1)
		copy(room, falconPayload(99, 1000)) // queued in place: this is what goes
	}
	l.Send(falconPayload(3, 10), 1) // an ordinary send after them
	ob.Flush()
	for i := range 3 {
		if got := b.in.next(t, "in-place datagram").b; !bytes.Equal(got, falconPayload(99, 1000)) {
			t.Fatalf("datagram %d: % x..., want the room's last contents", i, got[:8])
		}
	}
	if got := b.in.next(t, "copied datagram").b; !bytes.Equal(got, falconPayload(3, 10)) {
		t.Fatalf("copied datagram: % x", got)
	}
	if l.Reserve(MaxPayload+1) != nil || l.Reserve(0) != nil {
		t.Errorf("room lent for a payload out of range")
	}
}

// The loss impairment drops the same datagrams from an outbox as from
// single sends with the same seed, and the rest still go in batches.
func TestOutboxLosesWhatTheImpairmentDrops(t *testing.T) {
	im := Impairment{LossPercent: 30, Seed: 42}
	single := newImpairRig(t, im)
	single.send(seqRange(100)...)
	want := single.recv(t, 100-int(single.f.c.TxImpairDrop.Load()))

	r := newImpairRig(t, im)
	ob := r.f.NewOutbox()
	l := ob.Link(r.raw.LocalAddr().(*net.UDPAddr).AddrPort(), KindFalcon)
	for _, s := range seqRange(100) {
		var p [4]byte
		binary.BigEndian.PutUint32(p[:], s)
		l.Send(p[:], 0)
	}
	ob.Flush()
	drops := r.f.c.TxImpairDrop.Load()
	got := r.recv(t, 100-int(drops))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outbox delivered %v,\nsingle sends %v", got, want)
	}
	if r.f.c.TxBatches.Load() == 0 {
		t.Errorf("no batch sent under loss alone")
	}
}

func seqRange(n uint32) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}

// With several paths, the path whose datagram was queued last is flushed
// last (each path is one socket: its datagrams go together).
func TestOutboxFlushesThePathOfTheLastDatagramLast(t *testing.T) {
	a, b := newNode(t, Options{Paths: 4}), newNode(t, Options{Paths: 4})
	mesh(t, a, b)
	b.fab.Handle(KindFalcon, b.in)
	ob := a.fab.NewOutbox()
	l := ob.Link(b.fab.LocalAddr(), KindFalcon)
	for _, flow := range []uint32{0, 1, 2, 3, 1, 2} { // per-flow ACKs, then the latest's
		l.Send([]byte{byte(flow)}, flow)
	}
	if got := fmt.Sprint(ob.pathOrder()); got != "[0 3 1 2]" {
		t.Errorf("flush order %s, want [0 3 1 2]", got)
	}
	ob.Flush()
	for i := range 6 {
		b.in.next(t, fmt.Sprintf("datagram %d", i))
	}
	if n := testing.AllocsPerRun(20, func() {
		l.Send([]byte{1}, 1)
		l.Send([]byte{0}, 0)
		ob.Flush()
	}); n != 0 {
		t.Errorf("%v allocations per flush over two paths", n)
	}
}
