package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"falconnic/device/storage/blktest"
	"falconnic/falcon"
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
	// A run across the end of the file: the IO before it succeeds, the
	// one past it fails.
	last := poolIO(nvme.OpRead, 1<<20-k, 0)
	beyond := poolIO(nvme.OpRead, 1<<20, 0)
	p.run([]*nvme.IO{last, beyond}, nil)
	if last.Err != nil || beyond.Err == nil {
		t.Errorf("a vectored read across the end of the file: %v before it, %v past it", last.Err, beyond.Err)
	}
}

// TestNSPoolIsBounded: the pool takes at most nsPoolMax IOs until it
// hands some back, and counts what it refuses (the engine keeps those
// waiting); the workers' queue is bounded too, and what does not fit
// waits for the next burst.
func TestNSPoolIsBounded(t *testing.T) {
	p := newNSPool(nvme.NewMemBackend(1<<20), nil, nil)
	p.once.Do(func() {}) // no workers: they are all "busy"
	p.direct = true      // a batch per IO
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
	p.direct = true // as with O_DIRECT
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
	p.direct = false
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
// aioModes runs f with each way a file namespace's IO reaches the kernel,
// through the page cache and with O_DIRECT.
func aioModes(t *testing.T, f func(t *testing.T, ns NamespaceSpec)) {
	for _, aio := range []string{AIOUring, AIOThreads} {
		for _, direct := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/direct=%v", aio, direct), func(t *testing.T) {
				f(t, NamespaceSpec{NSID: 1, Backing: filepath.Join(t.TempDir(), "ns.img"), Size: 4 << 20, Direct: direct, AIO: aio})
			})
		}
	}
}

// checkAIOMode checks that the pool's reads and writes went the way the
// namespace asked: every one through the io_uring (unless the kernel has
// none) or none.
func checkAIOMode(t *testing.T, ns NamespaceSpec, pool *nsPool, ios uint64) {
	t.Helper()
	st := &pool.Stats
	switch {
	case ns.AIO == AIOThreads && (st.RingRuns.Load() != 0 || pool.ring != nil):
		t.Errorf("aio threads used the ring for %d runs", st.RingRuns.Load())
	case ns.AIO == AIOUring && st.RingUnavailable.Load() > 0:
		t.Log("no io_uring here: the workers did the IO")
	case ns.AIO == AIOUring && (st.RingRuns.Load() == 0 || st.Coalesced.Load() != ios || st.RingRedone.Load() != 0):
		t.Errorf("aio io_uring: %d runs, %d of %d IOs coalesced, %d redone", st.RingRuns.Load(), st.Coalesced.Load(), ios, st.RingRedone.Load())
	}
}

func TestBlkOverFileNamespaceManyInFlight(t *testing.T) {
	aioModes(t, testBlkOverFileNamespaceManyInFlight)
}

func testBlkOverFileNamespaceManyInFlight(t *testing.T, spec NamespaceSpec) {
	path := spec.Backing
	r := newBlkRig(t, spec)
	r.start()
	r.Q.UseIndirect = true
	const n, size = 16, 128 << 10
	var ws []*blktest.Request
	for i := 0; i < n; i++ {
		ws = append(ws, r.Request(blkTypeOut, uint64(i*size/512), false, bytes.Repeat([]byte{byte(i + 1)}, size), size))
	}
	r.Run(ws...)
	var rs []*blktest.Request
	for i := 0; i < n; i++ {
		rs = append(rs, r.Request(blkTypeIn, uint64(i*size/512), true, nil, size))
	}
	r.Run(rs...)
	disk, _ := os.ReadFile(path)
	for i := 0; i < n; i++ {
		want := bytes.Repeat([]byte{byte(i + 1)}, size)
		if ws[i].Status() != blkStatusOK || rs[i].Status() != blkStatusOK || !bytes.Equal(rs[i].Data(size), want) ||
			!bytes.Equal(disk[i*size:(i+1)*size], want) {
			t.Fatalf("request %d: statuses %d %d", i, ws[i].Status(), rs[i].Status())
		}
	}
	var pool *nsPool
	var nsc *nvme.NamespaceCounters
	r.tgt.Port.Call(func(*falcon.Endpoint) {
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
	r.tgt.Port.Call(func(*falcon.Endpoint) { kept = r.tgt.Port.KeptFrames() })
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
	var nss *NSPoolCounters
	r.tgt.Port.Call(func(*falcon.Endpoint) { nss = &pool.Stats })
	checkAIOMode(t, spec, pool, nss.Submitted.Load())
}

// TestBlkFileTruncatedUnderNamespace: reads past the end of a file cut
// short under the namespace come back short from the kernel; they fail
// with an I/O error (the ring's run redone synchronously finds the end),
// and the reads before the cut still succeed.
func TestBlkFileTruncatedUnderNamespace(t *testing.T) {
	aioModes(t, func(t *testing.T, spec NamespaceSpec) {
		r := newBlkRig(t, spec)
		r.start()
		r.Q.UseIndirect = true
		const size = 128 << 10
		w1, w2 := r.Request(blkTypeOut, 0, false, bytes.Repeat([]byte{7}, size), size), r.Request(blkTypeOut, size/512, false, bytes.Repeat([]byte{7}, size), size)
		r.Run(w1, w2)
		if w1.Status() != blkStatusOK || w2.Status() != blkStatusOK {
			t.Fatalf("writes: status %d %d", w1.Status(), w2.Status())
		}
		if err := os.Truncate(spec.Backing, size); err != nil {
			t.Fatal(err)
		}
		ok, cut := r.Request(blkTypeIn, 0, true, nil, size), r.Request(blkTypeIn, size/512, true, nil, size)
		r.Run(ok, cut)
		if ok.Status() != blkStatusOK || !bytes.Equal(ok.Data(size), bytes.Repeat([]byte{7}, size)) {
			t.Errorf("read before the cut: status %d (cut %d) data ok %v", ok.Status(), cut.Status(), bytes.Equal(ok.Data(size), bytes.Repeat([]byte{7}, size)))
		}
		if cut.Status() != blkStatusIOErr {
			t.Errorf("read past the cut: status %d, want an I/O error", cut.Status())
		}
		var pool *nsPool
		r.tgt.Port.Call(func(*falcon.Endpoint) { pool, _ = r.tgt.Engine.Namespace(1).Config().Backend.(*nsPool) })
		if spec.AIO == AIOUring && pool.ring != nil && pool.Stats.RingRedone.Load() == 0 {
			t.Error("the short read was not redone")
		}
	})
}
