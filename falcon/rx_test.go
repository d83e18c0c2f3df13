package falcon

import (
	"testing"
	"time"

	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// sink records frames an endpoint sends.
type sink struct{ frames [][]byte }

func (s *sink) Send(pkt []byte, flow uint32) {
	s.frames = append(s.frames, append([]byte(nil), pkt...))
}

func newLone(t testing.TB) (*Endpoint, *Conn, *sink) {
	clk := clock.NewManual(time.Millisecond)
	out := &sink{}
	e := New(Config{Clock: clk, Link: out, ULP: &recULP{name: "B"}})
	c, err := e.Connect(ConnConfig{SCID: 5, DCID: 9, TxDataPSN: 1000, RxDataPSN: 2000, RxReqPSN: 3000})
	if err != nil {
		t.Fatal(err)
	}
	return e, c, out
}

func pushFrame(cid uint32, psn wire.PSN, payload []byte) []byte {
	f := wire.TxnFields{CID: cid, Protocol: wire.ProtoRDMA, PSN: psn, RSN: 0}
	b := wire.AppendPushData(make([]byte, 0, 64+len(payload)), &f, payload)
	return seal(b, wire.TimestampAt(time.Millisecond))
}

// Malformed frames are dropped and counted by cause, never panic.
func TestReceiveDropsByCause(t *testing.T) {
	e, _, _ := newLone(t)
	good := pushFrame(5, 2000, []byte("hello"))
	flip := append([]byte(nil), good...)
	flip[10] ^= 1
	reseal := func(b []byte) []byte { return seal(append([]byte(nil), b...), wire.TimestampAt(time.Millisecond)) }
	raw, _, _ := open(good)
	badVersion := append([]byte(nil), raw...)
	badVersion[0] = 0x20
	badType := append([]byte(nil), raw...)
	wire.Packet(badType).SetType(7)
	badLen := append([]byte(nil), raw[:len(raw)-1]...)
	cases := []struct {
		name  string
		frame []byte
		c     func() uint64
	}{
		{"empty", nil, e.Stats.RxBadICV.Load},
		{"corrupted", flip, e.Stats.RxBadICV.Load},
		{"short", reseal(raw[:6]), e.Stats.RxParseShort.Load},
		{"version", reseal(badVersion), e.Stats.RxParseVersion.Load},
		{"type", reseal(badType), e.Stats.RxParseType.Load},
		{"length", reseal(badLen), e.Stats.RxParseLength.Load},
		{"unknown cid", pushFrame(77, 2000, nil), e.Stats.RxUnknownCID.Load},
	}
	for _, tc := range cases {
		before := tc.c()
		e.Receive(tc.frame, 0)
		if tc.c() != before+1 {
			t.Errorf("%s: counter did not move", tc.name)
		}
	}
}

// A transaction packet for an unknown CID gets the invalid-CID NACK (code 8)
// naming that CID and PSN; an ACK for an unknown CID is only counted.
func TestUnknownCIDGetsInvalidCIDNack(t *testing.T) {
	e, _, out := newLone(t)
	e.Receive(pushFrame(77, 42, []byte("x")), 3)
	if len(out.frames) != 1 {
		t.Fatalf("sent %d frames, want 1 NACK", len(out.frames))
	}
	b, _, ok := open(out.frames[0])
	if !ok {
		t.Fatal("NACK fails its ICV")
	}
	if got := Describe(b); got != "NACK code=InvalidCID psn=42 w=data" {
		t.Errorf("got %q", got)
	}
	if wire.Packet(b).CID() != 77 {
		t.Errorf("NACK CID %d, want 77", wire.Packet(b).CID())
	}
	ack := wire.AppendBACK(make([]byte, 0, 64), &wire.AckFields{CID: 77})
	e.Receive(seal(ack, 0), 0)
	if len(out.frames) != 1 || e.Stats.TxInvalidCIDNack.Load() != 1 {
		t.Errorf("an ACK for an unknown CID was answered")
	}
}

// The sliding-window verdicts of [S §9.2.2.4], each with its counter.
func TestReceiveWindowVerdicts(t *testing.T) {
	e, c, _ := newLone(t)
	u := e.cfg.ULP.(*recULP)
	u.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	e.Receive(pushFrame(5, 2000, []byte("a")), 0)
	if c.rx[dataW].Base() != 2001 {
		t.Fatalf("base %d after the first push, want 2001", c.rx[dataW].Base())
	}
	for _, tc := range []struct {
		name string
		psn  wire.PSN
		c    func() uint64
	}{
		{"old duplicate", 2000, c.Stats.RxDupOld.Load},
		{"beyond window", 2001 + 128, c.Stats.RxOutOfWindow.Load},
		{"beyond window (far)", 1 << 31, c.Stats.RxOutOfWindow.Load},
	} {
		before := tc.c()
		e.Receive(pushFrame(5, tc.psn, []byte("a")), 0)
		if tc.c() != before+1 {
			t.Errorf("%s: counter did not move", tc.name)
		}
	}
	if !c.rx[dataW].OWN() {
		t.Error("out-of-window drop did not set D-OWN")
	}
}

// Replayed (too old) IV timestamps are dropped silently: the first frame
// sets the peer's time, a frame older than it by more than the margin is a
// replay.
func TestReplayCheck(t *testing.T) {
	e, c, out := newLone(t)
	e.cfg.ULP.(*recULP).onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	now := wire.TimestampAt(3 * time.Second)
	frame := func(psn wire.PSN, iv wire.Timestamp) []byte {
		f := wire.TxnFields{CID: 5, Protocol: wire.ProtoRDMA, PSN: psn, RSN: wire.RSN(psn - 2000)}
		return seal(wire.AppendPushData(make([]byte, 0, 64), &f, []byte("x")), iv)
	}
	e.Receive(frame(2000, now), 0)
	sent := len(out.frames)
	e.Receive(frame(2001, now-wire.TimestampAt(2*time.Second)), 0)
	if c.Stats.RxReplay.Load() != 1 || len(out.frames) != sent || c.rx[dataW].Classify(2001) != 0 {
		t.Errorf("replayed frame not dropped silently (replay %d)", c.Stats.RxReplay.Load())
	}
	e.Receive(frame(2001, now-wire.TimestampAt(time.Millisecond)), 0)
	if c.Stats.RxReplay.Load() != 1 || c.rx[dataW].Base() != 2002 {
		t.Error("a frame inside the replay margin was refused")
	}
}

// Every counter has a distinct name and help.
func TestCounterTables(t *testing.T) {
	var ec EndpointCounters
	var cc ConnCounters
	seen := map[string]bool{}
	for _, d := range append(ec.Set(), cc.Set()...) {
		if seen[d.Name] || d.Help == "" || d.Counter == nil {
			t.Errorf("counter %q duplicated or without help", d.Name)
		}
		seen[d.Name] = true
	}
}

// FuzzReceive feeds arbitrary bytes to an endpoint's receive path, both raw
// and sealed with a valid ICV (so the parser and the window logic see them).
func FuzzReceive(f *testing.F) {
	f.Add(pushFrame(5, 2000, []byte("seed")), true)
	f.Add([]byte{0x10, 0, 0, 5, 0, 0, 0, 0x12}, false)
	ack := wire.AppendEACK(make([]byte, 0, 80), &wire.AckFields{CID: 5, DataBase: 1000, DataRx: wire.NewBitmap(128)})
	f.Add([]byte(ack), false)
	nack := wire.AppendNACK(make([]byte, 0, 48), &wire.NackFields{CID: 5, DataBase: 1000, NackPSN: 1000, Code: wire.NackCIE})
	f.Add([]byte(nack), false)
	rs := wire.AppendResync(make([]byte, 0, 48), &wire.TxnFields{CID: 5, PSN: 2000, ResyncCode: 1, ResyncPacketType: wire.TypePushData})
	f.Add([]byte(rs), false)
	f.Fuzz(func(t *testing.T, b []byte, framed bool) {
		e, c, _ := newLone(t)
		u := e.cfg.ULP.(*recULP)
		u.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
		c.Push(1, []byte("out"))
		c.Pull(2, 100)
		if !framed {
			b = seal(append([]byte(nil), b...), wire.TimestampAt(time.Millisecond))
		}
		e.Receive(b, 0)
		e.cfg.Clock.(*clock.Manual).Advance(time.Second)
		e.OnTimer(e.Now())
	})
}

// Every transaction packet type has an admission row and every NACK code a
// handler row.
func TestTablesCoverEveryType(t *testing.T) {
	for _, typ := range wire.PacketTypes {
		if typ.Window() != wire.WindowNone && admitters[typ] == nil {
			t.Errorf("no admission for %v", typ)
		}
	}
	for _, code := range wire.NackCodes {
		if _, ok := nackHandlers[code]; !ok {
			t.Errorf("no handler for NACK %v", code)
		}
	}
	for code := range nackResyncTable {
		if _, ok := nackHandlers[code]; !ok {
			t.Errorf("resync row for unhandled NACK %v", code)
		}
	}
}

// An out-of-window drop sets OWN; the next ACK is an EACK carrying it, and
// OWN clears once sent [S §9.2.2.4].
func TestOWNTravelsInEACK(t *testing.T) {
	e, c, out := newLone(t)
	e.Receive(pushFrame(5, 2000+500, []byte("far")), 0)
	e.cfg.Clock.(*clock.Manual).Advance(10 * time.Microsecond)
	e.OnTimer(e.Now())
	if len(out.frames) != 1 {
		t.Fatalf("%d frames sent, want one ACK", len(out.frames))
	}
	b, _, _ := open(out.frames[0])
	if got := Describe(b); got != "EACK rbase=3000 dbase=2000 req=0 dack=0 drx=0 own" {
		t.Errorf("got %q", got)
	}
	if c.rx[dataW].OWN() {
		t.Error("OWN not cleared after the EACK")
	}
}

// FuzzReceiveSequence feeds a series of frames (each sealed, so they pass
// the integrity check) to an endpoint with traffic outstanding in both
// directions, running timers in between: state-dependent paths (ACKs for
// unsent PSNs, NACKs of every code, Resyncs, duplicates) must never panic.
// Input: repeated [len byte][gap byte][frame bytes].
func FuzzReceiveSequence(f *testing.F) {
	seq := func(frames ...[]byte) []byte {
		var b []byte
		for _, fr := range frames {
			b = append(b, byte(len(fr)), 3)
			b = append(b, fr...)
		}
		return b
	}
	raw := func(fr []byte) []byte { b, _, _ := open(fr); return b }
	nack := func(code wire.NackCode, psn wire.PSN, req bool) []byte {
		return wire.AppendNACK(nil, &wire.NackFields{CID: 5, DataBase: 1000, NackPSN: psn, Code: code, RequestWindow: req, RNRTimeoutCode: 1})
	}
	f.Add(seq(raw(pushFrame(5, 2000, []byte("a"))), raw(pushFrame(5, 2001, []byte("b")))))
	f.Add(seq(nack(wire.NackCIE, 1000, false), nack(wire.NackRNR, 1001, false), nack(wire.NackInvalidCID, 0, true)))
	f.Add(seq(nack(wire.NackInsufficientResources, 1000, false), nack(wire.NackOutOfWindow, 1000, false)))
	f.Add(seq(wire.AppendBACK(nil, &wire.AckFields{CID: 5, DataBase: 1002, ReqBase: 1})))
	f.Add(seq(wire.AppendResync(nil, &wire.TxnFields{CID: 5, PSN: 3000, RSN: 0, ResyncCode: 3, ResyncPacketType: wire.TypePullRequest})))
	f.Add(seq(wire.AppendPullRequest(nil, &wire.TxnFields{CID: 5, PSN: 3000, RSN: 0, RequestLength: 100})))
	f.Fuzz(runSeq)
}

func runSeq(t *testing.T, in []byte) {
	e, c, _ := newLone(t)
	clk := e.cfg.Clock.(*clock.Manual)
	u := e.cfg.ULP.(*recULP)
	n := 0
	u.onReq = func(c *Conn, r *Request) {
		n++
		switch {
		case r.Kind == tl.Pull && n%2 == 0:
			c.NackPull(r.RSN, 1)
		case r.Kind == tl.Pull:
			c.PullData(r.RSN, make([]byte, r.Length))
		case n%3 == 0:
			c.NackPush(r.RSN, wire.NackCIE, 1, 0)
		case n%3 == 1:
			c.NackPush(r.RSN, wire.NackRNR, 0, 1)
		default:
			c.AckPush(r.RSN)
		}
	}
	for i := 0; i < 3; i++ {
		c.Push(uint64(i), []byte("out"))
		c.Pull(uint64(i), 10)
	}
	for len(in) >= 2 {
		l, gap := int(in[0]), in[1]
		in = in[2:]
		if l > len(in) {
			l = len(in)
		}
		frame := append(make([]byte, 0, l+envelopeLen), in[:l]...)
		in = in[l:]
		e.Receive(seal(frame, wire.TimestampAt(clk.Now())), 0)
		clk.Advance(time.Duration(gap) * 10 * time.Microsecond)
		e.OnTimer(clk.Now())
	}
	clk.Advance(time.Second)
	e.OnTimer(clk.Now())
}

func TestSnapshotSumsConnections(t *testing.T) {
	e, c, _ := newLone(t)
	c2, _ := e.Connect(ConnConfig{SCID: 6, DCID: 1})
	c.Push(0, nil)
	c2.Push(0, nil)
	m := e.Snapshot()
	if m["txn_submitted"] != 2 || m["tx_frames"] != 2 {
		t.Errorf("snapshot %v", m)
	}
}

func TestConnectValidation(t *testing.T) {
	e, _, _ := newLone(t)
	if _, err := e.Connect(ConnConfig{SCID: 5}); err != ErrCIDInUse {
		t.Errorf("duplicate CID: %v", err)
	}
	if _, err := e.Connect(ConnConfig{SCID: 1 << 24}); err != ErrBadCID {
		t.Errorf("25-bit CID: %v", err)
	}
	var a, b ConnConfig
	e.RandomPSNs(&a)
	e.RandomPSNs(&b)
	if a.TxReqPSN == b.TxReqPSN && a.TxDataPSN == b.TxDataPSN {
		t.Error("RandomPSNs repeats itself")
	}
	m := Mirror(ConnConfig{SCID: 1, DCID: 2, TxReqPSN: 3, RxReqPSN: 4, TxDataPSN: 5, RxDataPSN: 6, TxRSN: 7, RxRSN: 8})
	if m.SCID != 2 || m.DCID != 1 || m.TxReqPSN != 4 || m.RxReqPSN != 3 || m.TxDataPSN != 6 || m.RxDataPSN != 5 || m.TxRSN != 8 || m.RxRSN != 7 {
		t.Errorf("mirror %+v", m)
	}
}

// After a long idle period (longer than half the 32-bit IV timestamp wrap,
// ≈ 281 s) a fresh frame is still accepted and a stale one refused.
func TestReplayAcrossLongIdle(t *testing.T) {
	e, c, _ := newLone(t)
	e.cfg.ULP.(*recULP).onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	clk := e.cfg.Clock.(*clock.Manual)
	frame := func(psn wire.PSN, iv wire.Timestamp) []byte {
		f := wire.TxnFields{CID: 5, Protocol: wire.ProtoRDMA, PSN: psn, RSN: wire.RSN(psn - 2000)}
		return seal(wire.AppendPushData(make([]byte, 0, 64), &f, []byte("x")), iv)
	}
	peer := 7 * time.Second // the peer's clock reading
	e.Receive(frame(2000, wire.TimestampAt(peer)), 0)
	clk.Advance(400 * time.Second)
	peer += 400 * time.Second
	e.Receive(frame(2001, wire.TimestampAt(peer-2*time.Second)), 0) // stale by 2 s
	if c.Stats.RxReplay.Load() != 1 {
		t.Fatal("a frame 2 s stale after a long idle was accepted")
	}
	e.Receive(frame(2001, wire.TimestampAt(peer)), 0)
	if c.Stats.RxReplay.Load() != 1 || c.rx[dataW].Base() != 2002 {
		t.Errorf("a fresh frame after 400 s idle was refused (replay %d)", c.Stats.RxReplay.Load())
	}
}
