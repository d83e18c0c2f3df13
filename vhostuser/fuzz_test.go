package vhostuser

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func msgBytes(req Request, flags uint32, payload []byte) []byte {
	b := make([]byte, HeaderSize+len(payload))
	h := Header(b)
	h.SetRequest(req)
	h.SetFlags(flags)
	h.SetSize(uint32(len(payload)))
	copy(b[HeaderSize:], payload)
	return b
}

// FuzzMessageCodec decodes a header, then validates the message with a
// fuzzed fd count, then reads every view the handlers would read.
func FuzzMessageCodec(f *testing.F) {
	f.Add(msgBytes(ReqGetFeatures, 1, nil), uint8(0))
	f.Add(msgBytes(ReqSetFeatures, 1, make([]byte, 8)), uint8(0))
	mt := make([]byte, 8+32)
	mt[0] = 1
	f.Add(msgBytes(ReqSetMemTable, 9, mt), uint8(1))
	f.Add(msgBytes(ReqSetVringKick, 1, []byte{0, 1, 0, 0, 0, 0, 0, 0}), uint8(0))
	f.Add(msgBytes(ReqSetVringCall, 1, []byte{1, 0, 0, 0, 0, 0, 0, 0}), uint8(1))
	cfg := make([]byte, 12+57)
	cfg[4] = 57
	f.Add(msgBytes(ReqGetConfig, 1, cfg), uint8(0))
	f.Add(msgBytes(ReqSetInflightFD, 1, make([]byte, 24)), uint8(1))
	f.Add(msgBytes(ReqAddMemReg, 9, make([]byte, 40)), uint8(1))
	f.Add(msgBytes(ReqSetVringAddr, 1, make([]byte, 40)), uint8(0))
	f.Add(msgBytes(Request(99), 5, nil), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, nfds uint8) {
		if len(b) < HeaderSize {
			return
		}
		h := Header(b[:HeaderSize])
		if err := CheckHeader(h); err != nil {
			return
		}
		p := b[HeaderSize:]
		if uint32(len(p)) > h.Size() {
			p = p[:h.Size()]
		}
		m := &Msg{Request: h.Request(), Flags: h.Flags(), Payload: p, FDs: make([]int, nfds%12)}
		if err := Validate(m); err != nil {
			return
		}
		_ = m.Request.String()
		switch m.Request {
		case ReqSetMemTable:
			for _, r := range MemTableRegions(p) {
				_ = r.GPA() + r.Size() + r.UVA() + r.MmapOffset()
			}
		case ReqSetVringAddr:
			a := VringAddr(p)
			_ = a.Index() + a.Flags()
			_ = a.Desc() + a.Used() + a.Avail()
		case ReqSetVringNum, ReqSetVringBase, ReqGetVringBase, ReqSetVringEnable:
			_ = VringState(p).Index() + VringState(p).Num()
		case ReqGetConfig, ReqSetConfig:
			c := ConfigMsg(p)
			if m.Request == ReqSetConfig && uint32(len(c.Data())) != c.Size() {
				t.Fatalf("SET_CONFIG data %d != size %d", len(c.Data()), c.Size())
			}
		case ReqGetInflightFD, ReqSetInflightFD:
			in := InflightMsg(p)
			_ = in.MmapSize() + in.MmapOffset() + uint64(in.NumQueues()) + uint64(in.QueueSize())
		case ReqAddMemReg, ReqRemMemReg:
			r := MemRegion(p[8:])
			_ = r.GPA() + r.Size()
		}
	})
}

// fuzzMem is two regions of one memfd: GPA [0x1000, 0x3000) and
// [0x10000, 0x11000), as in the PCI-hole layout.
func fuzzMem(t testing.TB) *MemTable {
	fd, err := unix.MemfdCreate("fuzz", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, 0x3000)
	r0, err := MapRegion(fd, 0x1000, 0x2000, 0x7000_0000, 0)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := MapRegion(fd, 0x10000, 0x1000, 0x7001_0000, 0x2000)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := NewMemTable([]*Region{r0, r1})
	if err != nil {
		t.Fatal(err)
	}
	return mt
}

// FuzzDescriptorChain walks chains over fuzzed guest memory: the
// descriptor table sits at GPA 0x1000 (16 entries) and everything else in
// both regions is fuzzed too. The walker must terminate, never panic, and
// only return buffers inside guest memory.
func FuzzDescriptorChain(f *testing.F) {
	d := func(addr uint64, n uint32, flags, next uint16) []byte {
		b := binary.LittleEndian.AppendUint64(nil, addr)
		b = binary.LittleEndian.AppendUint32(b, n)
		b = binary.LittleEndian.AppendUint16(b, flags)
		return binary.LittleEndian.AppendUint16(b, next)
	}
	f.Add(d(0x1800, 64, 0, 0), uint8(0), true)
	f.Add(append(d(0x1800, 64, descFNext, 1), d(0x1900, 64, descFWrite, 0)...), uint8(0), true)
	f.Add(append(d(0x1800, 64, descFNext, 1), d(0x1900, 64, descFNext, 0)...), uint8(0), true) // loop
	f.Add(d(0x1200, 32, descFIndirect, 0), uint8(0), true)                                     // indirect
	f.Add(d(0x2ff0, 0x100, 0, 0), uint8(0), false)                                             // crosses region end
	f.Add(d(0x10000, 0x1000, descFWrite, 0), uint8(0), false)                                  // second region
	mem := fuzzMem(f)
	gm := mem.regions[0].Data
	f.Fuzz(func(t *testing.T, b []byte, head uint8, indirect bool) {
		clear(gm)
		copy(gm, b)
		table := gm[:16*descSize]
		var c Chain
		if err := walkChain(mem, table, uint16(head%16), indirect, &c); err != nil {
			return
		}
		if len(c.Bufs) > 16*MaxQueueSize {
			t.Fatalf("chain of %d buffers", len(c.Bufs))
		}
		var r, w uint64
		for _, bf := range c.Bufs {
			if bf.Write {
				w += uint64(len(bf.Data))
			} else {
				r += uint64(len(bf.Data))
			}
		}
		if r != c.ReadLen || w != c.WriteLen {
			t.Fatalf("lengths %d/%d, chain says %d/%d", r, w, c.ReadLen, c.WriteLen)
		}
	})
}

// nopDev is a device with two queues and an 8-byte config space.
type nopDev struct{ cfg [8]byte }

func (d *nopDev) Features() uint64         { return FeatureVersion1 | FeatureEventIdx }
func (d *nopDev) ProtocolFeatures() uint64 { return ProtoConfig | ProtoInflightSHMFD }
func (d *nopDev) NumQueues() int           { return 2 }
func (d *nopDev) QueueNum() uint64         { return 2 }
func (d *nopDev) GetConfig(off, size uint32) ([]byte, error) {
	if off > 8 || size > 8-off {
		return nil, ErrNoConfig
	}
	return d.cfg[off : off+size], nil
}
func (d *nopDev) SetConfig(off uint32, b []byte) error {
	if off > 8 || uint32(len(b)) > 8-off {
		return ErrNoConfig
	}
	copy(d.cfg[off:], b)
	return nil
}
func (d *nopDev) SetFeatures(uint64) {}
func (d *nopDev) RunQueue(q *Queue) {
	for {
		select {
		case <-q.Done():
			return
		case <-q.Wake():
			q.Refresh()
		}
	}
}

// FuzzSession feeds a stream of fd-less messages to a session's handlers:
// no input may panic, and every reply must be framed.
func FuzzSession(f *testing.F) {
	seq := func(ms ...[]byte) []byte {
		var b []byte
		for _, m := range ms {
			b = append(b, m...)
		}
		return b
	}
	st := func(i, n uint32) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, i), n)
	}
	f.Add(seq(msgBytes(ReqGetFeatures, 1, nil), msgBytes(ReqSetProtocolFeatures, 1, binary.LittleEndian.AppendUint64(nil, ProtoReplyAck)),
		msgBytes(ReqSetVringNum, 9, st(0, 256)), msgBytes(ReqSetVringBase, 9, st(0, 7)), msgBytes(ReqGetVringBase, 1, st(0, 0))))
	f.Add(seq(msgBytes(ReqSetVringEnable, 1, st(1, 1)), msgBytes(ReqSetVringKick, 1, binary.LittleEndian.AppendUint64(nil, 1|VringNoFD)),
		msgBytes(ReqSetVringAddr, 1, make([]byte, 40)), msgBytes(ReqResetDevice, 1, nil)))
	cfg := make([]byte, 12+4)
	cfg[4] = 4
	f.Add(seq(msgBytes(ReqGetConfig, 1, cfg), msgBytes(ReqSetConfig, 9, cfg), msgBytes(ReqGetInflightFD, 1, make([]byte, 24)),
		msgBytes(ReqSetStatus, 1, binary.LittleEndian.AppendUint64(nil, 0xf)), msgBytes(ReqGetStatus, 1, nil)))
	f.Add(seq(msgBytes(ReqRemMemReg, 9, make([]byte, 40)), msgBytes(ReqGetMaxMemSlots, 1, nil), msgBytes(Request(0), 1, nil)))
	f.Fuzz(func(t *testing.T, b []byte) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Skip(err)
		}
		front := os.NewFile(uintptr(fds[0]), "front")
		back := os.NewFile(uintptr(fds[1]), "back")
		bc, _ := net.FileConn(back)
		back.Close()
		drained := make(chan struct{})
		go func() { io.Copy(io.Discard, front); close(drained) }()
		var c Counters
		s := newSession(&nopDev{}, &c, NewConn(bc.(*net.UnixConn)))
		for len(b) >= HeaderSize {
			h := Header(b[:HeaderSize])
			n := int(min(h.Size(), uint32(len(b)-HeaderSize)))
			h.SetSize(uint32(n))
			if CheckHeader(h) != nil {
				break
			}
			m := Msg{Request: h.Request(), Flags: h.Flags(), Payload: b[HeaderSize : HeaderSize+n]}
			b = b[HeaderSize+n:]
			if s.dispatch(&m) != nil {
				break
			}
		}
		s.teardown()
		bc.Close()
		front.Close()
		<-drained
	})
}
