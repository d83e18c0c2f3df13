package nvme

import (
	"bytes"
	"errors"
	"testing"
	"time"
	"unsafe"
)

// heldBackend is an AsyncBackend whose IOs wait in held until the test
// runs them (in whatever order it likes); it takes at most room at a time.
type heldBackend struct {
	*MemBackend
	room    int
	held    []*IO
	flushes int
	fail    error // every IO run fails with this, when set
}

func (h *heldBackend) Submit(io *IO) bool {
	if len(h.held) >= h.room {
		return false
	}
	h.held = append(h.held, io)
	return true
}

func (h *heldBackend) Flush() error { h.flushes++; return nil }

// finish runs the held IOs newest first (the reverse of submission) and
// hands them back to the engine.
func (h *heldBackend) finish(e *Engine) int {
	n := len(h.held)
	batch := h.held
	h.held = nil
	for i := len(batch) - 1; i >= 0; i-- {
		io := batch[i]
		if uintptr(unsafe.Pointer(unsafe.SliceData(io.Buf)))%ChunkSize != 0 {
			panic("IO buffer not aligned for O_DIRECT")
		}
		io.Run(h)
		if h.fail != nil {
			io.Err = h.fail
		}
		e.IODone(io)
	}
	return n
}

func newHeldRig(t *testing.T, room int) (*rig, *heldBackend) {
	h := &heldBackend{MemBackend: NewMemBackend(1 << 20), room: room}
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: 2048, Backend: h}}})
	return r, h
}

// runHeld steps the rig, finishing the backend's IOs as they come, until
// n commands completed.
func (r *rig) runHeld(h *heldBackend, n int) {
	r.t.Helper()
	end := r.pair.Clock.Now() + 10*time.Second
	for len(r.done) < n {
		if h.finish(r.tgt) > 0 {
			continue
		}
		if r.pair.Clock.Now() > end || !r.pair.Step() {
			r.t.Fatalf("%d of %d commands completed; target %v", len(r.done), n, r.tgt.Stats.Set().NonZero())
		}
	}
}

// TestAsyncBackendCompletesOutOfOrder: 128 KiB written and read back
// through a backend that takes 4 IOs at a time and finishes them in
// reverse order; the rest wait in order, counted, and nothing is lost.
func TestAsyncBackendCompletesOutOfOrder(t *testing.T) {
	r, h := newHeldRig(t, 4)
	data := pattern(128<<10, 3)
	w := r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: 16, Blocks: 256, Data: split(data)})
	r.runHeld(h, 1)
	if !w.Status.OK() {
		t.Fatalf("write: %v", w.Status)
	}
	if !bytes.Equal(h.Bytes()[16*512:16*512+len(data)], data) {
		t.Fatal("namespace does not hold the written data")
	}
	got := make([]byte, len(data))
	rd := r.submit(&Command{Op: OpRead, NSID: 1, SLBA: 16, Blocks: 256, Data: split(got)})
	r.runHeld(h, 2)
	if !rd.Status.OK() || !bytes.Equal(got, data) {
		t.Fatalf("read: %v, data equal %v", rd.Status, bytes.Equal(got, data))
	}
	ns := r.tgt.Namespace(1)
	if ns.Stats.Writes.Load() != 32 || ns.Stats.Reads.Load() != 32 || ns.Stats.ReadBytes.Load() != 128<<10 {
		t.Errorf("namespace counters: writes %d reads %d read bytes %d", ns.Stats.Writes.Load(), ns.Stats.Reads.Load(), ns.Stats.ReadBytes.Load())
	}
	if r.tgt.Stats.BackendBusy.Load() == 0 {
		t.Error("IOs beyond the backend's room were not counted as waiting")
	}
}

// TestAsyncBackendErrorsBecomeStatuses: a failing backend fails reads
// with Unrecovered Read Error and writes with Write Fault.
func TestAsyncBackendErrorsBecomeStatuses(t *testing.T) {
	r, h := newHeldRig(t, 64)
	h.fail = errors.New("EIO")
	w := r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: 0, Blocks: 8, Data: [][]byte{pattern(4096, 1)}})
	rd := r.submit(&Command{Op: OpRead, NSID: 1, SLBA: 0, Blocks: 8, Data: [][]byte{make([]byte, 4096)}})
	f := r.submit(&Command{Op: OpFlush, NSID: 1})
	r.runHeld(h, 3)
	if w.Status != StatusWriteFault || rd.Status != StatusUnrecoveredRead || f.Status != StatusWriteFault {
		t.Fatalf("write %v read %v flush %v", w.Status, rd.Status, f.Status)
	}
	if got := r.tgt.Namespace(1).Stats.BackendErrors.Load(); got != 3 {
		t.Errorf("backend errors %d, want 3", got)
	}
}

// TestAsyncBackendIOOutlivesItsPath: the target's path fails while IOs
// are in the backend; they come back later, free their slots and send
// nothing, and new IOs are not confused with them.
func TestAsyncBackendIOOutlivesItsPath(t *testing.T) {
	r, h := newHeldRig(t, 64)
	r.submit(&Command{Op: OpRead, NSID: 1, SLBA: 0, Blocks: 64, Data: [][]byte{make([]byte, 32<<10)}})
	r.pair.RunUntil(func() bool { return len(h.held) == 8 }, time.Second)
	if len(h.held) != 8 {
		t.Fatalf("%d IOs in the backend, want 8", len(h.held))
	}
	free := len(r.tgt.tfree)
	r.tgt.RemovePath(r.back)
	if len(r.tgt.tfree) != free {
		t.Fatal("slots with IO in flight were freed before the IO came back")
	}
	sent := r.tgt.Stats.Responses.Load()
	h.finish(r.tgt)
	if len(r.tgt.tfree) != maxTargets {
		t.Errorf("%d target slots free after the IOs came back, want all %d", len(r.tgt.tfree), maxTargets)
	}
	if r.tgt.Stats.Responses.Load() != sent {
		t.Error("a response went out on a removed path")
	}
	var stale IO
	r.tgt.IODone(&stale)
	if r.tgt.Stats.IOStale.Load() != 1 {
		t.Error("an IO the engine never submitted was not counted stale")
	}
}

// TestFUAWriteIsFlushed: a write with FUA is flushed by the target before
// it completes, one flush per nCMD; a plain write is not.
func TestFUAWriteIsFlushed(t *testing.T) {
	r, h := newHeldRig(t, 64)
	r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: 0, Blocks: 16, Data: [][]byte{pattern(8192, 1)}})
	r.runHeld(h, 1)
	if h.flushes != 0 {
		t.Fatalf("plain write flushed %d times", h.flushes)
	}
	c := r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: 0, Blocks: 16, Data: [][]byte{pattern(8192, 2)}, FUA: true})
	r.runHeld(h, 2)
	if !c.Status.OK() || h.flushes != 2 || r.tgt.Namespace(1).Stats.FUAWrites.Load() != 2 {
		t.Fatalf("FUA write %v: %d flushes, FUAWrites %d; want 2", c.Status, h.flushes, r.tgt.Namespace(1).Stats.FUAWrites.Load())
	}
	fl := r.submit(&Command{Op: OpFlush, NSID: 1})
	r.runHeld(h, 3)
	if !fl.Status.OK() || h.flushes != 3 {
		t.Fatalf("flush %v: %d flushes, want 3", fl.Status, h.flushes)
	}
}

// FuzzTargetRequestsAsync is FuzzTargetRequests through an asynchronous
// backend with little room: hostile requests never write data, and once
// their IOs are back no target state stays.
func FuzzTargetRequestsAsync(f *testing.F) {
	seeds := seedRequests()
	for i := range seeds {
		f.Add(seeds[i], seeds[(i+1)%len(seeds)], uint8(i))
	}
	f.Fuzz(func(t *testing.T, a, b []byte, room uint8) {
		h := &heldBackend{MemBackend: NewMemBackend(64 * 512), room: int(room%4) + 1}
		r := newRig(t, rigConfig{namespaces: []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: 64, Backend: h}}})
		for _, p := range [][]byte{a, b} {
			if len(p) > 4096 {
				p = p[:4096]
			}
			if _, err := r.pair.CA.Push(0, p); err != nil {
				t.Fatal(err)
			}
		}
		for end := r.pair.Clock.Now() + 50*time.Millisecond; r.pair.Clock.Now() < end; {
			if h.finish(r.tgt) == 0 && !r.pair.Step() {
				break
			}
		}
		h.finish(r.tgt)
		if !bytes.Equal(h.Bytes(), make([]byte, 64*512)) {
			t.Fatal("hostile requests wrote data")
		}
		if held := maxTargets - len(r.tgt.tfree); held != 0 {
			t.Fatalf("%d target slots held", held)
		}
	})
}
