package vsock

import (
	"io"
	"testing"

	"falconnic/vhostuser"
)

// BenchmarkVsockEngineGuestToHost measures the engine's cost per 4 KiB RW
// from the guest forwarded to the host socket (parse, queue, peek, credit).
func BenchmarkVsockEngineGuestToHost(b *testing.B) {
	var c Counters
	e := newVsockEngine(vsockTestCID, &c)
	e.guestPacket(vsPkt(VsockOpRequest, 5000, 80, 0, 1<<20, 0, nil), 0)
	acts := e.takeActs(nil)
	id := acts[0].id
	e.dialDone(id, true)
	rx := make([]byte, VsockHdrLen+4096)
	bufs := []vhostuser.Buf{{Data: rx, Write: true}}
	out := make([]byte, 64<<10)
	p := vsPkt(VsockOpRW, 5000, 80, 0, 1<<20, 0, make([]byte, 4096))
	b.SetBytes(4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.guestPacket(p, 0)
		n := e.peekToHost(id, out)
		e.hostWrote(id, n)
		for e.hasRx() {
			e.fillRx(bufs, uint64(len(rx)))
		}
		acts = e.takeActs(acts)
	}
}

// BenchmarkVsockEngineHostToGuest measures the engine's cost per 4 KiB of
// host bytes delivered into a guest RX buffer ([W 44][W 4096]).
func BenchmarkVsockEngineHostToGuest(b *testing.B) {
	var c Counters
	e := newVsockEngine(vsockTestCID, &c)
	e.guestPacket(vsPkt(VsockOpRequest, 5000, 80, 0, 1<<30, 0, nil), 0)
	acts := e.takeActs(nil)
	id := acts[0].id
	e.dialDone(id, true)
	hdr := make([]byte, VsockHdrLen)
	data := make([]byte, 4096)
	bufs := []vhostuser.Buf{{Data: hdr, Write: true}, {Data: data, Write: true}}
	in := make([]byte, 4096)
	credit := vsPkt(VsockOpCreditUpdate, 5000, 80, 0, 1<<30, 0, nil)
	var fwd uint32
	b.SetBytes(4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.hostRead(id, in)
		for e.hasRx() {
			fwd += e.fillRx(bufs, VsockHdrLen+4096) - VsockHdrLen
		}
		if i%64 == 63 { // the guest returns credit now and then
			Hdr(credit).SetFwdCnt(fwd)
			e.guestPacket(credit, 0)
		}
		acts = e.takeActs(acts)
	}
}

// BenchmarkVsockHostToGuestStream measures the whole path over the
// simulator: a host client writes through the hybrid UDS, the device fills
// the guest's RX ring, the guest consumes and returns credit.
func BenchmarkVsockHostToGuestStream(b *testing.B) {
	r := newVsockRig(b)
	r.up()
	client := r.hostDial(1024)
	defer client.Close()
	req := r.g.recv()
	c := &vsockGuestConn{g: r.g, gport: 1024, hport: req.hdr.SrcPort(), bufAlloc: 256 << 10, peerBuf: req.hdr.BufAlloc()}
	c.send(VsockOpResponse, 0, nil)
	line := make([]byte, len("OK 1073741824\n"))
	if _, err := io.ReadFull(client, line); err != nil {
		b.Fatal(err)
	}
	const chunk = 64 << 10
	total := b.N * chunk
	go func() {
		buf := make([]byte, chunk)
		for i := 0; i < b.N; i++ {
			if _, err := client.Write(buf); err != nil {
				return
			}
		}
	}()
	b.SetBytes(chunk)
	b.ReportAllocs()
	b.ResetTimer()
	got := 0
	for got < total {
		p := r.g.recv()
		if p.hdr.Op() != VsockOpRW {
			c.handle(p)
			continue
		}
		got += len(p.payload)
		c.fwdCnt += uint32(len(p.payload))
		if c.fwdCnt-c.lastFwd >= c.bufAlloc/2 {
			c.send(VsockOpCreditUpdate, 0, nil)
		}
	}
}
