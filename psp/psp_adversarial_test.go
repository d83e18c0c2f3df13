package psp

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestAdversarialForgedIVDatagram [issue 18, finding 3]: without the
// key, a datagram claiming a far-future IV (the BACK with IV = now + 2^30
// that killed a connection under the CRC stand-in) fails its tag, changes
// neither the replay window nor anything else, and the connection's
// genuine datagrams keep opening.
func TestAdversarialForgedIVDatagram(t *testing.T) {
	_, rx, tx := pair(t, AESGCM128, 3)
	for i := range 5 {
		if _, _, d := rx.Open(seal(t, tx, falconPkt(2, 28, byte(i)), uint32(100+i))); d != dropNone {
			t.Fatal(d)
		}
	}
	// The attacker saw a datagram on the wire and rewrites its IV; it can
	// recompute no tag.
	seen := seal(t, tx, falconPkt(2, 28, 9), 105)
	forged := bytes.Clone(seen)
	binary.BigEndian.PutUint64(forged[8:], uint64(MakeIV(105+1<<30, 1<<31)))
	top := rx.cur.win.top
	if _, _, d := rx.Open(forged); d != DropAuth {
		t.Fatalf("forged IV: %v", d)
	}
	if rx.cur.win.top != top {
		t.Fatal("the forgery moved the replay window")
	}
	// A datagram built from nothing, under the connection's SPI.
	var scratch [64]byte
	Header(scratch[:]).Set(AESGCM128, rx.SPI(), MakeIV(1<<30, 1<<30))
	if _, _, d := rx.Open(scratch[:]); d != DropAuth {
		t.Fatalf("datagram from nothing: %v", d)
	}
	if _, _, d := rx.Open(seen); d != dropNone {
		t.Fatalf("genuine datagram after the forgeries: %v", d)
	}
	for i := range 100 {
		if _, _, d := rx.Open(seal(t, tx, falconPkt(2, 28, byte(i)), uint32(106+i))); d != dropNone {
			t.Fatalf("genuine datagram %d: %v", i, d)
		}
	}
}
