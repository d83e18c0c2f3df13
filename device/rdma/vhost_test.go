package rdma

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"falconnic/device/cm"
	"falconnic/device/ether"
	"falconnic/device/ether/ethertest"
	"falconnic/device/port"
	"falconnic/vhostuser"
)

// vhostVM is a vm whose control frames travel through the NIC's virtio-net
// TX ring and whose replies come back on the RX ring, as falconnic.ko's
// do; the rings, MRs and page lists live in the front-end simulator's
// guest RAM.
func vhostVM(t *testing.T, macByte byte, mgr *cm.Manager) *vm {
	mac := []byte{0x52, 0x54, 0, 0, 0, macByte}
	name := "n" + string('a'+rune(macByte))
	n, err := ether.New(ether.Config{Name: name, Socket: filepath.Join(t.TempDir(), name+".sock"), MAC: mac}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fp := port.New(nil, nil)
	r := New(mac, n.Deliver, mgr.Attach([6]byte(mac), fp), fp)
	n.Attach("rdma", r)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go fp.Run(ctx)
	g := ethertest.Attach(t, n, 1, ethertest.Acked1)
	// The vhost-user session's memory table, as vhostuser hands it to the
	// NIC, which passes it on to its upper function.
	payload, fds := g.Mem.MemTablePayload()
	var regs []*vhostuser.Region
	for i, reg := range vhostuser.MemTableRegions(payload) {
		m, err := vhostuser.MapRegion(fds[i], reg.GPA(), reg.Size(), reg.UVA(), reg.MmapOffset())
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, m)
	}
	mt, err := vhostuser.NewMemTable(regs)
	if err != nil {
		t.Fatal(err)
	}
	r.SetMemTable(mt)
	v := &vm{t: t, r: r, frames: make(chan []byte, 64), inst: 0x5000 + uint64(macByte)}
	copy(v.mac[:], mac)
	v.xmit = func(f []byte) { g.Send(0, f) }
	v.bytesAt = func(gpa uint64, k int) []byte { return g.Mem.Bytes(gpa, uint64(k)) }
	v.allocRAM = func(k int) uint64 { return g.Mem.Alloc(1, uint64(k), 4096) }
	v.fe = g.FE
	g.PostRX(0, ethertest.RingSize)
	rxCtx, stopRX := context.WithCancel(ctx)
	rxDone := make(chan struct{})
	// Registered after attach's cleanup, so it runs first: the reader stops
	// before guest RAM is unmapped.
	t.Cleanup(func() { stopRX(); <-rxDone })
	go func() {
		defer close(rxDone)
		for rxCtx.Err() == nil {
			if !g.Qs[0].WaitUsed(1, 5*time.Millisecond) {
				continue
			}
			for {
				f, _, ok := g.Recv(0)
				if !ok {
					break
				}
				if f != nil {
					v.frames <- f
				}
				g.PostRX(0, 1)
			}
		}
	}()
	return v
}

// TestRDMAOverVirtioNet runs the driver's whole sequence through two
// vhost-user NICs: PROBE, OPEN, objects, QPs to RTS, a WRITE posted in the
// SQ ring and kicked with DB_SQ over the TX ring, the CQE in the CQ ring.
func TestRDMAOverVirtioNet(t *testing.T) {
	hub := cm.NewOnFabric(nil)
	writeBetween(t, vhostVM(t, 1, hub), vhostVM(t, 2, hub))
}

// TestAdversarialResetDeviceDropsTheGuestsObjects (finding 6): QEMU's
// RESET_DEVICE (a guest reboot) reaches the RDMA function, which reclaims
// every QP and MR of the old driver: a peer's WRITE to an old rkey then
// has nothing to land in (verbs' TestAdversarialWriteAfterReset).
func TestAdversarialResetDeviceDropsTheGuestsObjects(t *testing.T) {
	hub := cm.NewOnFabric(nil)
	a, b := vhostVM(t, 1, hub), vhostVM(t, 2, hub)
	writeBetween(t, a, b)
	objects := func() (n int) {
		b.r.Call(func(r *Func) { n = r.eng.Objects() })
		return n
	}
	if objects() == 0 {
		t.Fatal("no objects before the reset")
	}
	if err := b.fe.Set(vhostuser.ReqResetDevice, true, nil); err != nil {
		t.Fatal(err)
	}
	if n := objects(); n != 0 || b.r.Stats.Resets.Load() != 1 {
		t.Fatalf("%d objects left, %d resets", n, b.r.Stats.Resets.Load())
	}
}
