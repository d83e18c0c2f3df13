package storage

import (
	"testing"

	"falconnic/nvme"
)

// TestBlkCompletionsOfABurstGoTogether: the requests the port completes
// during one burst of work reach their worker as one list at the burst's
// end (one channel operation, one used-ring update, one interrupt), in
// the order they completed; none is handed over before.
func TestBlkCompletionsOfABurstGoTogether(t *testing.T) {
	b, _, _ := pathlessDisk(t)
	w := &blkWorker{b: b, cpl: make(chan *blkReq, 8)}
	var reqs []*blkReq
	for i := 0; i < 3; i++ {
		r := &blkReq{w: w, pending: 1, result: blkStatusOK}
		r.doneFn = r.done
		r.cmds = []nvme.Command{{Op: nvme.OpFlush, NSID: 1, Done: r.doneFn}}
		reqs = append(reqs, r)
	}
	for _, r := range reqs {
		r.cmds[0].Status = nvme.StatusSuccess
		r.cmds[0].Done(&r.cmds[0])
	}
	if len(w.cpl) != 0 {
		t.Fatal("a completion was handed over before the end of the burst")
	}
	b.flushDone()
	if len(w.cpl) != 1 {
		t.Fatalf("%d hand-overs for one burst, want 1", len(w.cpl))
	}
	i := 0
	for r := <-w.cpl; r != nil; r = r.next {
		if i >= len(reqs) || r != reqs[i] {
			t.Fatalf("completion %d out of order", i)
		}
		i++
	}
	if i != len(reqs) {
		t.Fatalf("%d of %d completions handed over", i, len(reqs))
	}
	b.flushDone()
	if len(w.cpl) != 0 || len(b.ready) != 0 {
		t.Fatal("an empty burst handed something over")
	}
}

// TestBlkLongBurstHandsCompletionsOverEarly: a burst that completes
// blkHandOverMax requests hands them over at once, without waiting for
// its end.
func TestBlkLongBurstHandsCompletionsOverEarly(t *testing.T) {
	b, _, _ := pathlessDisk(t)
	w := &blkWorker{b: b, cpl: make(chan *blkReq, 2*blkHandOverMax)}
	for i := 0; i < blkHandOverMax+1; i++ {
		r := &blkReq{w: w, pending: 1, result: blkStatusOK}
		r.doneFn = r.done
		r.cmds = []nvme.Command{{Op: nvme.OpFlush, NSID: 1, Done: r.doneFn}}
		r.cmds[0].Done(&r.cmds[0])
	}
	if len(w.cpl) != 1 {
		t.Fatalf("%d hand-overs during the burst, want 1", len(w.cpl))
	}
	b.flushDone()
	if len(w.cpl) != 2 {
		t.Fatalf("%d hand-overs after the burst, want 2", len(w.cpl))
	}
	n := 0
	for len(w.cpl) > 0 {
		for r := <-w.cpl; r != nil; r = r.next {
			n++
		}
	}
	if n != blkHandOverMax+1 {
		t.Fatalf("%d completions handed over, want %d", n, blkHandOverMax+1)
	}
}
