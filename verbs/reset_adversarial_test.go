package verbs

import (
	"bytes"
	"testing"
)

// TestAdversarialWriteAfterReset [issue 18, finding 6]: once a NIC's
// engine is reset (the device calls Reset on RESET_DEVICE, RESET_OWNER
// or session loss), a peer's RDMA WRITE to an rkey of the old guest fails
// and does not touch the rebooted guest's memory — also after the new
// guest has created a QP with the old handle again.
func TestAdversarialWriteAfterReset(t *testing.T) {
	w, qa, _ := rcPair(t, QPTypeRC, 7)
	src := w.ga.reg(1, 4096, AccessLocalWrite)
	dst := w.gb.reg(1, 4096, rwAll)
	fill(w.ga.bytes(src), 5)
	qa.postSend(wqe{id: 1, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess {
		t.Fatalf("write before the reset: %v", wc.Status())
	}
	if n := w.b.Reset(); n == 0 {
		t.Fatal("reset destroyed nothing")
	}
	clear(w.gb.bytes(dst)) // the rebooted guest's RAM
	// The new guest brings up QP 17 again, without registering the old MR.
	if err := w.b.CreatePD(1); err != nil {
		t.Fatal(err)
	}
	qb := w.gb.makeQP(17, 1, QPTypeRC, 0)
	qb.connect(macA, 16, 7, 1)
	qa.postSend(wqe{id: 2, op: WRWrite, raddr: dst.va, rkey: dst.rkey, sges: []buf{src}})
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() == WCSuccess {
		t.Fatal("a WRITE to the old guest's rkey succeeded after the reset")
	}
	if !bytes.Equal(w.gb.bytes(dst), make([]byte, 4096)) {
		t.Fatal("the old rkey wrote into the rebooted guest's memory")
	}
	if w.b.Stats.RxRKeyErr.Load() == 0 {
		t.Fatal("rkey refusal not counted")
	}
}
