package nvme

import (
	"unsafe"

	"falconnic/falcon"
)

// IO is one backend operation the target hands to an AsyncBackend: the
// data of one nCMD (Read, Write) or a whole command without data (Flush,
// Write Zeroes, Dataset Management). The backend owns it from Submit until
// it hands it back to Engine.IODone; the engine owns it otherwise.
type IO struct {
	Op         Opcode
	Buf        []byte // Read: filled; Write: written (ChunkSize-aligned memory)
	Off, Len   int64  // bytes; Len is len(Buf) for Read and Write
	FUA        bool   // Write: durable before it completes
	Deallocate bool   // Write Zeroes: may unmap
	Err        error  // the outcome, set by the backend

	slot int32  // target slot
	gen  uint16 // the slot's generation when submitted
}

// AsyncBackend is a Backend that runs reads, writes, flushes, write-zeroes
// and discards off the engine's goroutine (a worker pool in package
// device). Submit must not block: false means the backend's queue is full
// (the engine keeps the IO waiting, in order, and offers it again after a
// completion). Every accepted IO comes back exactly once through
// Engine.IODone, on the engine's goroutine.
type AsyncBackend interface {
	Backend
	Submit(io *IO) bool
}

// Run executes io synchronously against b: what a worker of an
// AsyncBackend does with it (and the engine with a plain Backend).
func (io *IO) Run(b Backend) {
	io.Err = nil
	switch io.Op {
	case OpRead:
		_, io.Err = b.ReadAt(io.Buf, io.Off)
	case OpWrite:
		if _, io.Err = b.WriteAt(io.Buf, io.Off); io.Err == nil && io.FUA {
			io.Err = b.Flush()
		}
	case OpFlush:
		io.Err = b.Flush()
	case OpWriteZeroes:
		io.Err = b.WriteZeroes(io.Off, io.Len, io.Deallocate)
	case OpDSM:
		io.Err = b.Discard(io.Off, io.Len)
	default:
		io.Err = errRange
	}
}

// chunkSlab is how many nCMD buffers are carved from one allocation.
const chunkSlab = 32

// takeChunk returns a chunk: a 2 × ChunkSize buffer whose second half is
// aligned to ChunkSize (what O_DIRECT needs). The nCMD's data goes there
// and a Read Response's headers (NBTH, Falcon's) just before it, so the
// response goes out as the chunk itself (falcon's PushFrame). A target
// slot takes one the first time it needs it and keeps it until it lends it
// to Falcon with a Read Response; the push's completion gives it back
// (chunkBack). Chunks are bounded by the target table (maxTargets) plus
// the pushes in flight.
func (e *Engine) takeChunk() ([]byte, int32) {
	if n := len(e.free); n > 0 {
		id := e.free[n-1]
		e.free = e.free[:n-1]
		if e.chunks[id] == nil {
			e.chunks[id] = e.carveChunk()
		}
		return e.chunks[id], id
	}
	e.chunks = append(e.chunks, e.carveChunk())
	return e.chunks[len(e.chunks)-1], int32(len(e.chunks) - 1)
}

// chunkBack takes back chunk id from Falcon; frame nil means Falcon kept
// the buffer (a failed connection, or a resent packet whose first copy the
// receiving port may still hold), so the index gets a new one when next
// taken.
func (e *Engine) chunkBack(id int32, frame []byte) {
	if id < 0 || int(id) >= len(e.chunks) {
		return
	}
	if frame == nil {
		e.chunks[id] = nil
	}
	e.free = append(e.free, id)
}

// carveChunk cuts a chunk from the current slab. Its capacity runs
// falcon.EnvelopeLen bytes on, into the next chunk's first bytes, for the
// envelope Falcon appends after the data; no chunk uses its first bytes
// (the headers sit at the end of its first half).
func (e *Engine) carveChunk() []byte {
	const n = 2 * ChunkSize
	if len(e.slab) < n {
		b := make([]byte, (chunkSlab+1)*n)
		off := int(uintptr(unsafe.Pointer(&b[0])) & (ChunkSize - 1))
		if off != 0 {
			off = ChunkSize - off
		}
		e.slab = b[off : off+chunkSlab*n : len(b)] // the slack after the last chunk takes its envelope
	}
	b := e.slab[: n : n+falcon.EnvelopeLen]
	e.slab = e.slab[n:]
	return b
}

// data returns the slot's data buffer (the aligned half of s.buf).
func (s *tslot) data() []byte { return s.buf[ChunkSize : ChunkSize+s.bytes] }

// startIO runs slot si's backend work: at once on a plain backend, else
// submitted to the asynchronous one (or queued behind earlier IOs that
// found it full). The slot responds when the IO is done.
func (e *Engine) startIO(si int32) {
	s := &e.tslots[si]
	ab, ok := s.ns.cfg.Backend.(AsyncBackend)
	if !ok {
		s.io.Run(s.ns.cfg.Backend)
		e.finishIO(si)
		return
	}
	s.state = tIOWait
	if len(e.ioWait) > 0 || !ab.Submit(&s.io) {
		e.Stats.BackendBusy.Inc()
		e.ioWait = append(e.ioWait, si)
		return
	}
	s.state = tIO
}

// prepareIO fills slot si's IO for its command; data the target already
// holds (a write's) is in s.io.Buf.
func (e *Engine) prepareIO(s *tslot, si int32) {
	bs := int64(s.ns.cfg.BlockSize)
	io := &s.io
	io.Op, io.Off, io.Len, io.FUA, io.Deallocate, io.Err = s.op, int64(s.lba)*bs, int64(s.blocks)*bs, s.fua, false, nil
	io.slot, io.gen = si, s.gen
	switch s.op {
	case OpRead, OpWrite:
		io.Buf = nil // a plain backend writes straight from the Write Data Response
		if e.isAsync(s.ns) {
			if s.buf == nil {
				s.buf, s.chunk = e.takeChunk()
			}
			io.Buf = s.data()
		}
	case OpWriteZeroes:
		io.Buf, io.Deallocate = nil, s.flags&flagDeallocate != 0
	default:
		io.Buf = nil
	}
}

// IODone takes back an IO an AsyncBackend finished (on the engine's
// goroutine): the slot responds, and IOs waiting for room are offered
// again. An IO whose slot's path failed meanwhile only frees the slot.
func (e *Engine) IODone(io *IO) {
	si := io.slot
	if si < 0 || int(si) >= len(e.tslots) || io != &e.tslots[si].io {
		e.Stats.IOStale.Inc()
		return
	}
	s := &e.tslots[si]
	switch {
	case s.state != tIO || s.gen != io.gen:
		e.Stats.IOStale.Inc()
	case s.path == nil: // dropTargets left it to us
		if e.orphans[s.fence]--; e.orphans[s.fence] <= 0 {
			delete(e.orphans, s.fence) // the initiator's writes go ahead
		}
		e.freeTarget(si)
	default:
		e.finishIO(si)
	}
	e.drainIO()
}

// drainIO submits waiting IOs, in order, while the backend takes them.
func (e *Engine) drainIO() {
	for len(e.ioWait) > 0 {
		si := e.ioWait[0]
		s := &e.tslots[si]
		if s.state == tIOWait {
			if !s.ns.cfg.Backend.(AsyncBackend).Submit(&s.io) {
				return
			}
			s.state = tIO
		}
		e.ioWait = e.ioWait[1:]
	}
	e.ioWait = e.ioWait[:0]
}

// finishIO turns slot si's finished IO into its status and counters, and
// responds.
func (e *Engine) finishIO(si int32) {
	s := &e.tslots[si]
	ns := s.ns
	io := &s.io
	st := StatusSuccess
	if io.Err != nil {
		ns.Stats.BackendErrors.Inc()
		st = StatusWriteFault
		if s.op == OpRead {
			st = StatusUnrecoveredRead
		}
	}
	switch s.op {
	case OpRead:
		ns.Stats.Reads.Inc()
		if st.OK() {
			ns.Stats.ReadBytes.Add(uint64(s.bytes))
			s.loaded = true
		}
	case OpWrite:
		ns.Stats.Writes.Inc()
		if st.OK() {
			ns.Stats.WriteBytes.Add(uint64(s.bytes))
			if s.fua {
				ns.Stats.FUAWrites.Inc()
			}
		}
	case OpFlush:
		ns.Stats.Flushes.Inc()
	case OpWriteZeroes:
		ns.Stats.WriteZeroes.Inc()
	case OpDSM:
		ns.Stats.Discards.Inc()
	}
	s.status = st
	s.state = tRespond
	e.respond(si)
}
