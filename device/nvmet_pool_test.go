package device

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"falconnic/nvme"
)

// poolIO is an IO of one aligned nCMD buffer.
func poolIO(op nvme.Opcode, off int64, fill byte) *nvme.IO {
	b := alignedBuf(nvme.ChunkSize)
	if op == nvme.OpWrite {
		for i := range b {
			b[i] = fill
		}
	}
	return &nvme.IO{Op: op, Buf: b, Off: off, Len: int64(len(b))}
}

// TestNSPoolCoalescesAdjacentIO: a worker's batch, in any order, runs
// adjacent writes (and reads) as one vectored call each; a gap starts a
// new one; every IO gets its outcome.
func TestNSPoolCoalescesAdjacentIO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ns.img")
	be, err := OpenFileBackend(path, 1<<20, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	p := newNSPool(be, nil, nil)
	const k = nvme.ChunkSize
	// writes at 2k, 0, 1k, 3k (one run of 4) and 10k (alone)
	ws := []*nvme.IO{poolIO(nvme.OpWrite, 2*k, 2), poolIO(nvme.OpWrite, 0, 0xa), poolIO(nvme.OpWrite, k, 1),
		poolIO(nvme.OpWrite, 10*k, 10), poolIO(nvme.OpWrite, 3*k, 3)}
	p.run(ws, nil)
	if got := p.Stats.Coalesced.Load(); got != 4 {
		t.Errorf("coalesced %d writes, want 4", got)
	}
	disk, _ := os.ReadFile(path)
	for _, io := range ws {
		if io.Err != nil || !bytes.Equal(disk[io.Off:io.Off+k], io.Buf) {
			t.Fatalf("write at %d: %v, on disk %x…", io.Off, io.Err, disk[io.Off])
		}
	}
	r3, r2, fl := poolIO(nvme.OpRead, 3*k, 0), poolIO(nvme.OpRead, 2*k, 0), &nvme.IO{Op: nvme.OpFlush}
	p.run([]*nvme.IO{r3, r2, fl}, nil)
	if r3.Err != nil || r3.Buf[0] != 3 || r2.Err != nil || r2.Buf[k-1] != 2 || fl.Err != nil {
		t.Fatalf("reads %v %x, %v %x; flush %v", r3.Err, r3.Buf[0], r2.Err, r2.Buf[k-1], fl.Err)
	}
	if got := p.Stats.Coalesced.Load(); got != 6 {
		t.Errorf("coalesced %d IOs, want 6", got)
	}
	past := poolIO(nvme.OpRead, 1<<20-k, 0)
	beyond := poolIO(nvme.OpRead, 1<<20, 0)
	p.run([]*nvme.IO{past, beyond}, nil)
	if past.Err == nil || beyond.Err == nil {
		t.Error("a vectored read past the end of the file succeeded")
	}
}

// TestNSPoolIsBounded: the pool takes at most nsPoolMax IOs until it
// hands some back, and counts what it refuses (the engine keeps those
// waiting); the workers' queue is bounded too, and what does not fit
// waits for the next burst.
func TestNSPoolIsBounded(t *testing.T) {
	p := newNSPool(nvme.NewMemBackend(1<<20), nil, nil)
	p.once.Do(func() {}) // no workers: they are all "busy"
	p.parallel = true    // a batch per IO
	for i := 0; i < nsPoolMax; i++ {
		if !p.Submit(&nvme.IO{Op: nvme.OpFlush}) {
			t.Fatalf("IO %d refused below the pool's %d", i, nsPoolMax)
		}
	}
	if p.Submit(&nvme.IO{Op: nvme.OpFlush}) {
		t.Fatal("an IO beyond the pool's maximum was accepted")
	}
	if p.Stats.Full.Load() != 1 || p.Stats.Submitted.Load() != nsPoolMax {
		t.Errorf("full %d, submitted %d", p.Stats.Full.Load(), p.Stats.Submitted.Load())
	}
	p.flush() // flushes are batches of one
	if len(p.queue) != nsPoolQueue || len(p.pending) != nsPoolMax-nsPoolQueue || p.Stats.QueueFull.Load() != 1 {
		t.Errorf("queued %d batches, %d IOs pending, queue full %d", len(p.queue), len(p.pending), p.Stats.QueueFull.Load())
	}
}

// TestNSPoolBatchesARunPerCommand: with O_DIRECT the burst's IOs go to
// the workers as one batch per run of adjacent reads or writes.
func TestNSPoolBatchesARunPerCommand(t *testing.T) {
	p := newNSPool(nvme.NewMemBackend(1<<20), nil, nil)
	p.once.Do(func() {})
	p.parallel = true // as with O_DIRECT
	const k = nvme.ChunkSize
	for _, off := range []int64{3 * k, 0, 2 * k, k, 40 * k, 9 * k} { // 0-3k, 9k, 40k
		p.Submit(&nvme.IO{Op: nvme.OpRead, Off: off, Len: k})
	}
	p.Submit(&nvme.IO{Op: nvme.OpWrite, Off: 4 * k, Len: k})
	p.flush()
	var sizes []int
	for len(p.queue) > 0 {
		sizes = append(sizes, len(<-p.queue))
	}
	if !slices.Equal(sizes, []int{1, 4, 1, 1}) {
		t.Errorf("batches of %v IOs, want [1 4 1 1] (the write; reads 0-3, 9, 40)", sizes)
	}
	// Through the page cache, runs share batches of up to nsPoolCachedBatch.
	p.parallel = false
	for i := 0; i < nsPoolCachedBatch+3; i++ {
		p.Submit(&nvme.IO{Op: nvme.OpRead, Off: int64(i) * 2 * k, Len: k}) // none adjacent
	}
	p.flush()
	sizes = sizes[:0]
	for len(p.queue) > 0 {
		sizes = append(sizes, len(<-p.queue))
	}
	if !slices.Equal(sizes, []int{nsPoolCachedBatch, 3}) {
		t.Errorf("cached batches of %v IOs, want [%d 3]", sizes, nsPoolCachedBatch)
	}
}

// TestBlkOverFileNamespaceManyInFlight: 16 requests of 128 KiB at once
// through the worker pool, written then read back, match the file; the
// engine and pool account for every IO.
func TestBlkOverFileNamespaceManyInFlight(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ns.img")
	r := newBlkRig(t, NamespaceSpec{NSID: 1, Backing: path, Size: 4 << 20})
	r.start()
	r.q.UseIndirect = true
	const n, size = 16, 128 << 10
	var ws []*blkReqBuilder
	for i := 0; i < n; i++ {
		ws = append(ws, r.request(blkTypeOut, uint64(i*size/512), false, bytes.Repeat([]byte{byte(i + 1)}, size), size))
	}
	r.run(ws...)
	var rs []*blkReqBuilder
	for i := 0; i < n; i++ {
		rs = append(rs, r.request(blkTypeIn, uint64(i*size/512), true, nil, size))
	}
	r.run(rs...)
	disk, _ := os.ReadFile(path)
	for i := 0; i < n; i++ {
		want := bytes.Repeat([]byte{byte(i + 1)}, size)
		if ws[i].status() != blkStatusOK || rs[i].status() != blkStatusOK || !bytes.Equal(rs[i].data(size), want) ||
			!bytes.Equal(disk[i*size:(i+1)*size], want) {
			t.Fatalf("request %d: statuses %d %d", i, ws[i].status(), rs[i].status())
		}
	}
	var pool *nsPool
	var nsc *nvme.NamespaceCounters
	r.tgt.Port.Call(func(*falconEndpoint) {
		ns := r.tgt.Engine.Namespace(1)
		pool, _ = ns.Config().Backend.(*nsPool)
		nsc = &ns.Stats
	})
	if pool == nil {
		t.Fatal("the file namespace is not served by a worker pool")
	}
	if got := pool.Stats.Completed.Load(); got != 2*n*size/nvme.ChunkSize || pool.Stats.Submitted.Load() != got {
		t.Errorf("pool submitted %d completed %d, want %d", pool.Stats.Submitted.Load(), got, 2*n*size/nvme.ChunkSize)
	}
	if nsc.Writes.Load() != n*size/nvme.ChunkSize || nsc.ReadBytes.Load() != n*size {
		t.Errorf("namespace writes %d read bytes %d", nsc.Writes.Load(), nsc.ReadBytes.Load())
	}
	// Every write's data came over the port link page-aligned in the
	// initiator's shared frame buffer (not copied), so each was written
	// from that frame, and every frame went back.
	var kept int
	r.tgt.Port.Call(func(*falconEndpoint) { kept = r.tgt.Port.kept })
	if got := r.tgt.Engine.Stats.KeptFrames.Load(); got != n*size/nvme.ChunkSize || kept != 0 {
		t.Errorf("writes from kept frames %d (want %d), frames still kept %d", got, n*size/nvme.ChunkSize, kept)
	}
	if got := r.tgt.Port.Stats.RxShared.Load(); got != n*size/nvme.ChunkSize {
		t.Errorf("Write Data Responses taken over in a shared buffer %d, want %d", got, n*size/nvme.ChunkSize)
	}
	// Every Read Response went to the initiator's port in place.
	if got := r.blk.cfg.Port.Stats.RxByRef.Load(); got != n*size/nvme.ChunkSize {
		t.Errorf("Read Responses taken in place %d, want %d", got, n*size/nvme.ChunkSize)
	}
}
