package falcon

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// A packet that exhausts its retransmissions becomes a Resync (code 0x3):
// the target skips that RSN, later RSNs still flow, and the initiator
// completes the transaction with kCmplLocalTO [S §11].
func TestRetryExhaustionResyncs(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1,
		TxDataPSN: 300, RxReqPSN: 7, MaxRetries: 2, InitRTO: 100 * time.Microsecond})
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.autoLose = func(dir, desc string) bool { return strings.HasPrefix(desc, "PushData psn=300") }
	s.ca.Push(1, pattern(1, 8))
	s.wait(750 * time.Microsecond) // RTO 100, 200, 400 µs: exhausted at 700 µs
	s.autoLose = nil
	s.ca.Push(2, pattern(2, 8))
	s.settle()
	s.check(`
A→B PushData psn=300 rsn=1 ar=0 len=8 (lost)
A→B PushData psn=300 rsn=1 ar=1 len=8 (lost)
A→B PushData psn=300 rsn=1 ar=1 len=8 (lost)
A→B Resync psn=300 rsn=1 code=RetransmitError of=PushData ar=1
A→B PushData psn=301 rsn=2 ar=0 len=8
B: deliver push rsn=2 len=8
B→A BACK rbase=0 dbase=301
A: complete push rsn=1 local-timeout len=0
B→A BACK rbase=0 dbase=302
A: complete push rsn=2 ok len=0
`)
	if s.ca.Stats.RetryExhausted.Load() != 1 {
		t.Error("exhaustion not counted")
	}
}

// A Resync that exhausts its attempts kills the connection: every
// outstanding transaction completes with kCmplDeadConn and later frames are
// dropped and counted.
func TestResyncExhaustionIsFatal(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1, MaxRetries: 1, InitRTO: 100 * time.Microsecond})
	s.ca.Push(1, pattern(1, 8))
	s.ca.Pull(2, 8)
	for i := 0; i < 12 && !s.ca.Dead(); i++ {
		for len(s.q) > 0 {
			s.lose(0)
		}
		s.wait(time.Millisecond)
	}
	if !s.ca.Dead() {
		t.Fatal("connection survived")
	}
	if len(s.ua.cpls) != 2 || s.ua.cpls[0].Status != tl.CmplDeadConn || s.ua.cpls[1].Status != tl.CmplDeadConn {
		t.Fatalf("completions %+v", s.ua.cpls)
	}
	if _, err := s.ca.Push(3, nil); !errors.Is(err, ErrDead) {
		t.Errorf("push on a dead connection: %v", err)
	}
	s.a.Receive(pushFrame(1, 0, nil), 0)
	if s.a.Stats.RxDeadConn.Load() != 1 {
		t.Error("frame for a dead connection not counted")
	}
}

// A target without room refuses a request with a resource NACK (code 1),
// without touching its window; the initiator retransmits later and the
// request gets in once room frees up.
func TestResourceNack(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TxRSN: 1, RxRSN: 1, TxDataPSN: 300})
	s.b.res = tl.NewResources(tl.Limits{CellSize: 256, RxNetPkts: 1, RxNetCells: 64, TxReqPkts: 8, TxReqCells: 64,
		TxDataPkts: 8, TxDataCell: 64, RxReqPkts: 8, RxReqCells: 64})
	var held []wire.RSN
	s.ub.onReq = func(c *Conn, r *Request) { held = append(held, r.RSN) }
	s.ca.Push(1, pattern(1, 8))
	s.ca.Push(2, pattern(2, 8))
	s.deliver(0)
	s.deliver(0)
	s.deliver(0) // the NACK
	s.cb.AckPush(held[0])
	s.settle()
	s.wait(1500 * time.Microsecond) // the resend one RTO after the NACK
	s.settle()
	s.cb.AckPush(held[1])
	s.settle()
	s.check(`
A→B PushData psn=300 rsn=1 ar=0 len=8
B: deliver push rsn=1 len=8
A→B PushData psn=301 rsn=2 ar=0 len=8
B→A NACK code=InsufficientResources psn=301 w=data
B→A BACK rbase=0 dbase=301
A: complete push rsn=1 ok len=0
A→B PushData psn=301 rsn=2 ar=1 len=8
B: deliver push rsn=2 len=8
B→A EACK rbase=0 dbase=301 req=0 dack=0 drx=0b1
B→A BACK rbase=0 dbase=302
A: complete push rsn=2 ok len=0
`)
	if s.cb.Stats.RxNoResource.Load() != 1 {
		t.Error("resource drop not counted")
	}
}

// A full transaction table refuses submissions with ErrXoff and says Xon
// when a completion frees a slot.
func TestXoffXon(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, MaxTxns: 2})
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	for i := 0; i < 2; i++ {
		if _, err := s.ca.Push(uint64(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ca.Push(9, nil); !errors.Is(err, ErrXoff) {
		t.Fatalf("third push: %v, want ErrXoff", err)
	}
	s.settle()
	if s.ua.xon != 1 || s.ca.Stats.Xoff.Load() != 1 {
		t.Errorf("xon %d xoff %d", s.ua.xon, s.ca.Stats.Xoff.Load())
	}
	if _, err := s.ca.Push(9, nil); err != nil {
		t.Errorf("after Xon: %v", err)
	}
}

// A completion frees its transaction's slot before the ULP hears of it:
// a ULP that submits from OnCompletion on a full table is not refused,
// needs no Xon, and its submissions keep the order it made them in.
func TestSubmitFromCompletion(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		s := newScript(t, ConnConfig{SCID: 1, DCID: 2, MaxTxns: 2, Ordered: ordered})
		s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
		next, refused := uint64(2), 0
		s.ua.onCpl = func(c *Conn, cpl *Completion) {
			if next == 6 {
				return
			}
			if _, err := c.Push(next, []byte{byte(next)}); err != nil {
				refused++
				return
			}
			next++
		}
		for i := uint64(0); i < 2; i++ {
			if _, err := s.ca.Push(i, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		s.settle()
		if refused != 0 || s.ca.Stats.Xoff.Load() != 0 || s.ua.xon != 0 {
			t.Errorf("ordered=%v: %d submissions from OnCompletion refused, xoff %d, xon %d", ordered, refused, s.ca.Stats.Xoff.Load(), s.ua.xon)
		}
		if len(s.ua.cpls) != 6 {
			t.Fatalf("ordered=%v: %d completions, want 6", ordered, len(s.ua.cpls))
		}
		for i, cpl := range s.ua.cpls {
			if cpl.Cookie != uint64(i) || cpl.Status != tl.CmplAck {
				t.Errorf("ordered=%v: completion %d is cookie %d %v", ordered, i, cpl.Cookie, cpl.Status)
			}
		}
	}
}

// A pull completed from a copy held for ordered completion hands the ULP
// the data intact even when the ULP reuses the freed slot at once.
func TestHeldPullDataSurvivesResubmit(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, MaxTxns: 2, Ordered: true})
	s.ub.onReq = func(c *Conn, r *Request) { c.PullData(r.RSN, pattern(r.RSN, int(r.Length))) }
	var got [][]byte
	s.ua.onCpl = func(c *Conn, cpl *Completion) {
		if len(got) < 2 {
			if _, err := c.Pull(9, 64); err != nil {
				t.Errorf("pull from OnCompletion: %v", err)
			}
		}
		got = append(got, append([]byte(nil), cpl.Data...))
	}
	for i := 0; i < 2; i++ {
		if _, err := s.ca.Pull(uint64(i), 64); err != nil {
			t.Fatal(err)
		}
	}
	// Both Pull Requests reach B; its Pull Data for RSN 1 overtakes RSN 0's,
	// so A holds a copy of RSN 1's data until RSN 0 completes.
	s.deliver(0)
	s.deliver(0)
	s.deliver(1)
	s.deliver(0)
	s.settle()
	if len(got) != 4 {
		t.Fatalf("%d completions, want 4", len(got))
	}
	for i, d := range got {
		if want := pattern(s.ca.cfg.TxRSN.Add(uint32(i)), 64); !bytes.Equal(d, want) {
			t.Errorf("completion %d: data is not the pattern of its RSN", i)
		}
	}
}

// The target ULP's invalid-CID verdict on a push completes it in error after
// the Resync, and the connection continues.
func TestPushInvalidCIDVerdict(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true})
	first := true
	s.ub.onReq = func(c *Conn, r *Request) {
		if first {
			first = false
			c.NackPush(r.RSN, wire.NackInvalidCID, 0, 0)
			return
		}
		c.AckPush(r.RSN)
	}
	s.ca.Push(1, nil)
	s.ca.Push(2, nil)
	s.settle()
	if len(s.ua.cpls) != 2 || s.ua.cpls[0].Status != tl.CmplTargetNackCID || s.ua.cpls[1].Status != tl.CmplAck {
		t.Fatalf("completions %+v", s.ua.cpls)
	}
}

// A tail loss is repaired by the TLP probe long before the RTO.
func TestTLPRepairsTailLoss(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TLP: true, InitRTO: 10 * time.Millisecond})
	rec := &recRUE{}
	s.a.cfg.RUE = rec
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.ca.Push(1, nil)
	s.deliver(0)
	s.wait(10 * time.Microsecond) // coalesced ACK: an 8 µs RTT sample
	s.deliver(0)
	s.ca.Push(2, nil)
	s.lose(0)
	s.wait(100 * time.Microsecond)
	s.settle()
	if s.ca.Stats.RetxTLP.Load() != 1 || s.ca.Stats.RetxRTO.Load() != 0 || len(s.ua.cpls) != 2 {
		t.Errorf("tlp %d rto %d completions %d", s.ca.Stats.RetxTLP.Load(), s.ca.Stats.RetxRTO.Load(), len(s.ua.cpls))
	}
	if got := rec.retx(); got != "TLP" || s.ca.Stats.RUERetxEvents[rue.RetxTLP].Load() != 1 {
		t.Errorf("RETX events %q, want one for the TLP probe", got)
	}
}

// recRUE records events and answers with the event's own values.
type recRUE struct{ evs []rue.Event }

func (r *recRUE) Handle(ev *rue.Event) (rue.Response, bool) {
	r.evs = append(r.evs, *ev)
	return rue.Response{Conn: ev.Conn, Flow: ev.Flow, Fcwnd: ev.Fcwnd, Ncwnd: ev.Ncwnd, RTO: ev.RTO}, true
}

// retx lists the reasons of the RETX events seen.
func (r *recRUE) retx() string {
	var out []string
	for _, e := range r.evs {
		if e.Type == rue.EventRetx {
			out = append(out, [...]string{"RTO", "early", "RACK", "TLP"}[e.RetxReason])
		}
	}
	return strings.Join(out, ",")
}

// fixedRUE answers every event with one response.
type fixedRUE struct{ r rue.Response }

func (f *fixedRUE) Handle(ev *rue.Event) (rue.Response, bool) {
	r := f.r
	r.Conn = ev.Conn
	return r, true
}

// Below one packet of fcwnd the transmitter keeps one packet in flight and
// spaces departures by the inter-packet gap [S §10.3.5].
func TestPacingBelowOnePacket(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, InitFcwnd: rue.One / 2})
	s.a.cfg.RUE = &fixedRUE{rue.Response{Fcwnd: rue.One / 2, Ncwnd: 8, IPG: 50 * time.Microsecond}}
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	for i := 0; i < 3; i++ {
		s.ca.Push(uint64(i), nil)
	}
	if len(s.q) != 1 {
		t.Fatalf("%d packets in flight at fcwnd 0.5, want 1", len(s.q))
	}
	var times []time.Duration
	for len(s.ua.cpls) < 3 {
		if len(s.q) > 0 && s.q[0].dir == "A→B" {
			times = append(times, s.clk.Now())
		}
		s.flushAll()
		s.wait(5 * time.Microsecond)
		if s.clk.Now() > 10*time.Millisecond {
			t.Fatal("stalled")
		}
	}
	for i := 1; i < len(times); i++ {
		if d := times[i] - times[i-1]; d < 50*time.Microsecond {
			t.Errorf("departures %v apart, want ≥ 50 µs (IPG)", d)
		}
	}
}

// A paced connection's tail-loss probe leaves through the pacing gap like
// any departure [S §10.3.5]: not one PTO after the lost packet, but one IPG
// after it, so probes under an incast add nothing to the rate the RUE set.
func TestTLPProbeWaitsForThePacingGap(t *testing.T) {
	const ipg = 400 * time.Microsecond
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TLP: true, InitFcwnd: rue.One / 4,
		InitRTO: 5 * time.Millisecond, MinRTO: 5 * time.Millisecond})
	s.a.cfg.RUE = &fixedRUE{rue.Response{Fcwnd: rue.One / 4, Ncwnd: 8, IPG: ipg, RTO: 5 * time.Millisecond}}
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.pushAcked(1) // an RTT sample: PTO = 50 µs
	s.wait(ipg)    // the gap after push 1 has passed
	lost := false
	var sends []time.Duration
	s.autoLose = func(dir, desc string) bool {
		if dir != "A→B" {
			return false
		}
		sends = append(sends, s.clk.Now())
		if !lost { // push 2's first transmission
			lost = true
			return true
		}
		return false
	}
	s.ca.Push(2, nil)
	for s.clk.Now() < 3*time.Millisecond && len(s.ua.cpls) < 2 {
		s.wait(10 * time.Microsecond)
		s.flushAll()
	}
	s.settle()
	if len(s.ua.cpls) != 2 || len(sends) < 2 {
		t.Fatalf("%d completions, %d sends of push 2; want 2 and a probe", len(s.ua.cpls), len(sends))
	}
	if d := sends[1] - sends[0]; d < ipg {
		t.Errorf("probe %v after the lost packet, want ≥ the %v gap", d, ipg)
	}
	if s.ca.Stats.RetxTLP.Load() != 1 || s.ca.Stats.RetxRTO.Load() != 0 || s.ca.Stats.TLPPaced.Load() == 0 {
		t.Errorf("tlp %d rto %d tlp_paced %d, want 1, 0, > 0", s.ca.Stats.RetxTLP.Load(),
			s.ca.Stats.RetxRTO.Load(), s.ca.Stats.TLPPaced.Load())
	}
}

// A pull whose Pull Data never comes (the target ULP never answers) is timed
// out by the TL with kCmplLocalTO; Pull Data that turns up later is acked
// and discarded.
func TestPullTimeout(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, PullTimeout: 500 * time.Microsecond, PullReclaim: -1})
	var rsn wire.RSN
	s.ub.onReq = func(c *Conn, r *Request) { rsn = r.RSN }
	s.ca.Pull(1, 16)
	s.settle()
	s.wait(time.Millisecond)
	if len(s.ua.cpls) != 1 || s.ua.cpls[0].Status != tl.CmplLocalTO {
		t.Fatalf("completions %+v", s.ua.cpls)
	}
	s.cb.PullData(rsn, pattern(rsn, 16))
	s.settle()
	if s.ca.Stats.RxLatePullData.Load() != 1 || !s.ca.Idle() || !s.cb.Idle() {
		t.Errorf("late data %d, idle %v/%v", s.ca.Stats.RxLatePullData.Load(), s.ca.Idle(), s.cb.Idle())
	}
}

// The target reclaims a delivered pull its ULP never answers (soft state,
// F-TL-6): the slot and its resources return; a late answer is refused.
func TestPullReclaim(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, PullTimeout: 500 * time.Microsecond, PullReclaim: 2 * time.Millisecond})
	var rsn wire.RSN
	s.ub.onReq = func(c *Conn, r *Request) { rsn = r.RSN }
	s.ca.Pull(1, 16)
	s.settle()
	s.wait(3 * time.Millisecond)
	if s.cb.Stats.PullReclaimed.Load() != 1 || s.b.Resources().RxNet.Pkt.Used != 0 {
		t.Fatalf("reclaimed %d, rx-net used %d", s.cb.Stats.PullReclaimed.Load(), s.b.Resources().RxNet.Pkt.Used)
	}
	if err := s.cb.PullData(rsn, nil); !errors.Is(err, ErrNoSuchTxn) {
		t.Errorf("late answer: %v", err)
	}
	if len(s.ua.cpls) != 1 || s.ua.cpls[0].Status != tl.CmplLocalTO {
		t.Errorf("completions %+v", s.ua.cpls)
	}
}

// An EACK with D-OWN makes the transmitter resend every outstanding packet
// the receiver has not reported, at most once per RTT [S §9.1.4].
func TestEACKOWNRetransmits(t *testing.T) {
	e, c, out := newLone(t)
	for i := 0; i < 4; i++ {
		c.Push(uint64(i), []byte("x"))
	}
	if len(out.frames) != 4 {
		t.Fatalf("sent %d", len(out.frames))
	}
	e.cfg.Clock.(*clock.Manual).Advance(20 * time.Microsecond)
	f := wire.AckFields{CID: 5, DataBase: 1000, ReqBase: 0, OWNData: true,
		T1: wire.TimestampAt(e.Now() - 10*time.Microsecond), T2: 1,
		DataAck: wire.NewBitmap(128), DataRx: wire.NewBitmap(128), Req: wire.NewBitmap(64)}
	f.DataRx.Set(1) // PSN 1001 received
	eack := wire.AppendEACK(make([]byte, 0, 96), &f)
	e.Receive(seal(eack, wire.TimestampAt(e.Now())), 0)
	var resent []string
	for _, fr := range out.frames[4:] {
		b, _, _ := open(fr)
		resent = append(resent, Describe(b))
	}
	want := []string{"PushData psn=1000 rsn=0 ar=1 len=1", "PushData psn=1002 rsn=2 ar=1 len=1", "PushData psn=1003 rsn=3 ar=1 len=1"}
	if strings.Join(resent, "|") != strings.Join(want, "|") {
		t.Errorf("resent %q, want %q", resent, want)
	}
	if c.Stats.RetxOWN.Load() != 3 {
		t.Errorf("own retransmissions %d", c.Stats.RetxOWN.Load())
	}
	// The same EACK again within the RTT resends nothing.
	e.Receive(seal(eack, wire.TimestampAt(e.Now())), 0)
	if len(out.frames) != 7 {
		t.Errorf("resent again within an RTT: %d frames", len(out.frames))
	}
}

// With several flows, new packets take the flows' labels in round robin and
// the connection's fabric window is the sum of the flows' windows.
func TestMultipathFlows(t *testing.T) {
	e, c, _ := newLone(t)
	var labels []uint32
	e.SetLink(linkFunc(func(pkt []byte, flow uint32) { labels = append(labels, flow) }))
	c2, err := e.Connect(ConnConfig{SCID: 6, DCID: 9, Flows: 3, InitFcwnd: 4 * rue.One,
		FlowLabels: [4]uint32{0x12340, 0x56781, 0x9abc2}})
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	for i := 0; i < 4; i++ {
		c2.Push(uint64(i), nil)
	}
	want := []uint32{0x12340, 0x56781, 0x9abc2, 0x12340}
	if len(labels) != 4 || labels[0] != want[0] || labels[1] != want[1] || labels[2] != want[2] || labels[3] != want[3] {
		t.Errorf("labels %x, want %x", labels, want)
	}
	if c2.Fcwnd() != 12*rue.One {
		t.Errorf("fcwnd %v, want 12 (3 flows × 4)", c2.Fcwnd())
	}
	if c2.flowOf(0x9abc2) != 2 {
		t.Error("flow id is not the label's low bits")
	}
}

type linkFunc func(pkt []byte, flow uint32)

func (f linkFunc) Send(pkt []byte, flow uint32) { f(pkt, flow) }

// Close completes everything outstanding with kCmplDeadConn, returns the
// resources and frees the CID; frames for it then get the invalid-CID NACK.
func TestCloseTearsDown(t *testing.T) {
	e, c, out := newLone(t)
	c.Push(1, []byte("abc"))
	c.Pull(2, 100)
	if err := e.Close(5); err != nil {
		t.Fatal(err)
	}
	cpls := e.cfg.ULP.(*recULP).cpls
	if len(cpls) != 2 || cpls[0].Status != tl.CmplDeadConn || cpls[1].Status != tl.CmplDeadConn {
		t.Fatalf("completions %+v", cpls)
	}
	r := e.Resources()
	if r.TxReq.Pkt.Used != 0 || r.RxReq.Buf.Used != 0 {
		t.Error("resources not returned")
	}
	if e.Close(5) == nil || e.Conn(5) != nil {
		t.Error("closed twice")
	}
	n := len(out.frames)
	e.Receive(pushFrame(5, 2000, nil), 0)
	if len(out.frames) != n+1 || e.Stats.TxInvalidCIDNack.Load() != 1 {
		t.Error("no invalid-CID NACK after close")
	}
	if _, err := e.Connect(ConnConfig{SCID: 5, DCID: 9}); err != nil {
		t.Errorf("CID not reusable: %v", err)
	}
}

// A connection's Peer link overrides the endpoint's.
func TestPeerLink(t *testing.T) {
	e, _, out := newLone(t)
	var got int
	c, _ := e.Connect(ConnConfig{SCID: 8, DCID: 1, Peer: linkFunc(func([]byte, uint32) { got++ })})
	n := len(out.frames)
	c.Push(0, nil)
	if got != 1 || len(out.frames) != n {
		t.Errorf("peer link got %d, endpoint link %d", got, len(out.frames)-n)
	}
}

// RACK: an unreceived packet sent before the newest acknowledged one and
// older than RTT plus a quarter-RTT reorder window is presumed lost.
func TestRACK(t *testing.T) {
	e, c, out := newLone(t)
	c.cfg.RACK = true
	rec := &recRUE{}
	e.cfg.RUE = rec
	clk := e.cfg.Clock.(*clock.Manual)
	for i := 0; i < 3; i++ {
		c.Push(uint64(i), []byte("x"))
		clk.Advance(10 * time.Microsecond)
	}
	clk.Advance(40 * time.Microsecond) // RTT sample 50 µs: RACK waits 62.5 µs
	f := wire.AckFields{CID: 5, DataBase: 1000, T1: wire.TimestampAt(time.Millisecond + 20*time.Microsecond), T2: 1,
		DataAck: wire.NewBitmap(128), DataRx: wire.NewBitmap(128), Req: wire.NewBitmap(64)}
	f.DataAck.Set(2)
	f.DataRx.Set(2)
	e.Receive(seal(wire.AppendEACK(nil, &f), wire.TimestampAt(e.Now())), 0)
	if c.Stats.RetxRACK.Load() != 1 || len(out.frames) != 4 {
		t.Fatalf("rack %d, frames %d", c.Stats.RetxRACK.Load(), len(out.frames))
	}
	if got := rec.retx(); got != "RACK" {
		t.Errorf("RETX events %q, want one for the RACK retransmission", got)
	}
	b, _, _ := open(out.frames[3])
	if got := Describe(b); got != "PushData psn=1000 rsn=0 ar=1 len=1" {
		t.Errorf("resent %q, want PSN 1000 (sent 70 µs ago; PSN 1001, 60 µs, is still within RTT + RTT/4)", got)
	}
}

// On an ordered connection timed-out requests are resent in RSN order across
// both windows (UR rule), not window by window.
func TestOrderedRetransmitsInRSNOrder(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1, TxReqPSN: 100, TxDataPSN: 300})
	s.autoLose = func(dir, desc string) bool { return true }
	s.ca.Pull(1, 8)
	s.ca.Push(2, nil)
	s.ca.Pull(3, 8)
	s.wait(1100 * time.Microsecond)
	s.check(`
A→B PullRequest psn=100 rsn=1 ar=0 (lost)
A→B PushData psn=300 rsn=2 ar=0 (lost)
A→B PullRequest psn=101 rsn=3 ar=0 (lost)
A→B PullRequest psn=100 rsn=1 ar=1 (lost)
A→B PushData psn=300 rsn=2 ar=1 (lost)
A→B PullRequest psn=101 rsn=3 ar=1 (lost)
`)
}

// A push the target holds for its (slow) ULP is reported received in EACKs;
// the initiator then resends it at the ULP-RTO pace without spending
// retransmission attempts, so it completes fine when the ULP finally acks.
func TestSlowULPDoesNotExhaust(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, MaxRetries: 2, InitRTO: 100 * time.Microsecond, ULPRTO: time.Millisecond})
	var held wire.RSN
	s.ub.onReq = func(c *Conn, r *Request) { held = r.RSN }
	s.ca.Push(1, nil)
	for i := 0; i < 40; i++ { // 40 ms of a ULP that does not answer
		s.settle()
		s.wait(time.Millisecond)
	}
	if s.ca.Stats.RetryExhausted.Load() != 0 || len(s.ua.cpls) != 0 {
		t.Fatalf("exhausted %d, completions %+v", s.ca.Stats.RetryExhausted.Load(), s.ua.cpls)
	}
	s.cb.AckPush(held)
	s.settle()
	if len(s.ua.cpls) != 1 || s.ua.cpls[0].Status != tl.CmplAck {
		t.Fatalf("completions %+v", s.ua.cpls)
	}
}

// A Pull Request carries the ULP's request headers to the target, also on
// redelivery after RNR.
func TestPullHeader(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true})
	var seen []string
	s.ub.onReq = func(c *Conn, r *Request) {
		seen = append(seen, string(r.Payload))
		if len(seen) == 1 {
			c.NackPull(r.RSN, 1)
			return
		}
		c.PullData(r.RSN, r.Payload) // echo the header back as data
	}
	if _, err := s.ca.PullHeader(7, 16, []byte("RETH:va=1,rkey=2")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		s.settle()
		s.wait(20 * time.Microsecond)
	}
	if len(seen) != 2 || seen[0] != "RETH:va=1,rkey=2" || seen[1] != seen[0] {
		t.Fatalf("target saw %q", seen)
	}
	if len(s.ua.cpls) != 1 || string(s.ua.cpls[0].Data) != "RETH:va=1,rkey=2" {
		t.Fatalf("completions %+v", s.ua.cpls)
	}
}

// Transactions are at most one MTU [S §6.1].
func TestMTULimit(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, MTU: 1000})
	s.ub.onReq = func(c *Conn, r *Request) {
		if r.Kind == tl.Pull {
			if err := c.PullData(r.RSN, make([]byte, 1001)); !errors.Is(err, ErrTooLong) {
				t.Errorf("oversized Pull Data: %v", err)
			}
			c.PullData(r.RSN, make([]byte, 1000))
			return
		}
		c.AckPush(r.RSN)
	}
	if _, err := s.ca.Push(0, make([]byte, 1001)); !errors.Is(err, ErrTooLong) {
		t.Errorf("oversized push: %v", err)
	}
	if _, err := s.ca.Pull(0, 1001); !errors.Is(err, ErrTooLong) {
		t.Errorf("oversized pull: %v", err)
	}
	s.ca.Push(1, make([]byte, 1000))
	s.ca.Pull(2, 1000)
	s.settle()
	if len(s.ua.cpls) != 2 || len(s.ua.cpls[1].Data) != 1000 {
		t.Fatalf("completions %+v", s.ua.cpls)
	}
}

// Resending requests is gated by ORRC < ncwnd [S §9.1.2]: after the RUE
// shrinks ncwnd to one, only one lost request is resent at a time.
func TestRetransmitGatedByORRC(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, InitRTO: 100 * time.Microsecond})
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.autoLose = func(dir, desc string) bool { return true }
	for i := 0; i < 3; i++ {
		s.ca.Push(uint64(i), nil)
	}
	s.a.ApplyRUE(rue.Response{Conn: 1, Fcwnd: 32 * rue.One, Ncwnd: 1, RTO: 100 * time.Microsecond})
	s.wait(110 * time.Microsecond)
	if got := s.ca.Stats.RetxRTO.Load(); got != 1 {
		t.Errorf("%d resends with ncwnd 1, want 1", got)
	}
	if s.ca.Stats.RetxDeferred.Load() != 2 {
		t.Errorf("deferred %d, want 2", s.ca.Stats.RetxDeferred.Load())
	}
	s.autoLose = nil
	for i := 0; i < 40 && len(s.ua.cpls) < 3; i++ {
		s.settle()
		s.wait(100 * time.Microsecond)
	}
	if len(s.ua.cpls) != 3 {
		t.Fatalf("completions %d", len(s.ua.cpls))
	}
}

// PLB: an RUE response with randomize_path gives that flow a new label whose
// low 2 bits still name the flow [S §10.4, digest §7].
func TestPLBRepath(t *testing.T) {
	e, _, _ := newLone(t)
	var labels []uint32
	c, _ := e.Connect(ConnConfig{SCID: 7, DCID: 1, Flows: 2, FlowLabels: [4]uint32{0x11110, 0x22221},
		Peer: linkFunc(func(_ []byte, flow uint32) { labels = append(labels, flow) })})
	e.ApplyRUE(rue.Response{Conn: 7, Flow: 1, Fcwnd: 8 * rue.One, Ncwnd: 8, RandomizePath: true})
	c.Push(0, nil)
	c.Push(1, nil)
	if len(labels) != 2 || labels[0] != 0x11110 || labels[1] == 0x22221 || labels[1]&3 != 1 || labels[1] >= 1<<20 {
		t.Errorf("labels %x", labels)
	}
	if c.Stats.Repath.Load() != 1 {
		t.Error("repath not counted")
	}
}

// With TLPProbes > 1 a probe that is lost is followed by another a PTO
// later, which repairs the tail before the RTO; by default one probe goes
// out and the RTO resends the rest.
func TestTLPProbesRepeatAfterLostProbe(t *testing.T) {
	for _, tc := range []struct {
		probes        uint8
		wantTLP, wRTO uint64
	}{{0, 1, 1}, {1, 1, 1}, {3, 2, 0}} {
		s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TLP: true, TLPProbes: tc.probes,
			InitRTO: 300 * time.Microsecond, MinRTO: 300 * time.Microsecond})
		s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
		s.pushAcked(1) // an RTT sample: PTO = 50 µs
		lost := 0
		s.autoLose = func(dir, desc string) bool { // the push and the first probe
			if dir == "A→B" && lost < 2 {
				lost++
				return true
			}
			return false
		}
		s.ca.Push(2, nil)
		for range 8 { // 200 µs: past two PTOs, before the RTO
			s.wait(25 * time.Microsecond)
			s.flushAll()
		}
		tlp := s.ca.Stats.RetxTLP.Load()
		done := len(s.ua.cpls)
		s.wait(400 * time.Microsecond)
		s.settle()
		if tlp != tc.wantTLP || s.ca.Stats.RetxRTO.Load() != tc.wRTO || len(s.ua.cpls) != 2 {
			t.Errorf("TLPProbes %d: %d probes, %d RTOs, %d completions; want %d, %d, 2", tc.probes, tlp,
				s.ca.Stats.RetxRTO.Load(), len(s.ua.cpls), tc.wantTLP, tc.wRTO)
		}
		if tc.wRTO == 0 && done != 2 {
			t.Errorf("TLPProbes %d: %d completions before the RTO, want 2", tc.probes, done)
		}
	}
}

// With GateInFlight a lost packet holds one packet of fcwnd while it is
// repaired: once an EACK reports the packets after it received, new ones
// go out. The default gate [S §9.1.2] holds PSN base + fcwnd until the
// hole is filled.
func TestGateInFlightHoleHoldsOnePacket(t *testing.T) {
	for _, tc := range []struct {
		inFlight bool
		want     int // data packets A sends after the EACK
	}{{false, 0}, {true, 3}} {
		s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, InitFcwnd: 4 * rue.One,
			InitRTO: time.Millisecond, MinRTO: time.Millisecond, GateInFlight: tc.inFlight})
		s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
		for i := range 8 {
			s.ca.Push(uint64(i), []byte{byte(i)})
		}
		if len(s.q) != 4 {
			t.Fatalf("in flight %v: %d packets before any ACK, want 4 (fcwnd)", tc.inFlight, len(s.q))
		}
		s.lose(0)
		for range 3 {
			s.deliver(0)
		}
		s.wait(10 * time.Microsecond) // B's coalescing timer: an EACK with a hole
		if len(s.q) != 1 || !strings.HasPrefix(s.line(s.q[0], false), "B→A EACK") {
			t.Fatalf("in flight %v: queue after the timer %d frames, want B's EACK", tc.inFlight, len(s.q))
		}
		s.deliver(0)
		sent := 0
		for _, f := range s.q {
			if strings.HasPrefix(s.line(f, false), "A→B PushData") {
				sent++
			}
		}
		if sent != tc.want || s.ca.Stats.RetxEarly.Load()+s.ca.Stats.RetxRTO.Load() != 0 {
			t.Errorf("in flight %v: %d new packets after the EACK, want %d (retransmissions %d)", tc.inFlight, sent, tc.want,
				s.ca.Stats.RetxEarly.Load()+s.ca.Stats.RetxRTO.Load())
		}
	}
}

// With GateInFlight, packets the receiver holds for its ULP (received in
// order, not yet acknowledged by it: a slow host) still hold the window;
// only packets past a hole are set aside. Without that, a slow receiver
// would be sent fcwnd more packets on every ACK that reported its held
// ones received.
func TestGateInFlightHeldPacketsKeepTheWindow(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, InitFcwnd: 4 * rue.One,
		InitRTO: time.Millisecond, MinRTO: time.Millisecond, GateInFlight: true})
	var held []wire.RSN
	s.ub.onReq = func(c *Conn, r *Request) { held = append(held, r.RSN) } // the ULP does not acknowledge yet
	for i := range 8 {
		s.ca.Push(uint64(i), []byte{byte(i)})
	}
	for range 4 {
		s.deliver(0)
	}
	// fromB delivers B's queued frames to A and counts them; sent counts
	// the Push Data A then has queued.
	fromB := func() (n int) {
		for ; len(s.q) > 0 && strings.HasPrefix(s.line(s.q[0], false), "B→A"); n++ {
			s.deliver(0)
		}
		return n
	}
	sent := func() (n int) {
		for _, f := range s.q {
			if strings.HasPrefix(s.line(f, false), "A→B PushData") {
				n++
			}
		}
		return n
	}
	s.wait(10 * time.Microsecond) // B's coalescing timer
	if acks, sent := fromB(), sent(); len(held) != 4 || acks == 0 || sent != 0 {
		t.Fatalf("%d requests held by B's ULP, %d frames from B, %d new packets from A; want 4, some, 0", len(held), acks, sent)
	}
	// The ULP catches up: the window opens again.
	for _, rsn := range held {
		s.cb.AckPush(rsn)
	}
	s.wait(10 * time.Microsecond)
	fromB()
	if n := sent(); n != 4 {
		t.Errorf("%d new packets after B's ULP acknowledged, want 4; transcript:\n%s", n, strings.Join(s.log, "\n"))
	}
}

// After a host stall (the clock jumps past every loss timer while nothing
// runs), Resumed restarts the due timers instead of letting the first
// timer pass resend a window the peer holds; a loss inside the stall is
// still recovered, one timeout after the resume. Without Resumed the
// same stall resends the window on RTO.
func TestResumedRestartsLossTimersAfterAStall(t *testing.T) {
	const rto = time.Millisecond
	for _, resumed := range []bool{true, false} {
		s := newScript(t, ConnConfig{SCID: 1, DCID: 2, TLP: true, InitRTO: rto, MinRTO: rto})
		s.a.cfg.RUE = &fixedRUE{rue.Response{Fcwnd: 32 * rue.One, Ncwnd: 64, RTO: rto}}
		s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
		s.pushAcked(1)
		for cookie := uint64(2); cookie <= 9; cookie++ {
			s.ca.Push(cookie, nil)
		}
		s.lose(len(s.q) - 1) // push 9 is lost on the wire
		stall := func() {
			now := s.clk.Now() + 5*time.Millisecond
			s.clk.Set(now) // nothing ran meanwhile: no ACK could be sent or handled
			if resumed {
				s.a.Resumed(now)
				s.b.Resumed(now)
			}
			s.a.OnTimer(now)
			s.b.OnTimer(now)
		}
		stall()
		st := &s.ca.Stats
		if resumed {
			if st.RetxRTO.Load() != 0 || st.RetxTLP.Load() != 0 || st.RTOResumed.Load() != 8 || st.TLPResumed.Load() != 1 {
				t.Fatalf("resumed: retx_rto %d retx_tlp %d rto_resumed %d tlp_resumed %d, want 0 0 8 1",
					st.RetxRTO.Load(), st.RetxTLP.Load(), st.RTOResumed.Load(), st.TLPResumed.Load())
			}
		} else if st.RetxRTO.Load() != 8 {
			t.Fatalf("not resumed: retx_rto %d, want the 8 packets in flight", st.RetxRTO.Load())
		}
		s.settle() // the held pushes arrive, their ACKs come back
		if resumed && st.RetxRTO.Load()+st.RetxTLP.Load()+st.RetxRACK.Load() != 0 {
			t.Fatalf("resends before the timeout after the resume: rto %d tlp %d rack %d",
				st.RetxRTO.Load(), st.RetxTLP.Load(), st.RetxRACK.Load())
		}
		for end := s.clk.Now() + 10*rto; len(s.ua.cpls) < 9 && s.clk.Now() < end; {
			s.wait(10 * time.Microsecond)
			s.flushAll()
		}
		s.settle()
		if len(s.ua.cpls) != 9 || !s.ca.Idle() {
			t.Fatalf("resumed %v: %d of 9 pushes completed, idle %v", resumed, len(s.ua.cpls), s.ca.Idle())
		}
	}
}

// newSampledScript returns a script whose A hands its RUE events to the
// returned recorder, whose B acknowledges pushes, and whose first push
// was acknowledged; loss timers are far off (50 ms).
func newSampledScript(t *testing.T) (*script, *cuttingRUE) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, InitRTO: 50 * time.Millisecond, MinRTO: 50 * time.Millisecond})
	r := &cuttingRUE{fcwnd: 32 * rue.One}
	s.a.cfg.RUE = r
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.pushAcked(1)
	return s, r
}

// The ACKs of packets sent before a host stall carry the stall in their
// delay: after Resumed they reach the RUE without timestamps (no delay
// sample) and stay out of the RTT estimate, and packets sent after the
// resume are sampled again. Without Resumed the RUE sees the stall as a
// 5 ms delay.
func TestStallDelaySamplesAreKeptFromTheRUE(t *testing.T) {
	const stall = 5 * time.Millisecond
	for _, resumed := range []bool{true, false} {
		s, r := newSampledScript(t)
		for cookie := uint64(2); cookie <= 5; cookie++ {
			s.ca.Push(cookie, nil)
		}
		now := s.clk.Now() + stall
		s.clk.Set(now) // the host ran neither endpoint: the pushes wait on the wire
		if resumed {
			s.a.Resumed(now)
			s.b.Resumed(now)
		}
		before := len(r.events)
		s.settle()
		var sampled, blank int
		for _, ev := range r.events[before:] {
			if ev.Type != rue.EventACK {
				continue
			}
			if ev.T1 == 0 && ev.T2 == 0 {
				blank++
				continue
			}
			sampled++
			if d := wire.Timestamp(ev.T4).Sub(wire.Timestamp(ev.T1)); d < stall {
				t.Errorf("resumed %v: a sampled ACK's round trip is %v, shorter than the stall", resumed, d)
			}
		}
		stalled := s.ca.Stats.DelayStalled.Load()
		if resumed && (sampled != 0 || blank == 0 || stalled == 0) {
			t.Fatalf("resumed: %d sampled and %d blank ACK events, delay_stalled %d; want 0, some, some", sampled, blank, stalled)
		}
		if !resumed && (sampled == 0 || stalled != 0) {
			t.Fatalf("not resumed: %d sampled ACK events, delay_stalled %d; want some, 0", sampled, stalled)
		}
		// One 5 ms sample lifts the smoothed RTT (¾ old + ¼ sample) from
		// microseconds to over a millisecond.
		if srtt := s.ca.rtt.Smoothed; resumed == (srtt >= stall/8) {
			t.Errorf("resumed %v: smoothed RTT %v after a %v stall", resumed, srtt, stall)
		}
		// Packets sent after the resume are sampled again.
		before = len(r.events)
		s.pushAcked(6)
		sampled = 0
		for _, ev := range r.events[before:] {
			if ev.Type == rue.EventACK && (ev.T1 != 0 || ev.T2 != 0) {
				sampled++
			}
		}
		if sampled == 0 {
			t.Errorf("resumed %v: no delay sample for a push sent after the stall", resumed)
		}
	}
}

// Time a frame waits in the receiving NIC's queue is not fabric delay:
// told when the push reached B (Arrived) before B handles it, B's ACK
// echoes that time as t2, so the wait falls in B's hold (t3 − t2); told
// when the ACK reached A, A takes that as t4. The RUE's fabric delay
// (t4 − t1) − (t3 − t2) then leaves both waits out; untold, it holds both.
func TestArrivalTimesKeepNICQueueingOutOfTheFabricDelay(t *testing.T) {
	const wait = 3 * time.Millisecond
	for _, told := range []bool{true, false} {
		s, r := newSampledScript(t)
		s.ca.Push(2, nil)
		at := s.clk.Now()
		s.clk.Set(at + wait) // the push waits in B's receive queue
		if told {
			s.b.Arrived(at)
		}
		s.deliver(0)
		s.b.Arrived(0)
		s.wait(10 * time.Microsecond) // B's ACK
		at = s.clk.Now()
		s.clk.Set(at + wait) // the ACK waits in A's
		if told {
			s.a.Arrived(at)
		}
		before := len(r.events)
		s.deliver(0)
		s.a.Arrived(0)
		var ev *rue.Event
		for i := before; i < len(r.events); i++ {
			if r.events[i].Type == rue.EventACK && r.events[i].T1 != 0 {
				ev = &r.events[i]
			}
		}
		if ev == nil {
			t.Fatalf("told %v: no sampled ACK event for the push", told)
		}
		ticks := int64(int32(ev.T4-ev.T1)) - int64(int32(ev.T3-ev.T2))
		fabric := time.Duration(ticks) * wire.TimestampUnit
		if told && fabric > wait/10 || !told && fabric < 2*wait-wait/10 {
			t.Errorf("told %v: fabric delay %v with %v waits in each NIC", told, fabric, wait)
		}
	}
}

// cuttingRUE halves the window on each RTO event and, on EventUndo, takes
// the window the event carries; it records the events.
type cuttingRUE struct {
	fcwnd  rue.Fixed
	events []rue.Event
}

func (r *cuttingRUE) Handle(ev *rue.Event) (rue.Response, bool) {
	r.events = append(r.events, *ev)
	switch {
	case ev.Type == rue.EventRetx && ev.RetxReason == rue.RetxRTO:
		r.fcwnd /= 2
	case ev.Type == rue.EventUndo:
		r.fcwnd = max(r.fcwnd, ev.UndoFcwnd)
	}
	return rue.Response{Conn: ev.Conn, Flow: ev.Flow, Fcwnd: r.fcwnd, Ncwnd: 64, RTO: time.Millisecond}, true
}

// An RTO episode is judged when the first resent packet is acknowledged:
// spurious when the ACK answers the original (its t1 is older than the
// resend), and the RUE then gets the window from before the timeouts
// (EventUndo); genuine when the originals were lost, and the cut stays.
func TestSpuriousTimeoutsAreUndone(t *testing.T) {
	for _, spurious := range []bool{true, false} {
		s := newScript(t, ConnConfig{SCID: 1, DCID: 2, InitRTO: time.Millisecond, MinRTO: time.Millisecond})
		r := &cuttingRUE{fcwnd: 32 * rue.One}
		s.a.cfg.RUE = r
		s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
		s.pushAcked(1)
		for cookie := uint64(2); cookie <= 5; cookie++ {
			s.ca.Push(cookie, nil)
		}
		if !spurious {
			for len(s.q) > 0 {
				s.lose(0)
			}
		}
		s.wait(time.Millisecond) // every push times out and is resent
		st := &s.ca.Stats
		if st.RetxRTO.Load() != 4 || r.fcwnd >= 32*rue.One {
			t.Fatalf("spurious %v: retx_rto %d fcwnd %v, want 4 resends and a cut window", spurious, st.RetxRTO.Load(), r.fcwnd)
		}
		if spurious {
			for i := 0; i < 4; i++ { // the originals reach B; its ACK overtakes the resends
				s.deliver(0)
			}
			s.wait(20 * time.Microsecond)
			s.deliver(len(s.q) - 1)
		}
		s.settle()
		undos := 0
		for _, ev := range r.events {
			if ev.Type == rue.EventUndo {
				undos++
				if ev.UndoFcwnd != 32*rue.One {
					t.Errorf("undo carries fcwnd %v, want the 32 from before the timeouts", ev.UndoFcwnd)
				}
			}
		}
		want := map[bool][3]uint64{true: {1, 0, 1}, false: {0, 1, 0}}[spurious]
		if got := [3]uint64{st.RTOSpurious.Load(), st.RTOGenuine.Load(), uint64(undos)}; got != want {
			t.Errorf("spurious %v: rto_spurious, rto_genuine, undo events %v, want %v", spurious, got, want)
		}
		if spurious != (r.fcwnd == 32*rue.One) {
			t.Errorf("spurious %v: fcwnd %v after the episode", spurious, r.fcwnd)
		}
		if len(s.ua.cpls) != 5 {
			t.Errorf("spurious %v: %d of 5 pushes completed", spurious, len(s.ua.cpls))
		}
	}
}

// A host that stalls the endpoint again and again delays a resend by one
// timeout, not forever: each packet's deadline restarts once per
// transmission.
func TestResumedRestartsEachDeadlineOnce(t *testing.T) {
	const rto = time.Millisecond
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, InitRTO: rto, MinRTO: rto})
	s.a.cfg.RUE = &fixedRUE{rue.Response{Fcwnd: 32 * rue.One, Ncwnd: 64, RTO: rto}}
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.pushAcked(1)
	s.ca.Push(2, nil)
	s.lose(0)
	st := &s.ca.Stats
	// Stalls in a row, each past the deadline: the first restarts it, the
	// second resends, the third restarts the resend's deadline.
	for i, want := range [][2]uint64{{1, 0}, {1, 1}, {2, 1}} {
		now := s.clk.Now() + 5*time.Millisecond
		s.clk.Set(now)
		s.a.Resumed(now)
		s.a.OnTimer(now)
		if got := [2]uint64{st.RTOResumed.Load(), st.RetxRTO.Load()}; got != want {
			t.Fatalf("after stall %d: rto_resumed, retx_rto %v, want %v", i+1, got, want)
		}
	}
}

// MaxNcwnd caps the NIC window whatever the RUE answers, from the first
// request (an InitNcwnd above it is clamped): with a cap of 3 and an RUE
// giving 256, at most 3 pulls are ever outstanding, and all of them
// complete.
func TestMaxNcwndCapsTheRUEsNICWindow(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, InitNcwnd: 64, MaxNcwnd: 3})
	s.a.cfg.RUE = &fixedRUE{rue.Response{Fcwnd: 100 * rue.One, Ncwnd: 256}}
	s.ub.onReq = func(c *Conn, r *Request) { c.PullData(r.RSN, pattern(r.RSN, int(r.Length))) }
	const n = 40
	for i := range n {
		if _, err := s.ca.Pull(uint64(i), 16); err != nil {
			t.Fatal(err)
		}
	}
	most := s.mostUntilDone(n, func() int { return int(s.ca.tx[reqW].ORC) })
	if most != 3 {
		t.Errorf("at most %d pulls outstanding, want the cap's 3", most)
	}
	if s.ca.Stats.RUEResponses.Load() == 0 || s.ca.ncwnd != 3 {
		t.Errorf("ncwnd %d after %d RUE responses of 256, want the cap", s.ca.ncwnd, s.ca.Stats.RUEResponses.Load())
	}
}

// MaxFcwnd caps the window whatever the RUE answers, from the first packet
// (an InitFcwnd above it is clamped): with a cap of 4 and an RUE giving
// 100, at most 4 pushes are ever outstanding, and all of them complete.
func TestMaxFcwndCapsTheRUEsWindow(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, InitFcwnd: 64 * rue.One, MaxFcwnd: 4 * rue.One})
	s.a.cfg.RUE = &fixedRUE{rue.Response{Fcwnd: 100 * rue.One, Ncwnd: 256}}
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	const n = 40
	for i := range n {
		if _, err := s.ca.Push(uint64(i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	most := s.mostUntilDone(n, func() int { return int(s.ca.tx[dataW].Outstanding()) })
	if most != 4 {
		t.Errorf("at most %d pushes outstanding, want the cap's 4", most)
	}
	if s.ca.fcwnd != 4*rue.One {
		t.Errorf("fcwnd %v after the RUE answered 100, want the cap", s.ca.fcwnd.Float())
	}
}
