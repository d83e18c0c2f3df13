package verbs

import "testing"

// TestAdversarialUDForeignSourceGID [issue 18, finding 7]: with the NIC's
// GIDs set, a UD send (here a CM MAD from QP1) whose address vector
// claims another VM's GID completes in error and nothing reaches the
// peer; the NIC's own GID still goes through.
func TestAdversarialUDForeignSourceGID(t *testing.T) {
	w, qa, qb := gsiWorld(t)
	w.a.SetGIDs([][16]byte{gidA, LinkLocalGID(macA)})
	rb := w.gb.dmaBuf(grhLen + 256)
	qb.postRecv(7, rb)
	victim := ipv4GID(10, 0, 0, 99)
	postMAD(qa, 1, w.ga.dmaBuf(24), w.ga.dmaBuf(232), AV{DMAC: macB, Net: NetIPv4, SGID: victim, DGID: gidB}, GSIQPN)
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCLocQPOpErr {
		t.Fatalf("send claiming another VM's GID: %v", wc.Status())
	}
	if w.a.Stats.WQEForeignSGID.Load() != 1 || w.b.Stats.RxSendBytes.Load() != 0 {
		t.Fatalf("foreign SGID counted %d, peer received %d bytes", w.a.Stats.WQEForeignSGID.Load(), w.b.Stats.RxSendBytes.Load())
	}
}

func TestUDOwnSourceGIDAccepted(t *testing.T) {
	w, qa, qb := gsiWorld(t)
	w.a.SetGIDs([][16]byte{gidA})
	qb.postRecv(7, w.gb.dmaBuf(grhLen+256))
	postMAD(qa, 1, w.ga.dmaBuf(24), w.ga.dmaBuf(232), AV{DMAC: macB, Net: NetIPv4, SGID: gidA, DGID: gidB}, GSIQPN)
	w.run()
	if wc := oneWC(t, qa.scq); wc.Status() != WCSuccess {
		t.Fatalf("send with the NIC's own GID: %v", wc.Status())
	}
	if wc := oneWC(t, qb.rcq); wc.Status() != WCSuccess {
		t.Fatalf("receive: %v", wc.Status())
	}
}

func TestLinkLocalGID(t *testing.T) {
	g := LinkLocalGID(MAC{0x52, 0x54, 0x00, 0x12, 0x34, 0x56})
	want := [16]byte{0xfe, 0x80, 8: 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56}
	if g != want {
		t.Fatalf("%x", g)
	}
}
