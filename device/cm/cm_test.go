package cm

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
	"falconnic/psp"
)

// cmWorld is the connection manager's test peer: daemons (each a
// Manager with NICs, their ports on one manual clock) joined by a
// fabric whose CM messages wait until the test delivers them, so a test
// chooses their order, drops or repeats them, and moves time itself.
type cmWorld struct {
	t       *testing.T
	clk     *clock.Manual
	ctx     context.Context
	mu      sync.Mutex
	queue   []cmInFlight
	daemons map[netip.AddrPort]*cmDaemon
	ports   []*port.Port
	// batching: daemons added from now on carry Falcon packets in
	// batches (BatchNet, cmBatchNet).
	batching bool
}

type cmInFlight struct {
	from, to netip.AddrPort
	b        []byte
}

// cmDaemon is one daemon of a cmWorld.
type cmDaemon struct {
	w    *cmWorld
	addr netip.AddrPort
	cm   *Manager
	nics map[byte]*cmNIC
}

// cmNIC is one NIC: its agent and a protocol (RDMA's number) that logs
// what the agent hands it.
type cmNIC struct {
	mac   [6]byte
	port  *port.Port
	agent *Agent
	conns map[[6]byte]*falcon.Conn // up, per peer (on the port's goroutine)
	log   []string
	// The NIC's RDMA ULP acknowledges every push; its pushes that
	// completed acknowledged or not (on the port's goroutine).
	pushOK, pushFailed int
	// psp counts the NIC's SAs' datagrams (secure).
	psp *psp.Counters
}

// OnRequest implements falcon.ULP: every push is acknowledged.
func (n *cmNIC) OnRequest(c *falcon.Conn, r *falcon.Request) { _ = c.AckPush(r.RSN) }

// OnCompletion implements falcon.ULP.
func (n *cmNIC) OnCompletion(c *falcon.Conn, cpl *falcon.Completion) {
	if cpl.Status == tl.CmplAck {
		n.pushOK++
	} else {
		n.pushFailed++
	}
}

// OnXon implements falcon.ULP.
func (n *cmNIC) OnXon(*falcon.Conn) {}

func newCMWorld(t *testing.T) *cmWorld {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &cmWorld{t: t, clk: clock.NewManual(time.Second), ctx: ctx, daemons: map[netip.AddrPort]*cmDaemon{}}
}

func cmMAC(b byte) [6]byte { return [6]byte{0x52, 0x54, 0, 0, 0, b} }

// daemon adds a daemon at 192.0.2.n with NICs of the given MAC bytes.
func (w *cmWorld) daemon(n byte, macs ...byte) *cmDaemon {
	d := &cmDaemon{w: w, addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, n}), 4791), nics: map[byte]*cmNIC{}}
	if w.batching {
		d.cm = New(cmBatchNet{d})
	} else {
		d.cm = New(d)
	}
	w.daemons[d.addr] = d
	for _, b := range macs {
		nic := &cmNIC{mac: cmMAC(b), port: port.New(w.clk, nil), conns: map[[6]byte]*falcon.Conn{}}
		nic.agent = d.cm.Attach(nic.mac, nic.port)
		nic.agent.Register(wire.ProtoRDMA, Proto{
			Config: func(c *falcon.ConnConfig) { c.Ordered = true },
			Local:  func(c *falcon.ConnConfig) { c.MTU = testLocalMTU },
			Up: func(peer [6]byte, c *falcon.Conn) error {
				nic.conns[peer] = c
				nic.log = append(nic.log, fmt.Sprintf("up %x", peer[5]))
				return nil
			},
			Down: func(peer [6]byte, c *falcon.Conn) {
				if nic.conns[peer] == c {
					delete(nic.conns, peer)
				}
				nic.log = append(nic.log, fmt.Sprintf("down %x", peer[5]))
			},
			Failed: func(peer [6]byte) { nic.log = append(nic.log, fmt.Sprintf("failed %x", peer[5])) },
		})
		nic.port.SetULP(wire.ProtoRDMA, nic)
		go nic.port.Run(w.ctx)
		w.ports = append(w.ports, nic.port)
		d.nics[b] = nic
	}
	return d
}

// SendToMAC implements Net: to every other daemon (no MAC learning).
func (d *cmDaemon) SendToMAC(mac [6]byte, payload []byte) error {
	for addr := range d.w.daemons {
		if addr != d.addr {
			d.Send(addr, payload)
		}
	}
	return nil
}

// Send implements Net: the message waits for the test (deliver).
func (d *cmDaemon) Send(dst netip.AddrPort, payload []byte) error {
	d.w.mu.Lock()
	d.w.queue = append(d.w.queue, cmInFlight{from: d.addr, to: dst, b: append([]byte(nil), payload...)})
	d.w.mu.Unlock()
	return nil
}

// FalconLink implements Net: packets go straight to the peer's demux.
func (d *cmDaemon) FalconLink(peer netip.AddrPort) falcon.Link {
	return linkFunc(func(pkt []byte, flow uint32) {
		if p := d.w.daemons[peer]; p != nil {
			p.cm.ReceiveFalcon(d.addr, flow, pkt)
		}
	})
}

type linkFunc func(pkt []byte, flow uint32)

func (f linkFunc) Send(pkt []byte, flow uint32) { f(pkt, flow) }

// sync waits until every port has handled what it was given, and run the
// timers due on the clock.
func (w *cmWorld) sync() {
	for range 2 { // the second item runs after the first's timer pass
		for _, p := range w.ports {
			p.Call(func(*falcon.Endpoint) {})
		}
	}
}

// take returns the messages waiting on the fabric (after sync).
func (w *cmWorld) take() []cmInFlight {
	w.sync()
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue
	w.queue = nil
	return q
}

// deliver hands messages to their daemons.
func (w *cmWorld) deliver(msgs ...cmInFlight) {
	for _, m := range msgs {
		if d := w.daemons[m.to]; d != nil {
			d.cm.ReceiveCM(m.from, 0, m.b)
		}
	}
	w.sync()
}

// settle delivers messages until none is left.
func (w *cmWorld) settle() {
	for range 100 {
		q := w.take()
		if len(q) == 0 {
			return
		}
		w.deliver(q...)
	}
	w.t.Fatal("CM messages kept coming")
}

// on runs fn on nic's port goroutine.
func (n *cmNIC) on(fn func()) { n.port.Call(func(*falcon.Endpoint) { fn() }) }

// dial has nic start a connection to peer.
func (n *cmNIC) dial(peer byte) { n.on(func() { n.agent.Dial(wire.ProtoRDMA, cmMAC(peer)) }) }

// conn returns nic's connection to peer (nil: none) and its config.
func (n *cmNIC) conn(peer byte) (c *falcon.Conn, cfg falcon.ConnConfig) {
	n.on(func() {
		if c = n.conns[cmMAC(peer)]; c != nil {
			cfg = c.Config()
		}
	})
	return c, cfg
}

func (n *cmNIC) history() string {
	var s []string
	n.on(func() { s = append(s, n.log...) })
	return fmt.Sprint(s)
}

// paired checks that a and b have one connection to each other, whose
// CIDs and initial sequence numbers mirror each other.
func paired(t *testing.T, a, b *cmNIC) {
	t.Helper()
	ca, x := a.conn(b.mac[5])
	cb, y := b.conn(a.mac[5])
	switch {
	case ca == nil || cb == nil:
		t.Fatalf("connections %v and %v (logs %s, %s)", ca, cb, a.history(), b.history())
	case x.DCID != y.SCID || y.DCID != x.SCID:
		t.Fatalf("CIDs do not mirror: %d→%d and %d→%d", x.SCID, x.DCID, y.SCID, y.DCID)
	case x.TxReqPSN != y.RxReqPSN || x.TxDataPSN != y.RxDataPSN || x.TxRSN != y.RxRSN ||
		y.TxReqPSN != x.RxReqPSN || y.TxDataPSN != x.RxDataPSN || y.TxRSN != x.RxRSN:
		t.Fatalf("sequence numbers do not mirror: %+v / %+v", x, y)
	case !x.Ordered || !y.Ordered:
		t.Fatal("the protocol's option (ordered) was not applied")
	}
	if x.SCID == 0 || x.SCID >= 1<<24 || y.SCID == 0 || y.SCID >= 1<<24 {
		t.Fatalf("CIDs %d and %d outside 24 bits", x.SCID, y.SCID)
	}
}

// testLocalMTU is the MTU the test protocol's Proto.Local sets.
const testLocalMTU = 9000

// TestCMSetsUpAConnectionAcrossDaemons: REQ, REP, and both NICs have the
// mirrored connection; the dialer's REQ went to every peer daemon.
func TestCMSetsUpAConnectionAcrossDaemons(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	d1.nics[0xa].dial(0xb)
	w.settle()
	paired(t, d1.nics[0xa], d2.nics[0xb])
	if _, cfg := d1.nics[0xa].conn(0xb); cfg.MTU == testLocalMTU {
		t.Fatal("a connection across daemons took the protocol's local options")
	}
	if d1.cm.Stats.REQSent.Load() != 1 || d2.cm.Stats.REPSent.Load() != 1 || d1.cm.Stats.ConnsUp.Load() != 1 {
		t.Fatalf("dialer %v acceptor %v", d1.cm.Stats.Set().NonZero(), d2.cm.Stats.Set().NonZero())
	}
}

// TestCMSetsUpAConnectionInsideADaemon: two NICs of one daemon exchange
// the same messages port to port, and their connection uses the port link
// with the protocol's local options at both ends.
func TestCMSetsUpAConnectionInsideADaemon(t *testing.T) {
	w := newCMWorld(t)
	d := w.daemon(1, 0xa, 0xb)
	d.nics[0xb].dial(0xa)
	w.settle()
	paired(t, d.nics[0xa], d.nics[0xb])
	if _, cfg := d.nics[0xa].conn(0xb); cfg.Peer == nil {
		t.Fatal("no peer link")
	} else if _, ok := cfg.Peer.(falcon.InProcessLink); !ok {
		t.Fatalf("peer link %T, want the port link", cfg.Peer)
	}
	for _, n := range []struct{ nic, peer byte }{{0xa, 0xb}, {0xb, 0xa}} {
		if _, cfg := d.nics[n.nic].conn(n.peer); cfg.MTU != testLocalMTU {
			t.Fatalf("NIC %x: MTU %d, want the protocol's local one, %d", n.nic, cfg.MTU, testLocalMTU)
		}
	}
	if len(w.queue) != 0 {
		t.Fatal("a message between two NICs of one daemon went to the fabric")
	}
}

// TestCMREQRaceBothWays: both NICs dial at once and the REQs cross; in
// either order of arrival (and inside one daemon) the lower MAC's REQ
// wins, the other set-up is dropped, and one connection results.
func TestCMREQRaceBothWays(t *testing.T) {
	for _, tc := range []struct {
		name     string
		firstToA bool
		local    bool
	}{{"A's REQ arrives first", false, false}, {"B's REQ arrives first", true, false}, {"inside one daemon", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCMWorld(t)
			var a, b *cmNIC
			var da, db *cmDaemon
			if tc.local {
				da = w.daemon(1, 0xa, 0xb)
				db = da
			} else {
				da, db = w.daemon(1, 0xa), w.daemon(2, 0xb)
			}
			a, b = da.nics[0xa], db.nics[0xb]
			if tc.local {
				// B dials before A's REQ reaches it: B's port is held
				// until both REQs are out.
				release := make(chan struct{})
				b.port.Do(func(*falcon.Endpoint) { <-release })
				b.port.Do(func(*falcon.Endpoint) { b.agent.Dial(wire.ProtoRDMA, a.mac) })
				a.dial(0xb)
				close(release)
			} else {
				a.dial(0xb)
				b.dial(0xa)
			}
			if !tc.local {
				q := w.take()
				if len(q) != 2 {
					t.Fatalf("%d messages, want the two REQs", len(q))
				}
				if (q[0].to == da.addr) != tc.firstToA {
					q[0], q[1] = q[1], q[0]
				}
				w.deliver(q...)
			}
			w.settle()
			paired(t, a, b)
			if n := da.cm.Stats.RaceWon.Load(); n != 1 {
				t.Errorf("A (lower MAC) ignored %d REQs, want B's one", n)
			}
			n := da.cm.Stats.ConnsUp.Load()
			if !tc.local {
				n += db.cm.Stats.ConnsUp.Load()
			}
			if n != 2 {
				t.Errorf("%d connections set up, want one per NIC", n)
			}
			if a.history() != "[up b]" || b.history() != "[up a]" {
				t.Errorf("A saw %s, B saw %s", a.history(), b.history())
			}
			// B's own set-up's CID went back: two CIDs in use in all.
			cids := 0
			for _, d := range []*cmDaemon{da, db} {
				d.cm.mu.RLock()
				cids += len(d.cm.cids)
				d.cm.mu.RUnlock()
				if tc.local {
					break
				}
			}
			if cids != 2 {
				t.Errorf("%d CIDs in use, want 2", cids)
			}
		})
	}
}

// TestCMRepeatedREQGetsTheSameREP: a REQ repeated (our REP was lost)
// draws the same REP byte for byte and no second connection; a repeated
// REP is stale at the dialer.
func TestCMRepeatedREQGetsTheSameREP(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	d1.nics[0xa].dial(0xb)
	req := w.take()
	w.deliver(req...)
	rep := w.take()
	w.deliver(req...) // the REP is lost; the same REQ comes again
	again := w.take()
	if len(rep) != 1 || len(again) != 1 || !bytes.Equal(rep[0].b, again[0].b) {
		t.Fatalf("REP %v, after the repeated REQ %v", rep, again)
	}
	if n := d2.cm.Stats.RepeatedREQ.Load(); n != 1 || d2.cm.Stats.ConnsUp.Load() != 1 {
		t.Fatalf("acceptor %v", d2.cm.Stats.Set().NonZero())
	}
	w.deliver(rep...)
	w.deliver(again...)
	paired(t, d1.nics[0xa], d2.nics[0xb])
	if n := d1.cm.Stats.Stale.Load(); n != 1 {
		t.Fatalf("stale REPs %d, want the repeat", n)
	}
}

// TestCMRejectsWhatItCannotServe: REQs for a MAC the daemon lacks, for a
// protocol the NIC has no function for (or no protocol at all), and from a source claiming one
// of the daemon's own NICs are refused, each counted; the dialer keeps
// retrying on the clock and gives up after cmMaxTries.
func TestCMRejectsWhatItCannotServe(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	to := func(m cmMsg) { w.deliver(cmInFlight{from: d1.addr, to: d2.addr, b: m.append(nil)}) }
	to(cmMsg{typ: cmREQ, src: cmMAC(0xa), dst: cmMAC(0xc), srcCID: 5})
	to(cmMsg{typ: cmREQ, proto: uint8(wire.ProtoNVMe), src: cmMAC(0xa), dst: cmMAC(0xb), srcCID: 6})
	to(cmMsg{typ: cmREQ, src: cmMAC(0xb), dst: cmMAC(0xb), srcCID: 7})
	to(cmMsg{typ: cmREQ, proto: 16 + uint8(wire.ProtoRDMA), src: cmMAC(0xa), dst: cmMAC(0xb), srcCID: 8})
	w.deliver(cmInFlight{from: d1.addr, to: d2.addr, b: []byte("FNCM but short")})
	rejs := w.take()
	if len(rejs) != 3 {
		t.Fatalf("%d answers, want three REJs", len(rejs))
	}
	for i, want := range []uint32{5, 6, 8} {
		if m, err := decodeCM(rejs[i].b); err != nil || m.typ != cmREJ || m.dstCID != want {
			t.Errorf("answer %d: %+v %v", i, m, err)
		}
	}
	st := &d2.cm.Stats
	if st.NoNIC.Load() != 1 || st.NoULP.Load() != 2 || st.Spoofed.Load() != 1 || st.DecodeErr.Load() != 1 || st.REJSent.Load() != 3 {
		t.Fatalf("counters %v", st.Set().NonZero())
	}

	// A dials a NIC no daemon has: every REQ draws a REJ, the dialer
	// retries each cmRetryEvery and then gives up.
	a := d1.nics[0xa]
	a.dial(0xc)
	for i := 0; i < cmMaxTries+2; i++ {
		w.settle()
		w.clk.Advance(cmRetryEvery)
	}
	w.settle()
	if n := d1.cm.Stats.REQSent.Load(); n != cmMaxTries {
		t.Errorf("%d REQs sent, want %d", n, cmMaxTries)
	}
	if d1.cm.Stats.GaveUp.Load() != 1 || d1.cm.Stats.REJRecv.Load() != cmMaxTries || a.history() != "[failed c]" {
		t.Errorf("dialer %v, protocol saw %s", d1.cm.Stats.Set().NonZero(), a.history())
	}
	d1.cm.mu.RLock()
	defer d1.cm.mu.RUnlock()
	if len(d1.cm.cids) != 0 {
		t.Errorf("the abandoned set-up kept its CID")
	}
}

// TestCMLostREQIsRetried: a REQ lost on the fabric is sent again after
// cmRetryEvery on the port's clock, and the connection comes up.
func TestCMLostREQIsRetried(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	d1.nics[0xa].dial(0xb)
	if lost := w.take(); len(lost) != 1 {
		t.Fatalf("%d messages, want the REQ", len(lost))
	}
	w.clk.Advance(cmRetryEvery - 1)
	if q := w.take(); len(q) != 0 {
		t.Fatal("REQ resent early")
	}
	w.clk.Advance(1)
	w.settle()
	paired(t, d1.nics[0xa], d2.nics[0xb])
	if n := d1.cm.Stats.REQSent.Load(); n != 2 {
		t.Fatalf("%d REQs sent, want 2", n)
	}
}

// TestCMRestartedPeerReplacesTheConnection: a NIC that comes back on a new
// daemon (same MAC, new address and CIDs) dials again; the NIC that stayed
// takes the new connection, then closes the old one.
func TestCMRestartedPeerReplacesTheConnection(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	a := d1.nics[0xa]
	a.dial(0xb)
	w.settle()
	old, oldCfg := a.conn(0xb)
	delete(w.daemons, d2.addr) // B's daemon is gone
	d3 := w.daemon(3, 0xb)
	d3.nics[0xb].dial(0xa)
	w.settle()
	paired(t, a, d3.nics[0xb])
	if now, _ := a.conn(0xb); now == old {
		t.Fatal("the old connection stayed")
	}
	if h := a.history(); h != "[up b up b down b]" {
		t.Errorf("A saw %s, want the new connection up before the old one down", h)
	}
	var gone bool
	a.port.Call(func(ep *falcon.Endpoint) { gone = ep.Conn(oldCfg.SCID) == nil })
	if !gone || d1.cm.Stats.Replaced.Load() != 1 {
		t.Errorf("old connection closed %v, replaced %d", gone, d1.cm.Stats.Replaced.Load())
	}
	d1.cm.mu.RLock()
	defer d1.cm.mu.RUnlock()
	if d1.cm.cids[oldCfg.SCID] != nil {
		t.Error("the old connection's CID is still owned")
	}
}

// TestCMDeadConnectionIsReplacedOnDial: Dial for a peer whose connection
// the transport declared dead closes it and sets up a new one.
func TestCMDeadConnectionIsReplacedOnDial(t *testing.T) {
	w := newCMWorld(t)
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	a, b := d1.nics[0xa], d2.nics[0xb]
	a.dial(0xb)
	w.settle()
	// A's connection dies (as of retries exhausted; the test closes it).
	old, _ := a.conn(0xb)
	a.port.Call(func(ep *falcon.Endpoint) { _ = ep.Close(old.SCID()) })
	if !old.Dead() {
		t.Fatal("a closed connection is not dead")
	}
	a.dial(0xb)
	w.settle()
	paired(t, a, b)
	if h := a.history(); h != "[up b down b up b]" {
		t.Errorf("A saw %s", h)
	}
}
