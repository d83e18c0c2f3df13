package verbs

import (
	"testing"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/wire"
)

// FuzzSendWQE puts arbitrary bytes in a send WQE slot of an RTS QP: the
// engine must complete or refuse it without panicking, and never write
// outside the registered region of the peer.
func FuzzSendWQE(f *testing.F) {
	seed := func(fill func(s SendWQE)) {
		b := make([]byte, 512)
		fill(SendWQE(b))
		f.Add(b)
	}
	seed(func(s SendWQE) { s.SetOpcode(WRWrite); s.SetNumSGE(1); s.SetLength(64); s.SGE(0).Set(0, 64, 0) })
	seed(func(s SendWQE) { s.SetOpcode(WRSend); s.SetFlags(sendFlagInline | sendFlagSignal); s.SetLength(20) })
	seed(func(s SendWQE) { s.SetOpcode(WRRead); s.SetNumSGE(4); s.SetLength(1 << 30) })
	seed(func(s SendWQE) { s.SetOpcode(WRCmpSwap); s.SetNumSGE(1); s.SetLength(8) })
	seed(func(s SendWQE) { s.SetOpcode(99) })
	f.Fuzz(func(t *testing.T, b []byte) {
		w, qa, _ := rcPair(t, QPTypeRC, 1)
		src := w.ga.reg(1, 4096, AccessLocalWrite)
		dst := w.gb.reg(1, 4096, rwAll)
		guard := w.gb.reg(1, 4096, AccessLocalWrite)
		for i := range w.gb.bytes(guard) {
			w.gb.bytes(guard)[i] = 0x5a
		}
		// Make plausible keys likely: patch key fields when asked to.
		if len(b) > 0 && b[0]&1 != 0 && len(b) >= SendWQESize+SGESize {
			s := SendWQE(b)
			s.SetRKey(dst.rkey)
			s.SGE(0).Set(src.va+uint64(b[1]), uint32(b[2])*16, src.lkey)
		}
		qa.sq.post(func(slot []byte) { copy(slot, b) })
		w.a.KickSQ(qa.qpn)
		w.run()
		qa.scq.poll()
		for _, v := range w.gb.bytes(guard) {
			if v != 0x5a {
				t.Fatal("memory outside any remote-writable MR changed")
			}
		}
	})
}

// FuzzResponder hands arbitrary push payloads and pull request headers to
// a responder.
func FuzzResponder(f *testing.F) {
	for _, op := range wire.RDMAOpcodes {
		fl := wire.RDMAFields{Op: op, DestQP: 17, RKey: 0x103, VA: 0x7f0000000000, DMALength: 8}
		f.Add(append(wire.AppendRDMA(nil, &fl), 1, 2, 3, 4, 5, 6, 7, 8), false)
		f.Add(wire.AppendRDMA(nil, &fl), true)
	}
	f.Fuzz(func(t *testing.T, p []byte, pull bool) {
		w := newWorld(t, falcon.ConnConfig{}, link.MemConfig{})
		_ = w.b.CreatePD(1)
		qb := w.gb.makeQP(17, 1, QPTypeRC, 0)
		qb.connect(macA, 16, 7, 1)
		w.gb.reg(1, 4096, rwAll)
		if pull {
			n := 0
			if len(p) > 0 {
				n = int(p[0]) * 17
			}
			_, _ = w.p.CA.PullHeader(1, n, p)
		} else if len(p) <= 4096+256 {
			_, _ = w.p.CA.Push(1, p)
		}
		w.run()
	})
}
