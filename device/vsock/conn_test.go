package vsock

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"falconnic/internal/clock"
	"falconnic/vhostuser"
)

const vsockTestCID = 3

// engRig drives the sans-I/O engine as a guest and a host would.
type engRig struct {
	t   *testing.T
	c   Counters
	e   *vsockEngine
	clk *clock.Manual
	rx  []byte
}

func newEngRig(t *testing.T) *engRig {
	r := &engRig{t: t, clk: clock.NewManual(0), rx: make([]byte, VsockHdrLen+4096)}
	r.e = newVsockEngine(vsockTestCID, &r.c)
	return r
}

// pkt builds a guest packet.
func vsPkt(op Op, gport, hport, flags, bufAlloc, fwd uint32, payload []byte) []byte {
	b := make([]byte, VsockHdrLen+len(payload))
	h := Hdr(b)
	h.SetSrcCID(vsockTestCID)
	h.SetDstCID(VsockHostCID)
	h.SetSrcPort(gport)
	h.SetDstPort(hport)
	h.SetLen(uint32(len(payload)))
	h.SetType(VsockTypeStream)
	h.SetOp(op)
	h.SetFlags(flags)
	h.SetBufAlloc(bufAlloc)
	h.SetFwdCnt(fwd)
	copy(b[VsockHdrLen:], payload)
	return b
}

func (r *engRig) send(op Op, gport, hport, flags, bufAlloc, fwd uint32, payload []byte) {
	r.e.guestPacket(vsPkt(op, gport, hport, flags, bufAlloc, fwd, payload), r.clk.Now())
}

// drain returns every packet the guest would receive, one line each, and
// the RW payloads concatenated.
func (r *engRig) drain() ([]string, []byte) {
	var lines []string
	var data []byte
	for r.e.hasRx() {
		n := r.e.fillRx([]vhostuser.Buf{{Data: r.rx, Write: true}}, uint64(len(r.rx)))
		if n == 0 {
			break
		}
		h := Hdr(r.rx[:VsockHdrLen])
		if h.SrcCID() != VsockHostCID || h.DstCID() != vsockTestCID || h.Type() != VsockTypeStream {
			r.t.Fatalf("bad header %x", r.rx[:VsockHdrLen])
		}
		line := fmt.Sprintf("%v %d->%d", h.Op(), h.SrcPort(), h.DstPort())
		if h.Flags() != 0 {
			line += fmt.Sprintf(" flags=%d", h.Flags())
		}
		if h.Len() != 0 {
			line += fmt.Sprintf(" len=%d", h.Len())
			data = append(data, r.rx[VsockHdrLen:n]...)
		}
		lines = append(lines, line)
	}
	return lines, data
}

func (r *engRig) acts() []string {
	var out []string
	for _, a := range r.e.takeActs(nil) {
		s := fmt.Sprintf("%v #%d", a.kind, a.id)
		if a.port != 0 {
			s += fmt.Sprintf(" port=%d", a.port)
		}
		out = append(out, s)
	}
	return out
}

func vsExpectLines(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// established opens a guest-initiated connection 5000 -> host port 80.
func (r *engRig) established(guestBuf uint32) uint64 {
	r.send(VsockOpRequest, 5000, 80, 0, guestBuf, 0, nil)
	acts := r.e.takeActs(nil)
	if len(acts) != 1 || acts[0].kind != actDial || acts[0].port != 80 {
		r.t.Fatalf("acts %v", acts)
	}
	r.e.dialDone(acts[0].id, true)
	r.acts()
	lines, _ := r.drain()
	vsExpectLines(r.t, "after dial", lines, "RESPONSE 80->5000")
	return acts[0].id
}

func TestVsockGuestRequestToPortNobodyListensOnGetsRst(t *testing.T) {
	r := newEngRig(t)
	r.send(VsockOpRequest, 5000, 81, 0, 65536, 0, nil)
	acts := r.e.takeActs(nil)
	r.e.dialDone(acts[0].id, false)
	lines, _ := r.drain()
	vsExpectLines(t, "packets", lines, "RST 81->5000")
	vsExpectLines(t, "acts", r.acts(), "close #1")
	if r.c.DialFailed.Load() != 1 || len(r.e.conns) != 0 {
		t.Fatalf("DialFailed=%d conns=%d", r.c.DialFailed.Load(), len(r.e.conns))
	}
}

func TestVsockPacketForUnknownConnectionGetsRst(t *testing.T) {
	r := newEngRig(t)
	r.send(VsockOpRW, 7, 99, 0, 65536, 0, []byte("x"))
	r.send(VsockOpRst, 7, 99, 0, 65536, 0, nil) // RST never answers RST
	lines, _ := r.drain()
	vsExpectLines(t, "packets", lines, "RST 99->7")
	if r.c.UnknownConn.Load() != 1 || r.c.RstUnknown.Load() != 1 {
		t.Fatalf("UnknownConn=%d RstUnknown=%d", r.c.UnknownConn.Load(), r.c.RstUnknown.Load())
	}
}

func TestVsockGuestBytesReachHostAndCreditIsReturned(t *testing.T) {
	r := newEngRig(t)
	id := r.established(65536)
	chunk := bytes.Repeat([]byte{0xab}, 60000)
	sent := 0
	for sent+len(chunk) <= vsockBufAlloc {
		r.send(VsockOpRW, 5000, 80, 0, 65536, 0, chunk)
		sent += len(chunk)
	}
	vsExpectLines(t, "acts", r.acts()[:1], fmt.Sprintf("wake-writer #%d", id))
	buf := make([]byte, vsockBufAlloc)
	if n := r.e.peekToHost(id, buf); n != sent {
		t.Fatalf("peek %d, want %d", n, sent)
	}
	// The host takes a little: the guest still has plenty of credit.
	r.e.hostWrote(id, 1000)
	if lines, _ := r.drain(); len(lines) != 0 {
		t.Fatalf("early credit update: %v", lines)
	}
	// The host takes everything: the guest's view is low, so we tell it.
	r.e.hostWrote(id, sent-1000)
	lines, _ := r.drain()
	vsExpectLines(t, "packets", lines, "CREDIT_UPDATE 80->5000")
	if fwd := Hdr(r.rx).FwdCnt(); fwd != uint32(sent) || Hdr(r.rx).BufAlloc() != vsockBufAlloc {
		t.Fatalf("fwd_cnt %d buf_alloc %d", fwd, Hdr(r.rx).BufAlloc())
	}
	// Sending beyond the advertised credit resets the connection.
	r.send(VsockOpRW, 5000, 80, 0, 65536, 0, make([]byte, 65536))
	r.send(VsockOpRW, 5000, 80, 0, 65536, 0, make([]byte, 65536))
	r.send(VsockOpRW, 5000, 80, 0, 65536, 0, make([]byte, 65536))
	r.send(VsockOpRW, 5000, 80, 0, 65536, 0, make([]byte, 65536))
	r.send(VsockOpRW, 5000, 80, 0, 65536, 0, make([]byte, 1))
	lines, _ = r.drain()
	vsExpectLines(t, "packets", lines, "RST 80->5000")
	if r.c.GuestOverCredit.Load() != 1 {
		t.Fatalf("GuestOverCredit=%d", r.c.GuestOverCredit.Load())
	}
}

func TestVsockCreditRequestIsAnswered(t *testing.T) {
	r := newEngRig(t)
	r.established(65536)
	r.send(VsockOpCreditRequest, 5000, 80, 0, 65536, 0, nil)
	lines, _ := r.drain()
	vsExpectLines(t, "packets", lines, "CREDIT_UPDATE 80->5000")
}

func TestVsockHostBytesNeverExceedGuestCredit(t *testing.T) {
	r := newEngRig(t)
	id := r.established(1000)
	r.e.hostRead(id, bytes.Repeat([]byte("h"), 5000))
	lines, data := r.drain()
	vsExpectLines(t, "packets", lines, "RW 80->5000 len=1000", "CREDIT_REQUEST 80->5000")
	// The guest consumed 1000 and says so: 1000 more may flow.
	r.send(VsockOpCreditUpdate, 5000, 80, 0, 1000, 1000, nil)
	lines, more := r.drain()
	vsExpectLines(t, "packets", lines, "RW 80->5000 len=1000", "CREDIT_REQUEST 80->5000")
	// A bigger buffer opens the window for the rest.
	r.send(VsockOpCreditUpdate, 5000, 80, 0, 1<<20, 2000, nil)
	lines, rest := r.drain()
	vsExpectLines(t, "packets", lines, "RW 80->5000 len=3000")
	if got := len(data) + len(more) + len(rest); got != 5000 {
		t.Fatalf("delivered %d bytes", got)
	}
	if r.c.TxNoCredit.Load() != 2 {
		t.Fatalf("TxNoCredit=%d", r.c.TxNoCredit.Load())
	}
}

func TestVsockHostConnectRequestResponse(t *testing.T) {
	r := newEngRig(t)
	id := r.e.newID()
	hp, ok := r.e.hostConnect(id, 1024, r.clk.Now())
	if !ok || hp != vsockEphemeralBase {
		t.Fatalf("host port %d ok=%v", hp, ok)
	}
	lines, _ := r.drain()
	vsExpectLines(t, "packets", lines, fmt.Sprintf("REQUEST %d->1024", hp))
	r.send(VsockOpResponse, 1024, hp, 0, 65536, 0, nil)
	vsExpectLines(t, "acts", r.acts(), fmt.Sprintf("accept #%d port=%d", id, hp))
	// A second RESPONSE is out of place.
	r.send(VsockOpResponse, 1024, hp, 0, 65536, 0, nil)
	lines, _ = r.drain()
	vsExpectLines(t, "packets", lines, fmt.Sprintf("RST %d->1024", hp))
	if r.c.UnexpectedOp.Load() != 1 {
		t.Fatalf("UnexpectedOp=%d", r.c.UnexpectedOp.Load())
	}
}

func TestVsockHostConnectTimesOutWithoutResponse(t *testing.T) {
	r := newEngRig(t)
	id := r.e.newID()
	hp, _ := r.e.hostConnect(id, 1024, r.clk.Now())
	r.drain()
	r.clk.Advance(vsockConnectTimeout - time.Millisecond)
	r.e.onTimer(r.clk.Now())
	if len(r.e.conns) != 1 {
		t.Fatal("reset too early")
	}
	r.clk.Advance(time.Millisecond)
	r.e.onTimer(r.clk.Now())
	lines, _ := r.drain()
	vsExpectLines(t, "packets", lines, fmt.Sprintf("RST %d->1024", hp))
	vsExpectLines(t, "acts", r.acts(), fmt.Sprintf("close #%d", id))
	if r.c.ConnectTimeout.Load() != 1 {
		t.Fatalf("ConnectTimeout=%d", r.c.ConnectTimeout.Load())
	}
}

func TestVsockHalfCloseEachWayThenRst(t *testing.T) {
	r := newEngRig(t)
	id := r.established(1 << 20)
	// The guest is done sending: once its bytes reach the host, the host
	// socket's write side closes.
	r.send(VsockOpRW, 5000, 80, 0, 1<<20, 0, []byte("request"))
	r.send(VsockOpShutdown, 5000, 80, VsockShutdownSend, 1<<20, 0, nil)
	vsExpectLines(t, "acts", r.acts(), fmt.Sprintf("wake-writer #%d", id))
	r.e.hostWrote(id, 7)
	vsExpectLines(t, "acts", r.acts(), fmt.Sprintf("close-write #%d", id))
	// The host answers and closes: data first, then SHUTDOWN (both, since
	// the guest stopped sending too).
	r.e.hostRead(id, []byte("response"))
	r.e.hostEOF(id)
	lines, data := r.drain()
	vsExpectLines(t, "packets", lines, "RW 80->5000 len=8", "SHUTDOWN 80->5000 flags=3")
	if string(data) != "response" {
		t.Fatalf("data %q", data)
	}
	if len(r.e.conns) != 1 {
		t.Fatal("closed before the guest consumed the bytes")
	}
	// The guest reads them (fwd_cnt 8): the connection is finished.
	r.send(VsockOpCreditUpdate, 5000, 80, 0, 1<<20, 8, nil)
	lines, _ = r.drain()
	vsExpectLines(t, "packets", lines, "RST 80->5000")
	if len(r.e.conns) != 0 || r.c.Closed.Load() != 1 {
		t.Fatalf("conns=%d Closed=%d", len(r.e.conns), r.c.Closed.Load())
	}
}

func TestVsockGuestCloseBothWaysGetsRst(t *testing.T) {
	r := newEngRig(t)
	id := r.established(1 << 20)
	r.e.hostRead(id, []byte("unread"))
	r.send(VsockOpShutdown, 5000, 80, VsockShutdownSend|VsockShutdownRcv, 1<<20, 0, nil)
	lines, _ := r.drain()
	vsExpectLines(t, "packets", lines, "RST 80->5000")
	if r.c.HostBytesDiscarded.Load() != 6 {
		t.Fatalf("HostBytesDiscarded=%d", r.c.HostBytesDiscarded.Load())
	}
}

func TestVsockGuestRstClosesHostSocket(t *testing.T) {
	r := newEngRig(t)
	id := r.established(1 << 20)
	r.send(VsockOpRst, 5000, 80, 0, 0, 0, nil)
	vsExpectLines(t, "acts", r.acts(), fmt.Sprintf("close #%d", id))
	if lines, _ := r.drain(); len(lines) != 0 {
		t.Fatalf("answered RST with %v", lines)
	}
}

func TestVsockSessionLossDropsEverything(t *testing.T) {
	r := newEngRig(t)
	id := r.established(1 << 20)
	r.e.hostRead(id, []byte("pending"))
	r.e.resetAll()
	vsExpectLines(t, "acts", r.acts(), fmt.Sprintf("close #%d", id))
	if r.e.hasRx() || len(r.e.conns) != 0 || r.c.SessionResets.Load() != 1 {
		t.Fatalf("hasRx=%v conns=%d", r.e.hasRx(), len(r.e.conns))
	}
}

func TestVsockMalformedHeadersAreCountedByCause(t *testing.T) {
	bad := func(mut func(h Hdr) []byte) []byte {
		b := vsPkt(VsockOpRW, 1, 2, 0, 0, 0, []byte("abc"))
		if out := mut(Hdr(b)); out != nil {
			return out
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		err  error
		ctr  func(c *Counters) uint64
	}{
		{"short", make([]byte, 43), ErrVsockShort, func(c *Counters) uint64 { return c.HdrShort.Load() }},
		{"seqpacket", bad(func(h Hdr) []byte { h.SetType(2); return nil }), ErrVsockType, func(c *Counters) uint64 { return c.HdrType.Load() }},
		{"op 0", bad(func(h Hdr) []byte { h.SetOp(0); return nil }), ErrVsockOp, func(c *Counters) uint64 { return c.HdrOp.Load() }},
		{"op 8", bad(func(h Hdr) []byte { h.SetOp(8); return nil }), ErrVsockOp, func(c *Counters) uint64 { return c.HdrOp.Load() }},
		{"rw flags", bad(func(h Hdr) []byte { h.SetFlags(1); return nil }), ErrVsockFlags, func(c *Counters) uint64 { return c.HdrFlags.Load() }},
		{"len > payload", bad(func(h Hdr) []byte { h.SetLen(4); return nil }), ErrVsockLen, func(c *Counters) uint64 { return c.HdrLen.Load() }},
		{"len < payload", bad(func(h Hdr) []byte { h.SetLen(2); return nil }), ErrVsockLen, func(c *Counters) uint64 { return c.HdrLen.Load() }},
		{"payload on REQUEST", bad(func(h Hdr) []byte { h.SetOp(VsockOpRequest); return nil }), ErrVsockLen, func(c *Counters) uint64 { return c.HdrLen.Load() }},
		{"over 64 KiB", bad(func(h Hdr) []byte { h.SetLen(1 << 20); return nil }), ErrVsockTooBig, func(c *Counters) uint64 { return c.HdrTooBig.Load() }},
		{"spoofed src", bad(func(h Hdr) []byte { h.SetSrcCID(4); return nil }), ErrVsockSrcCID, func(c *Counters) uint64 { return c.HdrSrcCID.Load() }},
		{"not to host", bad(func(h Hdr) []byte { h.SetDstCID(5); return nil }), ErrVsockDstCID, func(c *Counters) uint64 { return c.HdrDstCID.Load() }},
		{"empty RW", vsPkt(VsockOpRW, 1, 2, 0, 0, 0, nil), ErrVsockNoPayload, func(c *Counters) uint64 { return c.HdrNoPayload.Load() }},
		{"shutdown flag 4", vsPkt(VsockOpShutdown, 1, 2, 4, 0, 0, nil), ErrVsockFlags, func(c *Counters) uint64 { return c.HdrFlags.Load() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := ParseHdr(tc.b, vsockTestCID); err != tc.err {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			r := newEngRig(t)
			r.e.guestPacket(tc.b, 0)
			if tc.ctr(&r.c) != 1 || r.c.PktsFromGuest.Load() != 0 {
				t.Fatalf("counter %d, PktsFromGuest %d", tc.ctr(&r.c), r.c.PktsFromGuest.Load())
			}
		})
	}
}

func TestVsockOpTableHasEveryOp(t *testing.T) {
	for op := VsockOpRequest; op <= VsockOpCreditRequest; op++ {
		if vsockOps[op].name == "" || vsockGuestOps[op] == nil {
			t.Errorf("op %d has no row", op)
		}
	}
	if !vsockOps[VsockOpRW].hasPayload || vsockOps[VsockOpShutdown].flagMask != 3 {
		t.Error("RW payload / SHUTDOWN flags rows wrong")
	}
}

func TestVsockCountersHaveUniqueNamesAndHelp(t *testing.T) {
	var c Counters
	seen := map[string]bool{}
	for _, d := range c.Set() {
		if d.Name == "" || d.Help == "" || seen[d.Name] || d.Counter == nil {
			t.Errorf("bad row %q", d.Name)
		}
		seen[d.Name] = true
	}
}

func TestVsockRingWrapsAndGrows(t *testing.T) {
	b := vsockRing{max: 10000}
	var want []byte
	out := make([]byte, 0, 20000)
	for i := 0; i < 50; i++ {
		p := bytes.Repeat([]byte{byte(i)}, 1+i*97%3000)
		n := b.Write(p)
		want = append(want, p[:n]...)
		tmp := make([]byte, 1234)
		m := b.Peek(tmp)
		b.Discard(m)
		out = append(out, tmp[:m]...)
	}
	tmp := make([]byte, 20000)
	m := b.Peek(tmp)
	out = append(out, tmp[:m]...)
	if !bytes.Equal(out, want) {
		t.Fatalf("ring mangled bytes: %d vs %d", len(out), len(want))
	}
}

func TestVsockFIFOKeepsOrderAcrossCompaction(t *testing.T) {
	var f vsockFIFO[int]
	next, want := 0, 0
	for round := 0; round < 100; round++ {
		for i := 0; i < round%7+1; i++ {
			f.Push(next)
			next++
		}
		for i := 0; i < round%5+1 && f.Len() > 0; i++ {
			if f.Front() != want {
				t.Fatalf("got %d, want %d", f.Front(), want)
			}
			f.Pop()
			want++
		}
	}
	for _, v := range f.Items() {
		if v != want {
			t.Fatalf("item %d, want %d", v, want)
		}
		want++
	}
	if want != next {
		t.Fatalf("lost items: %d of %d", want, next)
	}
}

func TestVsockEngineSteadyStateDoesNotAllocate(t *testing.T) {
	r := newEngRig(t)
	id := r.established(1 << 30)
	in := vsPkt(VsockOpRW, 5000, 80, 0, 1<<30, 0, make([]byte, 4096))
	out := make([]byte, 8192)
	bufs := []vhostuser.Buf{{Data: r.rx, Write: true}}
	var acts []vsockAct
	step := func() {
		r.e.guestPacket(in, 0)
		r.e.hostWrote(id, r.e.peekToHost(id, out))
		r.e.hostRead(id, out[:4096])
		for r.e.hasRx() {
			r.e.fillRx(bufs, uint64(len(r.rx)))
		}
		acts = r.e.takeActs(acts)
	}
	for i := 0; i < 100; i++ {
		step() // warm up: rings and queues reach their size
	}
	if n := testing.AllocsPerRun(200, step); n != 0 {
		t.Fatalf("%.1f allocations per exchange", n)
	}
}

func TestVsockConnectionLimitAndControlQueueBound(t *testing.T) {
	r := newEngRig(t)
	for p := uint32(0); p < vsockMaxConns; p++ {
		r.send(VsockOpRequest, 10000+p, 80, 0, 65536, 0, nil)
	}
	r.send(VsockOpRequest, 9999, 80, 0, 65536, 0, nil)
	if r.c.ConnLimit.Load() != 1 || len(r.e.conns) != vsockMaxConns {
		t.Fatalf("ConnLimit=%d conns=%d", r.c.ConnLimit.Load(), len(r.e.conns))
	}
	if _, ok := r.e.hostConnect(r.e.newID(), 1024, 0); ok || r.c.ConnLimit.Load() != 2 {
		t.Fatal("host connect beyond the limit accepted")
	}
	// A guest that floods packets for unknown connections while never
	// posting RX buffers fills the bounded control queue; the rest is counted.
	r.e.resetAll()
	for i := 0; i < vsockMaxCtrl+100; i++ {
		r.send(VsockOpRW, 7, uint32(i), 0, 0, 0, []byte("x"))
	}
	if r.c.CtrlQueueFull.Load() != 100 || r.e.ctrl.Len() != vsockMaxCtrl {
		t.Fatalf("CtrlQueueFull=%d queued=%d", r.c.CtrlQueueFull.Load(), r.e.ctrl.Len())
	}
}

func TestVsockGuestShutdownReceiveDiscardsHostBytes(t *testing.T) {
	r := newEngRig(t)
	id := r.established(1 << 20)
	r.send(VsockOpShutdown, 5000, 80, VsockShutdownRcv, 1<<20, 0, nil)
	if room := r.e.hostRoom(id); room == 0 {
		t.Fatal("reader would stall: the host must still be drained")
	}
	r.e.hostRead(id, []byte("nobody reads this"))
	if lines, _ := r.drain(); len(lines) != 0 {
		t.Fatalf("sent %v after SHUTDOWN(RCV)", lines)
	}
	if r.c.HostBytesDiscarded.Load() != 17 {
		t.Fatalf("HostBytesDiscarded=%d", r.c.HostBytesDiscarded.Load())
	}
	// The guest can still send.
	r.send(VsockOpRW, 5000, 80, 0, 1<<20, 0, []byte("up"))
	if n := r.e.peekToHost(id, make([]byte, 8)); n != 2 {
		t.Fatalf("to host %d bytes", n)
	}
}

func TestVsockDataAfterShutdownSendResets(t *testing.T) {
	r := newEngRig(t)
	r.established(1 << 20)
	r.send(VsockOpShutdown, 5000, 80, VsockShutdownSend, 1<<20, 0, nil)
	r.send(VsockOpRW, 5000, 80, 0, 1<<20, 0, []byte("late"))
	lines, _ := r.drain()
	vsExpectLines(t, "packets", lines, "RST 80->5000")
	if r.c.DataAfterShutdown.Load() != 1 {
		t.Fatalf("DataAfterShutdown=%d", r.c.DataAfterShutdown.Load())
	}
}
