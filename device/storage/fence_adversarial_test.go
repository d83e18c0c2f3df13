package storage

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"falconnic/device/cm"
	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/internal/clock"
	"falconnic/nvme"
)

// fenceWorld is two daemons' connection managers, one NIC each (an
// initiator with a disk, a target with a namespace), their ports on one
// manual clock. Falcon packets go straight to the peer's demux; CM
// messages wait on a queue the test delivers, or holds back — a REQ
// lost or slow on the fabric.
type fenceWorld struct {
	t     *testing.T
	clk   *clock.Manual
	mu    sync.Mutex
	hold  bool
	queue []fenceMsg
	mgrs  map[netip.AddrPort]*cm.Manager
	ports []*port.Port

	ini, tgt *NVMeFunc
	be       *heldBackend
	blk      *Blk
}

type fenceMsg struct {
	from, to netip.AddrPort
	b        []byte
}

// fenceNet is one daemon's cm.Net in a fenceWorld.
type fenceNet struct {
	w          *fenceWorld
	self, peer netip.AddrPort
}

func (n fenceNet) SendToMAC(_ [6]byte, b []byte) error { return n.Send(n.peer, b) }

func (n fenceNet) Send(dst netip.AddrPort, b []byte) error {
	n.w.mu.Lock()
	n.w.queue = append(n.w.queue, fenceMsg{from: n.self, to: dst, b: append([]byte(nil), b...)})
	n.w.mu.Unlock()
	return nil
}

func (n fenceNet) FalconLink(peer netip.AddrPort) falcon.Link {
	return fenceLink(func(pkt []byte, flow uint32) { n.w.mgrs[peer].ReceiveFalcon(n.self, flow, pkt) })
}

type fenceLink func(pkt []byte, flow uint32)

func (f fenceLink) Send(pkt []byte, flow uint32) { f(pkt, flow) }

// heldBackend is a target's file: it keeps the next write it is given
// (holdNext) until the test releases it — a write slow in the target's
// backend — and does every other IO at once.
type heldBackend struct {
	*nvme.MemBackend
	port     *port.Port
	eng      *nvme.Engine
	holdNext bool
	held     []*nvme.IO
}

// Submit implements nvme.AsyncBackend (on the target port's goroutine).
func (h *heldBackend) Submit(io *nvme.IO) bool {
	if io.Op == nvme.OpWrite && h.holdNext {
		h.holdNext = false
		h.held = append(h.held, io)
		return true
	}
	io.Run(h.MemBackend)
	h.port.TryDo(func(*falcon.Endpoint) { h.eng.IODone(io) })
	return true
}

// release lands the held write now.
func (w *fenceWorld) release() {
	w.tgt.Port.Call(func(*falcon.Endpoint) {
		for _, io := range w.be.held {
			io.Run(w.be.MemBackend)
			w.tgt.Engine.IODone(io)
		}
		w.be.held = nil
	})
}

func (w *fenceWorld) heldWrites() (n int) {
	w.tgt.Port.Call(func(*falcon.Endpoint) { n = len(w.be.held) })
	return n
}

var (
	fenceIni = [6]byte{0x52, 0x54, 0, 0, 0, 1}
	fenceTgt = [6]byte{0x52, 0x54, 0, 0, 0, 2}
)

const fenceTimeout = 2 * time.Second // the initiator's command timeout

func newFenceWorld(t *testing.T) *fenceWorld {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &fenceWorld{t: t, clk: clock.NewManual(time.Second), mgrs: map[netip.AddrPort]*cm.Manager{}}
	ai, at := netip.MustParseAddrPort("192.0.2.1:4791"), netip.MustParseAddrPort("192.0.2.2:4791")
	mi, mt := cm.New(fenceNet{w, ai, at}), cm.New(fenceNet{w, at, ai})
	w.mgrs[ai], w.mgrs[at] = mi, mt

	pi, pt := port.New(w.clk, nil), port.New(w.clk, nil)
	w.ports = []*port.Port{pi, pt}
	w.ini, w.tgt = NewNVMeFunc(pi, 1), NewNVMeFunc(pt, 2)
	w.ini.MAC, w.tgt.MAC = fenceIni, fenceTgt
	w.ini.AttachCM(mi.Attach(fenceIni, pi))
	w.tgt.AttachCM(mt.Attach(fenceTgt, pt))
	w.ini.Engine.SetCommandTimeout(fenceTimeout)
	w.be = &heldBackend{MemBackend: nvme.NewMemBackend(1 << 20), port: pt, eng: w.tgt.Engine}
	ns, err := nvme.NewNamespace(nvme.NamespaceConfig{NSID: 1, BlockSize: 512, Blocks: 2048, Backend: w.be})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.tgt.Engine.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	for _, p := range w.ports {
		go p.Run(ctx)
	}

	dp := NewDiskPaths(w.ini, fenceTgt)
	pi.Call(func(*falcon.Endpoint) { w.ini.Dial(fenceTgt, dp.Use) })
	var path *nvme.Path
	w.run("the first path", func() bool {
		select {
		case path = <-dp.First():
			return true
		default:
			return false
		}
	})
	w.blk, err = NewBlk(BlkConfig{Port: pi, Path: path, NSID: 1, Info: nvme.NamespaceInfo{Blocks: 2048, BlockSize: 512},
		Paths: dp, RetryWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	pi.Call(func(*falcon.Endpoint) { dp.Attach(w.blk) })
	return w
}

// step lets the ports handle what they were given, delivers the CM
// messages unless they are held back, and moves the clock 100 µs.
func (w *fenceWorld) step() {
	for range 2 {
		for _, p := range w.ports {
			p.Call(func(*falcon.Endpoint) {})
		}
	}
	w.mu.Lock()
	var q []fenceMsg
	if !w.hold {
		q, w.queue = w.queue, nil
	}
	w.mu.Unlock()
	for _, m := range q {
		w.mgrs[m.to].ReceiveCM(m.from, 0, m.b)
	}
	w.clk.Advance(100 * time.Microsecond)
}

// run steps until cond holds, for at most a minute of the clock.
func (w *fenceWorld) run(what string, cond func() bool) {
	w.t.Helper()
	for end := w.clk.Now() + time.Minute; !cond(); w.step() {
		if w.clk.Now() > end {
			w.t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// write has the disk write 4 KiB of data at LBA 0, as one virtio-blk
// request, and returns the channel its completion arrives on.
func (w *fenceWorld) write(data []byte) (*blkReq, chan *blkReq) {
	wk := &blkWorker{b: w.blk, cpl: make(chan *blkReq, 1)}
	r := &blkReq{w: wk, pending: 1, result: blkStatusOK}
	r.doneFn = r.done
	r.cmds = []nvme.Command{{Op: nvme.OpWrite, NSID: 1, SLBA: 0, Blocks: 8, Data: [][]byte{data}, Done: r.doneFn}}
	w.ini.Port.Call(func(*falcon.Endpoint) { w.blk.submit(r, &r.cmds[0]) })
	return r, wk.cpl
}

// setHold holds the CM messages back (true), or lets them go.
func (w *fenceWorld) setHold(on bool) {
	w.mu.Lock()
	w.hold = on
	w.mu.Unlock()
}

func completed(c chan *blkReq) bool { return len(c) > 0 }

// TestAdversarialRetriedWriteFenced [issue 18, finding 6]: a write times
// out while it sits in the target's backend, and the REQ that replaces
// its path is slow on the fabric. The retried copy is not acknowledged
// while the old write is unfenced: the disk retired the path and the copy
// waits for the replacement, whose set-up has the target fence the old
// path's write (WriteFenced) until it lands. The guest's next write to
// the same blocks is then the data the namespace keeps. Without the
// wiring the copy went out on the old path and was acknowledged at once,
// the guest's next write too, and the stale write landed over it.
func TestAdversarialRetriedWriteFenced(t *testing.T) {
	w := newFenceWorld(t)
	stale, newer := bytes.Repeat([]byte{0xa1}, 4096), bytes.Repeat([]byte{0xc3}, 4096)

	w.be.holdNext = true
	r1, done1 := w.write(stale)
	w.run("the write in the target's backend", func() bool { return w.heldWrites() == 1 })
	w.setHold(true) // the replacing REQ is slow
	w.clk.Advance(fenceTimeout + time.Second)
	for range 2000 { // 200 ms: the REQ would have been resent once
		w.step()
	}
	if completed(done1) {
		// The unwired disk: the retried copy went out on the old path.
		// Play the guest on: its next write, then the stale one lands.
		if r1.result == blkStatusOK {
			_, done2 := w.write(newer)
			w.run("the guest's next write", func() bool { return completed(done2) })
		}
		w.setHold(false)
		for range 100 {
			w.step()
		}
		w.release()
		for range 100 {
			w.step()
		}
		t.Fatalf("the retried write was acknowledged (result %d) while the timed-out one was still in the target's backend, unfenced; the namespace then held the %s data",
			r1.result, map[bool]string{true: "stale", false: "newer"}[bytes.Equal(w.be.Bytes()[:4096], stale)])
	}
	if w.blk.Stats.PathsRetired.Load() != 1 || w.blk.Stats.Parked.Load() == 0 {
		t.Fatalf("blk %v", w.blk.Stats.Set().NonZero())
	}

	// The REQ arrives: the target replaces the path, fencing its write.
	w.setHold(false)
	w.run("the retried copy fenced at the target", func() bool { return w.tgt.Engine.Stats.WriteFenced.Load() > 0 })
	for range 1000 {
		w.step()
	}
	if completed(done1) {
		t.Fatal("the retried write was acknowledged while the old path's write was still in the target's backend")
	}
	w.release() // the stale write lands; the fence lifts
	w.run("the retried write", func() bool { return completed(done1) })
	if r1.result != blkStatusOK || !bytes.Equal(w.be.Bytes()[:4096], stale) {
		t.Fatalf("retried write: result %d", r1.result)
	}
	r2, done2 := w.write(newer)
	w.run("the guest's next write", func() bool { return completed(done2) })
	if r2.result != blkStatusOK {
		t.Fatalf("next write: result %d", r2.result)
	}
	for range 1000 { // anything still in flight lands
		w.step()
	}
	if !bytes.Equal(w.be.Bytes()[:4096], newer) {
		t.Fatal("the namespace does not hold the guest's last write")
	}
}

// TestBlkRetryAfterReplacementKeepsTheNewPath: a write in flight when its
// path is replaced fails with a path error on the old path and is
// resubmitted on the new one, which stays the disk's path (only a failure
// on the current path while it is up retires it); the target fences the
// copy until the old path's write has landed.
func TestBlkRetryAfterReplacementKeepsTheNewPath(t *testing.T) {
	w := newFenceWorld(t)
	data := bytes.Repeat([]byte{0x5e}, 4096)
	w.be.holdNext = true
	r, done := w.write(data)
	w.run("the write in the target's backend", func() bool { return w.heldWrites() == 1 })
	var old *nvme.Path
	w.ini.Port.Call(func(*falcon.Endpoint) { old = w.blk.path; w.ini.Broken(fenceTgt, old) })
	w.run("the replacement, and the copy fenced", func() bool { return w.tgt.Engine.Stats.WriteFenced.Load() > 0 })
	w.release()
	w.run("the write", func() bool { return completed(done) })
	var cur *nvme.Path
	w.ini.Port.Call(func(*falcon.Endpoint) { cur = w.blk.path })
	if r.result != blkStatusOK || cur == nil || cur == old || w.blk.Stats.Retries.Load() != 1 || w.blk.Stats.PathsRetired.Load() != 0 {
		t.Fatalf("result %d, path replaced %v; blk %v", r.result, cur != nil && cur != old, w.blk.Stats.Set().NonZero())
	}
	if !bytes.Equal(w.be.Bytes()[:4096], data) {
		t.Fatal("the namespace does not hold the write")
	}
}
