package storage

import (
	"testing"
	"time"

	"falconnic/device/port"
	"falconnic/internal/clock"
	"falconnic/nvme"
)

// stubPaths counts the disk's requests for a new path.
type stubPaths struct{ broken int }

func (s *stubPaths) Broken(*nvme.Path) { s.broken++ }

// pathlessDisk is a disk with BlkPaths and no path yet, on a manual clock.
func pathlessDisk(t *testing.T) (*Blk, *stubPaths, *clock.Manual) {
	clk := clock.NewManual(0)
	sp := &stubPaths{}
	b, err := NewBlk(BlkConfig{Port: port.New(clk, nil), Path: &nvme.Path{}, NSID: 1,
		Info: nvme.NamespaceInfo{Blocks: 8, BlockSize: 512}, Paths: sp, RetryWindow: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.path = nil
	return b, sp, clk
}

// completedReqs is how many requests the disk has handed back to r's
// worker once the port's burst of work ends (flushDone).
func completedReqs(b *Blk, r *blkReq) int {
	b.flushDone()
	return len(r.w.cpl)
}

func pendingReq(b *Blk) (*blkReq, *nvme.Command) {
	w := &blkWorker{b: b, cpl: make(chan *blkReq, 1)}
	r := &blkReq{w: w, pending: 1, result: blkStatusOK}
	r.doneFn = r.done
	r.cmds = []nvme.Command{{Op: nvme.OpFlush, NSID: 1, Done: r.doneFn}}
	return r, &r.cmds[0]
}

// TestBlkParkedCommandFailsAfterTheRetryWindow: a command with no path
// waits for one, asking for it, and fails with IOERR once the retry
// window passed; never earlier, never hanging.
func TestBlkParkedCommandFailsAfterTheRetryWindow(t *testing.T) {
	b, sp, clk := pathlessDisk(t)
	r, c := pendingReq(b)
	b.submit(r, c)
	if len(b.parked) != 1 || sp.broken != 1 {
		t.Fatalf("parked %d, path requests %d", len(b.parked), sp.broken)
	}
	at, ok := b.NextDeadline()
	if !ok || at != 5*time.Second {
		t.Fatalf("deadline %v %v", at, ok)
	}
	clk.Advance(5*time.Second - 1)
	b.OnTimer(clk.Now())
	if completedReqs(b, r) != 0 {
		t.Fatal("failed before the retry window")
	}
	clk.Advance(1)
	b.OnTimer(clk.Now())
	if completedReqs(b, r) != 1 || r.result != blkStatusIOErr || b.Stats.RetryExpired.Load() != 1 {
		t.Fatalf("after the window: completed %d result %d", completedReqs(b, r), r.result)
	}
	if _, ok := b.NextDeadline(); ok {
		t.Fatal("a deadline with nothing parked")
	}
}

// TestBlkRetriesPathErrorsAtMostBlkMaxRetriesTimes: each path error
// resubmits (here: parks) the command until the retries are spent; then
// the request fails. Other errors are final at once.
func TestBlkRetriesPathErrorsAtMostBlkMaxRetriesTimes(t *testing.T) {
	b, _, _ := pathlessDisk(t)
	r, c := pendingReq(b)
	for i := 0; i < blkMaxRetries; i++ {
		c.Status = nvme.StatusInternalPathError
		c.Done(c)
		if len(b.parked) != 1 || completedReqs(b, r) != 0 {
			t.Fatalf("retry %d: parked %d, completed %d", i, len(b.parked), completedReqs(b, r))
		}
		b.parked = nil
	}
	c.Status = nvme.StatusInternalPathError
	c.Done(c)
	if completedReqs(b, r) != 1 || r.result != blkStatusIOErr || b.Stats.Retries.Load() != blkMaxRetries {
		t.Fatalf("after %d retries: completed %d result %d", b.Stats.Retries.Load(), completedReqs(b, r), r.result)
	}
	r2, c2 := pendingReq(b)
	c2.Status = nvme.StatusLBAOutOfRange
	c2.Done(c2)
	if completedReqs(b, r2) != 1 || r2.result != blkStatusIOErr || len(b.parked) != 0 {
		t.Fatal("a target's error status was retried")
	}
}
