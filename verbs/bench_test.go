package verbs

import (
	"testing"
)

// BenchmarkWrite64K measures one 64 KiB RDMA WRITE between two NICs'
// engines over in-process Falcon endpoints (simulated link, manual clock):
// the NIC's CPU cost per byte.
func BenchmarkWrite64K(b *testing.B) {
	t := &testing.T{}
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	src := w.ga.reg(1, 64<<10, AccessLocalWrite)
	dst := w.gb.reg(1, 64<<10, rwAll)
	b.SetBytes(64 << 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		qa.postSend(wqe{id: uint64(i), op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
		w.run()
		if wcs := qa.scq.poll(); len(wcs) != 1 || wcs[0].Status() != WCSuccess {
			b.Fatal("write failed")
		}
	}
}

// BenchmarkPingPong8B measures an 8-byte SEND from A to B answered by an
// 8-byte SEND from B to A: one round trip of two NIC RDMA functions.
func BenchmarkPingPong8B(b *testing.B) {
	t := &testing.T{}
	w, qa, qb := rcPair(t, QPTypeRC, 7)
	sa := w.ga.reg(1, 8, AccessLocalWrite)
	ra := w.ga.reg(1, 8, AccessLocalWrite)
	sb := w.gb.reg(1, 8, AccessLocalWrite)
	rb := w.gb.reg(1, 8, AccessLocalWrite)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		qb.postRecv(uint64(i), rb)
		qa.postRecv(uint64(i), ra)
		qa.postSend(wqe{id: uint64(i), op: WRSend, sges: []buf{sa}})
		for len(qb.rcq.poll()) == 0 {
			if !w.p.Step() {
				b.Fatal("ping lost")
			}
		}
		qb.postSend(wqe{id: uint64(i), op: WRSend, sges: []buf{sb}})
		for len(qa.rcq.poll()) == 0 {
			if !w.p.Step() {
				b.Fatal("pong lost")
			}
		}
		w.run()
		qa.scq.poll()
		qb.scq.poll()
	}
}

// BenchmarkFastRegCycle is nvme-rdma's per-I/O FRWR work on the NIC that
// owns the MR: REG_MR of 32 pages then LOCAL_INV, on a kernel QP.
func BenchmarkFastRegCycle(b *testing.B) {
	t := &testing.T{}
	w, _, qb := kernelPair(t)
	mr := w.gb.allocMR(50, 1, 0x3200, 32)
	var pages []uint64
	for range 32 {
		pages = append(pages, w.gb.alloc(PageSize))
	}
	mr.mapPages(pages...)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		key := 0x3200 | uint32(i+1)&0xff
		qb.postReg(1, 50, key, AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead, 32, kva, 32*PageSize)
		qb.postSend(wqe{id: 2, op: WRLocalInv, inv: key})
		qb.scq.poll()
	}
}
