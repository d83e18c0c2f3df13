package nvme

import (
	"bytes"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/wire"
)

// TestAdversarialStaleWriteFenced [issue 18, finding 6]: a write is in
// the target's backend when its path fails; the initiator retries it on
// a new path. The retried copy is held off (RNR) until the failed path's
// write has landed, so that write can never land after the retried copy
// was acknowledged — nor over the guest's next write to the same blocks.
func TestAdversarialStaleWriteFenced(t *testing.T) {
	r, h := newHeldRig(t, 64)
	old, newer := pattern(4096, 1), pattern(4096, 2)
	w1 := r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: 0, Blocks: 8, Data: [][]byte{old}})
	r.pair.RunUntil(func() bool { return len(h.held) == 1 }, time.Second)
	if len(h.held) != 1 {
		t.Fatalf("%d IOs in the backend, want the write's 1", len(h.held))
	}
	// The path's connection dies: both ends drop it, the write fails.
	r.ini.RemovePath(r.path)
	r.tgt.RemovePath(r.back)
	if len(r.done) != 1 || w1.Status != StatusInternalPathError {
		t.Fatalf("write on the failed path: %v", w1.Status)
	}
	a, b, err := r.pair.Connect(falcon.ConnConfig{SCID: 100, DCID: 1100, Protocol: wire.ProtoNVMe})
	if err != nil {
		t.Fatal(err)
	}
	if r.path, err = r.ini.AddPath(a); err != nil {
		t.Fatal(err)
	}
	if r.back, err = r.tgt.AddPath(b); err != nil {
		t.Fatal(err)
	}
	retry := r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: 0, Blocks: 8, Data: [][]byte{old}})
	for end := r.pair.Clock.Now() + 20*time.Millisecond; r.pair.Clock.Now() < end && r.pair.Step(); {
	}
	if len(h.held) != 1 {
		t.Fatalf("the retried write reached the backend while the failed path's write was in it (%d IOs)", len(h.held))
	}
	if r.tgt.Stats.WriteFenced.Load() == 0 {
		t.Fatal("fenced writes not counted")
	}
	h.finish(r.tgt) // the failed path's write lands now
	r.runHeld(h, 2)
	if !retry.Status.OK() {
		t.Fatalf("retried write: %v", retry.Status)
	}
	w2 := r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: 0, Blocks: 8, Data: [][]byte{newer}})
	r.runHeld(h, 3)
	if !w2.Status.OK() || !bytes.Equal(h.Bytes()[:4096], newer) {
		t.Fatalf("the guest's newer write: %v, data is newer: %v", w2.Status, bytes.Equal(h.Bytes()[:4096], newer))
	}
	if len(r.tgt.orphans) != 0 {
		t.Fatalf("orphan IOs left: %v", r.tgt.orphans)
	}
}
