package device

import (
	"context"
	"testing"
	"time"

	"falconnic/device/cm"
	"falconnic/vhostuser"
)

// vhostVM is a vm whose control frames travel through the NIC's virtio-net
// TX ring and whose replies come back on the RX ring, as falconnic.ko's
// do; the rings, MRs and page lists live in the front-end simulator's
// guest RAM.
func vhostVM(t *testing.T, macByte byte, mgr *cm.Manager) *vm {
	mac := []byte{0x52, 0x54, 0, 0, 0, macByte}
	n := newTestNIC(t, "n"+string('a'+rune(macByte)), mac, 1)
	port := NewFalconPort(nil, nil)
	r := NewRDMAFunc(mac, n.Deliver, mgr.Attach([6]byte(mac), port), port)
	n.AttachRDMA(r)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go port.Run(ctx)
	g := attach(t, n, acked1)
	// The vhost-user session's memory table, as vhostuser would hand it to
	// netDev.SetMemTable (that hook is the coordinator's to add).
	payload, fds := g.mem.MemTablePayload()
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
	n.dev.SetMemTable(mt)
	v := &vm{t: t, r: r, frames: make(chan []byte, 64), inst: 0x5000 + uint64(macByte)}
	copy(v.mac[:], mac)
	v.xmit = func(f []byte) { g.send(0, f) }
	v.bytesAt = func(gpa uint64, k int) []byte { return g.mem.Bytes(gpa, uint64(k)) }
	v.allocRAM = func(k int) uint64 { return g.mem.Alloc(1, uint64(k), 4096) }
	g.postRX(0, testRingSize)
	rxCtx, stopRX := context.WithCancel(ctx)
	rxDone := make(chan struct{})
	// Registered after attach's cleanup, so it runs first: the reader stops
	// before guest RAM is unmapped.
	t.Cleanup(func() { stopRX(); <-rxDone })
	go func() {
		defer close(rxDone)
		for rxCtx.Err() == nil {
			if !g.qs[0].WaitUsed(1, 5*time.Millisecond) {
				continue
			}
			for {
				f, _, ok := g.recv(0)
				if !ok {
					break
				}
				if f != nil {
					v.frames <- f
				}
				g.postRX(0, 1)
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
