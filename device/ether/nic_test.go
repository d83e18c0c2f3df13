package ether

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"falconnic/device/ether/ethertest"
	"falconnic/device/l2"
	"falconnic/internal/stats"
	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

const (
	testRingSize = ethertest.RingSize
	testBufSize  = ethertest.BufSize
	failsafe     = ethertest.Failsafe
)

var (
	macA = net.HardwareAddr{0x52, 0x54, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x52, 0x54, 0, 0, 0, 0xb}
)

func newTestNIC(t testing.TB, name string, mac net.HardwareAddr, pairs int) *NIC {
	t.Helper()
	n, err := New(Config{Name: name, Socket: filepath.Join(t.TempDir(), name+".sock"), MAC: mac, QueuePairs: pairs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// attach connects a guest to nic and replays QEMU's net init and start.
func attach(t testing.TB, nic *NIC, acked uint64) *ethertest.Guest {
	t.Helper()
	return ethertest.Attach(t, nic, nic.cfg.QueuePairs, acked)
}

var ethFrame = ethertest.EthFrame

const acked1 = ethertest.Acked1

// recorder keeps copies of delivered frames.
type recorder struct {
	mu     sync.Mutex
	frames [][]byte
}

func (r *recorder) Deliver(b []byte) {
	r.mu.Lock()
	r.frames = append(r.frames, append([]byte(nil), b...))
	r.mu.Unlock()
}

func (r *recorder) wait(t *testing.T, n int) [][]byte {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for {
		r.mu.Lock()
		got := append([][]byte(nil), r.frames...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("uplink got %d frames, want %d", len(got), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBackToBackFramesFlowBothWays(t *testing.T) {
	a, b := newTestNIC(t, "a", macA, 1), newTestNIC(t, "b", macB, 1)
	a.SetUplink(b)
	b.SetUplink(a)
	ga, gb := attach(t, a, acked1), attach(t, b, acked1)
	ga.PostRX(0, 8)
	gb.PostRX(0, 8)
	ab := ethFrame(macB, macA, 0x0800, "from A to B")
	ga.Send(0, ab)
	if got := gb.RecvN(0, 1); !bytes.Equal(got[0], ab) {
		t.Fatalf("B got %x, want %x", got[0], ab)
	}
	ba := ethFrame(macA, macB, 0x0806, "reply from B")
	gb.Send(0, ba)
	if got := ga.RecvN(0, 1); !bytes.Equal(got[0], ba) {
		t.Fatalf("A got %x", got[0])
	}
	if c := a.Counters(); c.TxFrames.Load() != 1 || c.RxFrames.Load() != 1 {
		t.Fatalf("A counters %v", c.Set().Snapshot())
	}
}

func TestFramesWaitInNICWhileGuestHasNoBuffers(t *testing.T) {
	n := newTestNIC(t, "n", macB, 1)
	// No session yet: frames queue up to the bound; the rest are counted drops.
	for i := 0; i < rxQueueDepth+44; i++ {
		n.Deliver(ethFrame(macB, macA, 0x0800, fmt.Sprintf("frame %d", i)))
	}
	if d := n.Counters().RxQueueFull.Load(); d != 44 {
		t.Fatalf("RxQueueFull = %d, want 44", d)
	}
	g := attach(t, n, acked1)
	g.PostRX(0, testRingSize)
	got := g.RecvN(0, rxQueueDepth)
	for i, f := range got {
		if want := fmt.Sprintf("frame %d", i); string(f[l2.HeaderLen:]) != want {
			t.Fatalf("frame %d = %q, want %q (order kept)", i, f[l2.HeaderLen:], want)
		}
	}
}

func TestMergeableRxSpansBuffersWithNumBuffers(t *testing.T) {
	n := newTestNIC(t, "n", macB, 1)
	g := attach(t, n, acked1)
	g.RxLen = 512
	g.PostRX(0, 8)
	payload := bytes.Repeat([]byte("0123456789"), 140) // 1400 B + 14 + 12 hdr = 3 buffers
	f := ethFrame(macB, macA, 0x0800, string(payload))
	n.Deliver(f)
	if !g.Qs[0].WaitUsed(3, failsafe) {
		t.Fatal("frame not received")
	}
	got, nbufs, _ := g.Recv(0)
	if nbufs != 3 || !bytes.Equal(got, f) {
		t.Fatalf("num_buffers=%d, frame equal=%v", nbufs, bytes.Equal(got, f))
	}
}

func TestWithoutMrgRxbufFramesMustFitOneChain(t *testing.T) {
	n := newTestNIC(t, "n", macB, 1)
	g := attach(t, n, vhostuser.FeatureVersion1)
	g.RxLen = 1000
	g.PostRX(0, 4)
	n.Deliver(ethFrame(macB, macA, 0x0800, string(make([]byte, 1200))))
	small := ethFrame(macB, macA, 0x0800, "fits")
	n.Deliver(small)
	got := g.RecvN(0, 2) // the dropped frame's chain comes back with length 0
	if got[0] != nil || !bytes.Equal(got[1], small) {
		t.Fatalf("got %q", got)
	}
	if c := n.Counters().RxChainTooSmall.Load(); c != 1 {
		t.Fatalf("RxChainTooSmall = %d", c)
	}
}

func TestLegacyHeaderAndTwoDescriptorTX(t *testing.T) {
	up := &recorder{}
	n := newTestNIC(t, "n", macA, 1)
	n.SetUplink(up)
	g := attach(t, n, 0) // neither VERSION_1 nor MRG_RXBUF: 10-byte header
	q := g.Qs[1]
	f := ethFrame(macB, macA, 0x0800, "legacy")
	i, _ := q.Peek()
	copy(q.Buf(i)[64:], f)
	if _, err := q.Add([]vhostusertest.Seg{{GPA: q.BufGPAOf(i), Len: netHdrLegacyLen}, {GPA: q.BufGPAOf(i) + 64, Len: uint32(len(f))}}); err != nil {
		t.Fatal(err)
	}
	q.Publish()
	q.Kick()
	if got := up.wait(t, 1); !bytes.Equal(got[0], f) {
		t.Fatalf("uplink got %x", got[0])
	}
	// RX: 10-byte header, no num_buffers.
	g.PostRX(0, 1)
	n.Deliver(f)
	if got := g.RecvN(0, 1); !bytes.Equal(got[0], f) {
		t.Fatalf("guest got %x", got[0])
	}
}

func TestControlChannelFramesStayInTheNIC(t *testing.T) {
	up := &recorder{}
	n := newTestNIC(t, "n", macA, 1)
	n.SetUplink(up)
	var hooked [][]byte
	var mu sync.Mutex
	n.SetControlHandler(func(f []byte) {
		mu.Lock()
		hooked = append(hooked, append([]byte(nil), f...))
		mu.Unlock()
	})
	g := attach(t, n, acked1)
	ctl := ethFrame(macA, macA, l2.EtherTypeControl, "rdma cm")
	other := ethFrame(macB, macA, l2.EtherTypeControl, "for B's NIC")
	g.Send(0, ctl, other)
	got := up.wait(t, 1)
	if len(got) != 1 || !bytes.Equal(got[0], other) {
		t.Fatalf("uplink got %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hooked) != 1 || !bytes.Equal(hooked[0], ctl) {
		t.Fatalf("hook got %q", hooked)
	}
	if c := n.Counters().ControlFrames.Load(); c != 1 {
		t.Fatalf("ControlFrames = %d", c)
	}
}

func TestBadTXChainsAreCounted(t *testing.T) {
	up := &recorder{}
	n := newTestNIC(t, "n", macA, 1)
	n.SetUplink(up)
	g := attach(t, n, acked1)
	q := g.Qs[1]
	// runt: header only
	i, _ := q.Peek()
	q.Add([]vhostusertest.Seg{{GPA: q.BufGPAOf(i), Len: 12}})
	// writable descriptor on the TX ring
	i, _ = q.Peek()
	q.Add([]vhostusertest.Seg{{GPA: q.BufGPAOf(i), Len: 100, Write: true}})
	good := ethFrame(macB, macA, 0x0800, "good")
	g.Send(0, good)
	if got := up.wait(t, 1); !bytes.Equal(got[0], good) {
		t.Fatal("good frame lost")
	}
	c := n.Counters()
	if c.TxRunt.Load() != 1 || c.TxChainWritable.Load() != 1 {
		t.Fatalf("counters %v", c.Set().NonZero())
	}
}

func TestTwoQueuePairsSpreadFlows(t *testing.T) {
	up := &recorder{}
	n := newTestNIC(t, "n", macB, 2)
	n.SetUplink(up)
	g := attach(t, n, acked1|netFMQ)
	g.PostRX(0, 64)
	g.PostRX(1, 64)
	// TX on pair 1 reaches the uplink.
	g.Send(1, ethFrame(macA, macB, 0x0800, "tx on pair 1"))
	up.wait(t, 1)
	// 32 IPv4 flows: each lands on the pair its hash picks, none is lost.
	want := map[int]int{}
	for i := 0; i < 32; i++ {
		ip := make([]byte, 24)
		ip[0], ip[9] = 0x45, 17
		copy(ip[12:], []byte{10, 0, 0, byte(i), 10, 0, 1, 1})
		binary.BigEndian.PutUint16(ip[20:], uint16(1000+i))
		f := ethFrame(macB, macA, 0x0800, string(ip))
		want[int(l2.FlowHash(f)%2)]++
		n.Deliver(f)
	}
	if want[0] == 0 || want[1] == 0 {
		t.Fatalf("hash put every flow on one pair: %v", want)
	}
	for p := 0; p < 2; p++ {
		g.RecvN(p, want[p])
	}
}

func TestReconnectMidTrafficResumes(t *testing.T) {
	a, b := newTestNIC(t, "a", macA, 1), newTestNIC(t, "b", macB, 1)
	a.SetUplink(b)
	ga, gb := attach(t, a, acked1), attach(t, b, acked1)
	gb.PostRX(0, 32)
	for i := 0; i < 10; i++ {
		ga.Send(0, ethFrame(macB, macA, 0x0800, fmt.Sprintf("before %d", i)))
	}
	gb.RecvN(0, 10)
	// B's back-end session drops; QEMU reconnects and resumes from the used idx.
	b.Disconnect()
	gb.Ended()
	for i := 0; i < 5; i++ { // sent during the outage: wait in B's NIC queue
		ga.Send(0, ethFrame(macB, macA, 0x0800, fmt.Sprintf("during %d", i)))
	}
	gb.Connect(gb.FE.UsedBases())
	for i := 0; i < 5; i++ {
		ga.Send(0, ethFrame(macB, macA, 0x0800, fmt.Sprintf("after %d", i)))
	}
	got := gb.RecvN(0, 10)
	drops := b.Counters().RxQueueFull.Load() + b.Counters().RxPendingReset.Load()
	if drops != 0 {
		t.Fatalf("unexpected drops %d", drops)
	}
	for i := 0; i < 5; i++ {
		if string(got[i][l2.HeaderLen:]) != fmt.Sprintf("during %d", i) || string(got[5+i][l2.HeaderLen:]) != fmt.Sprintf("after %d", i) {
			t.Fatalf("frames after reconnect: %q", got)
		}
	}
	if s := b.Status(); s.Session != "running" || s.Counters["vhost.sessions"] != 2 {
		t.Fatalf("status %+v", s)
	}
}

func TestNICConfigValidation(t *testing.T) {
	bad := []Config{
		{Socket: "/x", MAC: macA},
		{Name: "n", MAC: macA},
		{Name: "n", Socket: "/x", MAC: net.HardwareAddr{1, 2}},
		{Name: "n", Socket: "/x", MAC: macA, QueuePairs: MaxQueuePairs + 1},
	}
	for _, c := range bad {
		if _, err := New(c, nil); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

func TestStatusReportsSessionQueuesAndCounters(t *testing.T) {
	n := newTestNIC(t, "nic0", macA, 1)
	if s := n.Status(); s.Session != "idle" || s.Name != "nic0" || s.MAC != macA.String() {
		t.Fatalf("status before a session: %+v", s)
	}
	g := attach(t, n, acked1)
	g.Send(0, ethFrame(macB, macA, 0x0800, "x"))
	g.Qs[1].WaitUsed(1, failsafe)
	s := n.Status()
	if s.Session != "running" || len(s.Queues) != 2 || s.Queues[0].Role != "rx0" || s.Queues[1].Role != "tx0" || s.Queues[1].Size != testRingSize {
		t.Fatalf("status %+v", s)
	}
	if s.Counters["tx_no_uplink"] != 1 {
		t.Fatalf("counters %v", s.Counters)
	}
	b, err := json.Marshal(n.StatusJSON())
	if err != nil || !bytes.Contains(b, []byte(`"session":"running"`)) || !bytes.Contains(b, []byte(`"last_avail":1`)) {
		t.Fatalf("status JSON %s (%v)", b, err)
	}
}

func TestBadChainBetweenMergedBuffersReturnsThemEmpty(t *testing.T) {
	n := newTestNIC(t, "n", macB, 1)
	g := attach(t, n, acked1)
	q := g.Qs[0]
	g.RxLen = 512
	g.PostRX(0, 1)
	// A looping chain follows the first buffer.
	i, _ := q.Peek()
	q.RawDesc(i, q.BufGPAOf(i), 512, vhostusertest.DescWrite|vhostusertest.DescNext, i)
	q.RawAvail(i)
	q.Publish()
	q.Kick()
	f := ethFrame(macB, macA, 0x0800, string(bytes.Repeat([]byte{7}, 1400)))
	n.Deliver(f)
	if !q.WaitUsed(2, failsafe) {
		t.Fatal("chains not returned")
	}
	for k := 0; k < 2; k++ {
		if u, _ := q.PopUsed(); u.Len != 0 {
			t.Fatalf("used %+v, want length 0", u)
		}
	}
	if c := n.Counters().RxPartialReturned.Load(); c != 1 {
		t.Fatalf("RxPartialReturned = %d", c)
	}
	if c := n.VhostCounters().ChainLoop.Load(); c != 1 {
		t.Fatalf("ChainLoop = %d", c)
	}
	// The frame waited; with good buffers it arrives whole.
	g.PostRX(0, 4)
	if got := g.RecvN(0, 1); !bytes.Equal(got[0], f) {
		t.Fatal("frame corrupted")
	}
}

func TestServeListensSurvivesReconnectAndCloseRemovesSocket(t *testing.T) {
	n := newTestNIC(t, "n", macB, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()
	mem, err := vhostusertest.NewGuestMemory(vhostusertest.OneRegion(4 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var qs []*vhostusertest.DriverQueue
	for i := 0; i < 2; i++ {
		q, err := vhostusertest.NewDriverQueue(mem, i, 64, 0, testBufSize)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		qs = append(qs, q)
	}
	dial := func() *net.UnixConn {
		deadline := time.Now().Add(failsafe)
		for {
			c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: n.cfg.Socket, Net: "unix"})
			if err == nil {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	fe, err := vhostusertest.NewFrontend(dial(), mem, qs)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	acked := acked1 | vhostuser.FeatureProtocolFeatures
	for round := 0; round < 2; round++ {
		if round == 1 {
			n.Disconnect() // QEMU with reconnect=1 comes back
			fe.Reconnect(dial())
		}
		if err := fe.NetInit(1); err != nil {
			t.Fatal(err)
		}
		if err := fe.NetStart(acked, 1, fe.UsedBases()); err != nil {
			t.Fatal(err)
		}
		i, _ := qs[0].Peek()
		qs[0].Add([]vhostusertest.Seg{{GPA: qs[0].BufGPAOf(i), Len: 1536, Write: true}})
		qs[0].Publish()
		qs[0].Kick()
		n.Deliver(ethFrame(macB, macA, 0x0800, "hi"))
		if !qs[0].WaitUsed(1, failsafe) {
			t.Fatalf("round %d: no frame", round)
		}
		qs[0].PopUsed()
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(n.cfg.Socket); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	if err := n.Serve(context.Background()); err != ErrClosed {
		t.Fatalf("Serve after Close: %v", err)
	}
}

func TestLinuxFeatureSetWithEventIdxAndIndirect(t *testing.T) {
	a, b := newTestNIC(t, "a", macA, 1), newTestNIC(t, "b", macB, 1)
	a.SetUplink(b)
	all := a.dev.Features() // a Linux guest acks everything we offer
	ga, gb := attach(t, a, all), attach(t, b, all)
	gb.Qs[0].UseIndirect = true
	for k := 0; k < 3; k++ {
		// Linux asks for an interrupt at the next used entry.
		gb.Qs[0].SetUsedEvent(gb.Qs[0].UsedIdx())
		gb.PostRX(0, 2)
		f := ethFrame(macB, macA, 0x0800, fmt.Sprintf("frame %d", k))
		ga.Send(0, f)
		if got := gb.RecvN(0, 1); !bytes.Equal(got[0], f) {
			t.Fatalf("round %d: got %q", k, got[0])
		}
	}
	if n := b.VhostCounters().Calls.Load(); n == 0 {
		t.Fatal("no interrupts with EVENT_IDX")
	}
}

// QEMU 7.2 quirk (reproduced with a real guest): if the guest driver
// negotiates while no back-end is connected, the reconnect's SET_FEATURES
// carries only PROTOCOL_FEATURES although the guest uses VERSION_1 and
// MRG_RXBUF. The guest's first TX chain gives it away.
func TestModernGuestBehindLegacyFeaturesIsDetected(t *testing.T) {
	up := &recorder{}
	n := newTestNIC(t, "n", macA, 1)
	n.SetUplink(up)
	g := attach(t, n, 0)                                 // SET_FEATURES 0x40000000
	g.Acked = acked1 | vhostuser.FeatureProtocolFeatures // what the guest really uses
	f := ethFrame(macB, macA, 0x0800, "modern guest")
	g.Send(0, f) // one descriptor: 12-byte header + frame
	if got := up.wait(t, 1); !bytes.Equal(got[0], f) {
		t.Fatalf("uplink got %x, want %x", got[0], f)
	}
	if c := n.Counters().HdrFixups.Load(); c != 1 {
		t.Fatalf("HdrFixups = %d", c)
	}
	g.PostRX(0, 2)
	n.Deliver(f)
	got, nbufs, _ := g.Recv(0)
	for got == nil && g.Qs[0].WaitUsed(1, failsafe) {
		got, nbufs, _ = g.Recv(0)
	}
	if nbufs != 1 || !bytes.Equal(got, f) {
		t.Fatalf("guest got %x (num_buffers %d)", got, nbufs)
	}
}

// The front-end (QEMU) drops the connection while frames flow and replays
// init and start with the used idx as base. Every frame guest A sent is
// either received by guest B or counted as a drop.
func TestFrontEndReconnectMidTrafficLosesNothingUncounted(t *testing.T) {
	a, b := newTestNIC(t, "a", macA, 1), newTestNIC(t, "b", macB, 1)
	a.SetUplink(b)
	ga, gb := attach(t, a, acked1), attach(t, b, acked1)
	gb.PostRX(0, 128)
	const total = 600
	received := 0
	drain := func() {
		for {
			f, _, ok := gb.Recv(0)
			if !ok {
				return
			}
			if f != nil {
				received++
			}
			gb.PostRX(0, 1)
		}
	}
	for i := 0; i < total; i++ {
		for !ga.Post(0, ethFrame(macB, macA, 0x0800, fmt.Sprintf("frame %d", i))) {
			ga.Qs[1].Publish()
			ga.Qs[1].Kick()
			if !ga.Qs[1].WaitUsed(1, failsafe) {
				t.Fatal("A's TX ring stuck")
			}
			drain()
		}
		if i%20 == 19 {
			ga.Qs[1].Publish()
			ga.Qs[1].Kick()
			drain()
		}
		if i == total/2 {
			gb.Connect(gb.FE.UsedBases()) // QEMU side: drop and replay
		}
	}
	ga.Qs[1].Publish()
	ga.Qs[1].Kick()
	deadline := time.Now().Add(failsafe)
	for {
		drain()
		c := b.Counters()
		drops := c.RxQueueFull.Load() + c.RxPendingReset.Load() + c.RxNoPoolBuf.Load()
		if a.Counters().TxFrames.Load() == total && uint64(received)+drops == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A sent %d, B's guest got %d, B dropped %d (%v)", a.Counters().TxFrames.Load(), received, drops, c.Set().NonZero())
		}
		gb.Qs[0].WaitUsed(1, 5*time.Millisecond)
	}
	if s := b.Status(); s.Counters["vhost.sessions"] != 2 || s.Session != "running" {
		t.Fatalf("status %+v", s)
	}
}

// failsafe bounds every wait in these tests: it turns a hang into a
// failure and is generous for a loaded machine (tests never assert timing).

// waitCount polls c until it reaches want (bounded by failsafe).
func waitCount(t *testing.T, c *stats.Counter, want uint64) {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for c.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("counter = %d, want %d", c.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func newWaitingNIC(t *testing.T, name string, mac net.HardwareAddr, wait time.Duration) *NIC {
	t.Helper()
	n, err := New(Config{Name: name, Socket: filepath.Join(t.TempDir(), name+".sock"), MAC: mac, QueuePairs: 1, RxWait: wait}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A local sender is held back, not dropped, while the receiving guest is
// slow to post RX buffers: its TX ring stops draining instead.
func TestLocalSenderWaitsForRoomInsteadOfDropping(t *testing.T) {
	a := newTestNIC(t, "a", macA, 1)
	b := newWaitingNIC(t, "b", macB, time.Hour)
	a.SetUplink(b)
	ga, gb := attach(t, a, acked1), attach(t, b, acked1)
	// B's RX ring holds one frame while it waits for buffers; the queue
	// holds rxQueueDepth; the next frame must wait in A's TX path.
	total := rxQueueDepth + 1 + 3
	frames := make([][]byte, total)
	for i := range frames {
		frames[i] = ethFrame(macB, macA, 0x0800, fmt.Sprintf("frame %d", i))
	}
	ga.Send(0, frames[:200]...) // the TX ring has testRingSize slots
	if !ga.Qs[1].WaitUsed(200, failsafe) {
		t.Fatal("A's TX ring did not drain")
	}
	ga.Send(0, frames[200:]...)
	waitCount(t, &b.Counters().RxWaits, 1)
	if d := b.Counters().RxQueueFull.Load(); d != 0 {
		t.Fatalf("RxQueueFull = %d while a sender could wait", d)
	}
	gb.PostRX(0, testRingSize)
	got := gb.RecvN(0, 200)
	gb.PostRX(0, 100)
	got = append(got, gb.RecvN(0, total-200)...)
	for i, f := range got {
		if want := fmt.Sprintf("frame %d", i); string(f[l2.HeaderLen:]) != want {
			t.Fatalf("frame %d = %q, want %q", i, f[l2.HeaderLen:], want)
		}
	}
	if c := b.Counters(); c.RxQueueFull.Load() != 0 || c.RxWaitTimeouts.Load() != 0 {
		t.Fatalf("drops: %v", c.Set().Snapshot())
	}
}

// A guest that never posts buffers costs its senders one bounded wait, not
// one per frame; the next RX progress re-arms waiting.
func TestStuckReceiverCostsOneWait(t *testing.T) {
	b := newWaitingNIC(t, "b", macB, time.Nanosecond)
	gb := attach(t, b, acked1)
	c := b.Counters()
	f := ethFrame(macB, macA, 0x0800, "x")
	// The RX ring takes the first frame and holds it, waiting for buffers;
	// only then is the queue's room known (delivering rxQueueDepth+1 at
	// once could fill the queue before the ring took one).
	b.DeliverPatient(f)
	waitCount(t, &c.RxGuestNoBufs, 1)
	for range rxQueueDepth - len(b.rxq[0]) {
		b.DeliverPatient(f)
	}
	if c.RxWaits.Load() != 0 {
		t.Fatalf("waited %d times with room in the queue", c.RxWaits.Load())
	}
	b.DeliverPatient(f)
	b.DeliverPatient(f)
	b.DeliverPatient(f)
	if c.RxWaits.Load() != 1 || c.RxWaitTimeouts.Load() != 1 || c.RxQueueFull.Load() != 3 {
		t.Fatalf("after a stuck wait: %v", c.Set().Snapshot())
	}
	gb.PostRX(0, testRingSize)
	gb.RecvN(0, 200)
	gb.PostRX(0, 100)
	gb.RecvN(0, rxQueueDepth+1-200)
	if b.rxStalled[0].Load() {
		t.Fatal("RX progress did not re-arm waiting")
	}
}

// flipper is an uplink during whose Deliver the guest rewrites the frame
// it sent (a TOCTOU attacker on another vCPU).
type flipper struct {
	recorder
	flip func()
}

func (f *flipper) Deliver(b []byte) {
	f.flip()
	f.recorder.Deliver(b)
}

// TestAdversarialTXFrameFlippedAfterTheChecks (finding 4): a guest that
// rewrites its one-descriptor TX frame into a control-channel frame with
// another NIC's source after the NIC checked it cannot change what the
// switch forwards: the NIC copied the frame before checking it.
func TestAdversarialTXFrameFlippedAfterTheChecks(t *testing.T) {
	n := newTestNIC(t, "n", macA, 1)
	g := attach(t, n, acked1)
	q := g.Qs[1]
	f := ethFrame(macB, macA, 0x0800, "an ordinary frame")
	i, _ := q.Peek()
	buf := q.Buf(i)
	copy(buf[netHdrLen:], f)
	up := &flipper{flip: func() {
		copy(buf[netHdrLen+6:], macB)
		binary.BigEndian.PutUint16(buf[netHdrLen+12:], l2.EtherTypeControl)
	}}
	n.SetUplink(up)
	if _, err := q.Add([]vhostusertest.Seg{{GPA: q.BufGPAOf(i), Len: uint32(netHdrLen + len(f))}}); err != nil {
		t.Fatal(err)
	}
	q.Publish()
	q.Kick()
	if got := up.wait(t, 1); !bytes.Equal(got[0], f) {
		t.Fatalf("the switch was handed %x, the guest sent %x", got[0], f)
	}
}
