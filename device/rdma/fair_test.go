package rdma

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"falconnic/device/cm"
	"falconnic/device/port"
	"falconnic/device/storage"
	"falconnic/falcon"
	"falconnic/nvme"
	"falconnic/verbs"
)

// fairRig is two NICs, A and B, each with one Falcon port carrying both
// an RDMA function and an NVMe function: A's RDMA QP 16 writes to B's QP
// 17, and A's NVMe path reaches a memory namespace B exports — both
// protocols share each NIC's one endpoint, its resource pools and its
// port goroutine.
type fairRig struct {
	t            *testing.T
	a, b         *vm
	pa           *port.Port
	path         *nvme.Path
	qa           qpRings
	src, dst     uint64 // RDMA source and destination IOVAs
	nvmeDone     atomic.Uint64
	nvmeFailed   atomic.Uint64
	nvmeInFlight atomic.Int64
	stop         atomic.Bool
}

const (
	fairRDMALen = 64 << 10
	fairNVMeLen = 64 << 10
	fairNVMeQD  = 32
)

func newFairRig(t *testing.T) *fairRig {
	mgr := cm.NewOnFabric(nil)
	pa, pb := port.New(nil, nil), port.New(nil, nil)
	r := &fairRig{t: t, pa: pa, a: newVMOn(t, 0xa, mgr, pa), b: newVMOn(t, 0xb, mgr, pb)}
	ini, tgt := storage.NewNVMeFunc(pa, 1), storage.NewNVMeFunc(pb, 2) // before Run: SetULP
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go pa.Run(ctx)
	go pb.Run(ctx)
	var err error
	pb.Call(func(*falcon.Endpoint) {
		_, err = tgt.AddNamespace(storage.NamespaceSpec{NSID: 1, Backing: storage.NamespaceMemory, Size: 8 << 20})
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.path, _, err = storage.ConnectNVMeLocal(ini, tgt, storage.LocalCIDs(mgr, ini, tgt)); err != nil {
		t.Fatal(err)
	}
	r.qa = r.a.setupRC(16)
	r.b.setupRC(17)
	r.a.connect(16, r.b.mac, 17)
	r.b.connect(17, r.a.mac, 16)
	_, r.src = r.a.regMR(1, fairRDMALen, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	_, r.dst = r.b.regMR(1, fairRDMALen, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	t.Cleanup(func() { r.stop.Store(true) })
	return r
}

// write posts one signaled RDMA WRITE of fairRDMALen bytes from A to B.
func (r *fairRig) write() {
	r.a.post(r.qa, 16, func(w verbs.SendWQE) {
		w.SetOpcode(verbs.WRWrite)
		w.SetFlags(2)
		w.SetRemoteAddr(r.dst)
		w.SetRKey(1<<8 | 1)
		w.SGE(0).Set(r.src, fairRDMALen, 1<<8)
		w.SetNumSGE(1)
		w.SetLength(fairRDMALen)
	})
}

// rdmaOK waits for one send completion and checks it succeeded.
func (r *fairRig) rdmaOK() {
	r.t.Helper()
	if st := r.a.pollCQ(r.qa.scq).Status(); st != verbs.WCSuccess {
		r.t.Fatalf("RDMA WRITE completed with %v", st)
	}
}

// nextCQE is pollCQ for a goroutine other than the test's: it reports
// instead of failing (false: no CQE within waitBound).
func (r *fairRig) nextCQE() (verbs.WCStatus, bool) {
	v, gpa := r.a, r.qa.scq
	for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		var st verbs.WCStatus
		ok := false
		v.r.Call(func(*Func) {
			prod := binary.LittleEndian.Uint32(v.at(gpa+128, 4))
			cons := binary.LittleEndian.Uint32(v.at(gpa+256, 4))
			if prod != cons {
				st, ok = verbs.WC(v.at(gpa+384+uint64(cons&63)<<6, 48)).Status(), true
				binary.LittleEndian.PutUint32(v.at(gpa+256, 4), (cons+1)&63)
			}
		})
		if ok {
			return st, true
		}
	}
	return 0, false
}

// nvmeCmd returns a write of fairNVMeLen bytes at block slot i; done runs
// on A's port goroutine when it completes.
func (r *fairRig) nvmeCmd(i int, done func(*nvme.Command)) *nvme.Command {
	return &nvme.Command{Op: nvme.OpWrite, NSID: 1, SLBA: uint64(i%64) * fairNVMeLen / 512, Blocks: fairNVMeLen / 512,
		Data: [][]byte{make([]byte, fairNVMeLen)}, Done: done}
}

// pumpNVMe keeps fairNVMeQD writes in flight on A's NVMe path until stop:
// each completion submits the next command (on A's port goroutine).
func (r *fairRig) pumpNVMe() {
	var done func(*nvme.Command)
	done = func(c *nvme.Command) {
		r.nvmeInFlight.Add(-1)
		if !c.Status.OK() {
			r.nvmeFailed.Add(1)
		}
		r.nvmeDone.Add(1)
		if r.stop.Load() {
			return
		}
		c.Status = 0
		r.nvmeInFlight.Add(1)
		if r.path.Submit(c) != nil {
			r.nvmeInFlight.Add(-1)
			r.nvmeFailed.Add(1)
		}
	}
	r.pa.Call(func(*falcon.Endpoint) {
		for i := range fairNVMeQD {
			r.nvmeInFlight.Add(1)
			if err := r.path.Submit(r.nvmeCmd(i, done)); err != nil {
				r.t.Errorf("submit: %v", err)
			}
		}
	})
}

// waitFor waits (bounded by waitBound, a safety net, not an assertion on
// speed) until cond holds.
func (r *fairRig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(waitBound); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("waited in vain for %s", what)
		}
	}
}

// TestPortSaturatingNVMeDoesNotStarveRDMA: while A's NVMe path keeps its
// queue full of 64 KiB writes, RDMA WRITEs of A's QP on the same port
// still complete one after another, and the NVMe stream keeps going.
func TestPortSaturatingNVMeDoesNotStarveRDMA(t *testing.T) {
	r := newFairRig(t)
	r.pumpNVMe()
	r.waitFor("the NVMe stream to start", func() bool { return r.nvmeDone.Load() >= fairNVMeQD })
	const writes = 20
	for i := range writes {
		before := r.nvmeDone.Load()
		r.write()
		r.rdmaOK()
		if i == writes-1 {
			r.waitFor("NVMe progress beside RDMA", func() bool { return r.nvmeDone.Load() > before })
		}
	}
	if r.nvmeInFlight.Load() == 0 {
		t.Error("the NVMe stream stopped: it did not saturate the port")
	}
	r.stop.Store(true)
	r.waitFor("the NVMe stream to drain", func() bool { return r.nvmeInFlight.Load() == 0 })
	if n := r.nvmeFailed.Load(); n != 0 {
		t.Errorf("%d NVMe commands failed", n)
	}
}

// TestPortSaturatingRDMADoesNotStarveNVMe: while A's QP keeps eight 64 KiB
// RDMA WRITEs in flight, NVMe commands on A's path through the same port
// complete one after another, and the RDMA stream keeps going.
func TestPortSaturatingRDMADoesNotStarveNVMe(t *testing.T) {
	r := newFairRig(t)
	var rdmaDone, rdmaBad atomic.Uint64
	stopped := make(chan struct{})
	go func() { // the RDMA stream: a completion makes room for the next WRITE
		defer close(stopped)
		for range 8 {
			r.write()
		}
		for inFlight := 8; inFlight > 0; {
			st, ok := r.nextCQE()
			if !ok || st != verbs.WCSuccess {
				rdmaBad.Add(1)
				return
			}
			rdmaDone.Add(1)
			if r.stop.Load() {
				inFlight--
				continue
			}
			r.write()
		}
	}()
	r.waitFor("the RDMA stream to start", func() bool { return rdmaDone.Load() >= 8 })
	const cmds = 20
	for i := range cmds {
		before := rdmaDone.Load()
		done := make(chan nvme.Status, 1)
		var err error
		r.pa.Call(func(*falcon.Endpoint) {
			err = r.path.Submit(r.nvmeCmd(i, func(c *nvme.Command) { done <- c.Status }))
		})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case st := <-done:
			if !st.OK() {
				t.Fatalf("NVMe write %d: %v", i, st)
			}
		case <-time.After(waitBound):
			t.Fatalf("NVMe write %d never completed beside the RDMA stream", i)
		}
		if i == cmds-1 {
			r.waitFor("RDMA progress beside NVMe", func() bool { return rdmaDone.Load() > before })
		}
	}
	r.stop.Store(true)
	<-stopped
	if n := rdmaBad.Load(); n != 0 {
		t.Error("an RDMA WRITE failed or never completed")
	}
}
