package nvme

import (
	"bytes"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// seedRequests returns well-formed requests for the fuzz corpora.
func seedRequests() [][]byte {
	var out [][]byte
	for _, c := range []struct {
		t     wire.NVMePacketType
		op    Opcode
		total uint8
		slba  uint64
		nlb   uint16
	}{
		{wire.NVMeReadRequest, OpRead, 0, 8, 7},
		{wire.NVMeWriteRequest, OpWrite, 1, 0, 15},
		{wire.NVMeWriteRequest, OpWriteZeroes, 0, 100, 3},
		{wire.NVMeWriteRequest, OpDSM, 0, 8191, 0},
		{wire.NVMeWriteRequest, OpFlush, 0, 0, 0},
		{wire.NVMeReadRequest, OpIdentify, 0, 0, 0},
		{wire.NVMeReadRequest, OpRead, 0, 8192, 0},
	} {
		f := wire.NVMeFields{Type: c.t, NCNTTotal: c.total, InitiatorTag: 3, ICMD: 4}
		b, n := wire.AppendNVMe(nil, &f)
		n.Cmd.SetTargetNSID(1)
		n.Cmd.SetSLBA(c.slba)
		n.Cmd.SetNLB(c.nlb)
		cmdExt(n.Cmd).SetOpcode(c.op)
		out = append(out, b)
	}
	return out
}

// FuzzDecodeCommand: the target's command decoder never accepts a range
// outside the namespace or a chunk bigger than one nCMD.
func FuzzDecodeCommand(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
	}
	e := NewEngine(Config{})
	for _, c := range []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: 8192}, {NSID: 2, BlockSize: 4096, Blocks: 10, ReadOnly: true}} {
		c.Backend = NewMemBackend(int64(c.Blocks) * int64(c.BlockSize))
		ns, _ := NewNamespace(c)
		_ = e.AddNamespace(ns)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := wire.ParseNVMe(b, wire.TypePushData)
		if err != nil || (n.Type != wire.NVMeReadRequest && n.Type != wire.NVMeWriteRequest) {
			return
		}
		d := e.decodeCommand(nil, &n)
		if !d.status.OK() {
			return
		}
		info, _ := d.op.Info()
		if info.Writes && d.ns.cfg.ReadOnly {
			t.Fatalf("write %v accepted on a read-only namespace", d.op)
		}
		if d.op != OpFlush && d.op != OpIdentify && (d.lba >= d.ns.cfg.Blocks || d.blocks > d.ns.cfg.Blocks-d.lba) {
			t.Fatalf("accepted range %d+%d beyond %d blocks", d.lba, d.blocks, d.ns.cfg.Blocks)
		}
		if info.Data && (d.bytes > ChunkSize || d.bytes != int(d.blocks)*d.ns.cfg.BlockSize || d.blocks == 0) {
			t.Fatalf("data chunk %d bytes / %d blocks", d.bytes, d.blocks)
		}
	})
}

// FuzzTargetRequests: arbitrary pushes from a peer through the whole
// target (and back through the initiator's response checks) never panic,
// and never put non-zero data in the namespace: only the initiator's own
// writes are pulled with data, and this initiator has none.
func FuzzTargetRequests(f *testing.F) {
	seeds := seedRequests()
	for i := range seeds {
		f.Add(seeds[i], seeds[(i+1)%len(seeds)])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		r := newRig(t, rigConfig{namespaces: []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: 64}}})
		for _, p := range [][]byte{a, b} {
			if len(p) > 4096 {
				p = p[:4096]
			}
			if _, err := r.pair.CA.Push(0, p); err != nil {
				t.Fatal(err)
			}
		}
		r.pair.RunUntil(func() bool { return false }, 50*time.Millisecond)
		if !bytes.Equal(r.mem[1].Bytes(), make([]byte, 64*512)) {
			t.Fatal("hostile requests wrote data")
		}
		// Each write's pull names no live nCMD at this initiator, which
		// answers INV: the write fails and no target state stays.
		if held := maxTargets - len(r.tgt.tfree); held != 0 {
			t.Fatalf("%d target slots held", held)
		}
	})
}

// FuzzInitiatorResponse: a hostile Read Response or Write Completion for a
// live read never writes outside the read's buffer.
func FuzzInitiatorResponse(f *testing.F) {
	for _, typ := range []wire.NVMePacketType{wire.NVMeReadResponse, wire.NVMeWriteCompletion} {
		fl := wire.NVMeFields{Type: typ, InitiatorTag: nTag(maxNCMDs-1, 1), ICMD: iTag(maxICMDs-1, 1)}
		b, _ := wire.AppendNVMe(nil, &fl)
		f.Add(append(b, pattern(4096, 1)...))
		f.Add(append(b, pattern(5000, 1)...))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		r := newRig(t, rigConfig{namespaces: []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: 64}}})
		guard := make([]byte, 3*4096)
		buf := guard[4096 : 2*4096]
		r.submit(&Command{Op: OpRead, NSID: 1, Blocks: 8, Data: [][]byte{buf}})
		n, err := wire.ParseNVMe(p, wire.TypePushData)
		if err != nil || (n.Type != wire.NVMeReadResponse && n.Type != wire.NVMeWriteCompletion) {
			return
		}
		r.path.onResponse(&n)
		if !bytes.Equal(guard[:4096], make([]byte, 4096)) || !bytes.Equal(guard[2*4096:], make([]byte, 4096)) {
			t.Fatal("response data written outside the command's buffer")
		}
	})
}

func FuzzParseIdentify(f *testing.F) {
	f.Add(NamespaceInfo{Blocks: 100, BlockSize: 512}.AppendIdentify(nil))
	f.Add(NamespaceInfo{Blocks: 1 << 40, BlockSize: 4096, ReadOnly: true, Discard: true}.AppendIdentify(nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ns, err := ParseIdentify(b)
		if err != nil {
			return
		}
		if ns.BlockSize < 512 || ns.BlockSize > 4096 || ns.Blocks == 0 {
			t.Fatalf("accepted %+v", ns)
		}
		back, err := ParseIdentify(ns.AppendIdentify(nil))
		if err != nil || back != ns {
			t.Fatalf("round trip %+v -> %+v (%v)", ns, back, err)
		}
	})
}

// FuzzWriteData: the target takes a write's data only from a Write Data
// Response naming that nCMD with exactly the nCMD's length; anything else
// fails the write and leaves the namespace untouched.
func FuzzWriteData(f *testing.F) {
	good := func(tag uint32, n int) []byte {
		fl := wire.NVMeFields{Type: wire.NVMeWriteDataResponse, InitiatorTag: tag, ICMD: 4}
		b, _ := wire.AppendNVMe(nil, &fl)
		return append(b, pattern(n, 2)...)
	}
	f.Add(good(3, 4096))
	f.Add(good(3, 4095))
	f.Add(good(9, 4096))
	f.Add([]byte{0x12})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRig(t, rigConfig{namespaces: []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: 64}}})
		e, p := r.tgt, r.back
		si := e.tfree[len(e.tfree)-1]
		e.tfree = e.tfree[:len(e.tfree)-1]
		s := &e.tslots[si]
		fl := wire.NVMeFields{Type: wire.NVMeWriteRequest, InitiatorTag: 3, ICMD: 4}
		_, hdr := wire.AppendNVMe(nil, &fl)
		d := decoded{op: OpWrite, ns: e.ns[1], lba: 8, blocks: 8, bytes: 4096}
		s.fill(p, &hdr, &d, wire.NVMeWriteCompletion)
		s.state = tPulling
		e.onWriteData(p, si, &falcon.Completion{Kind: tl.Pull, Data: data})
		written := !bytes.Equal(r.mem[1].Bytes(), make([]byte, 64*512))
		n, err := wire.ParseNVMe(data, wire.TypePullData)
		valid := err == nil && n.Type == wire.NVMeWriteDataResponse && !n.NBTH.INV() && n.NBTH.InitiatorTag() == 3 &&
			n.NBTH.ICMD() == 4 && n.NBTH.NCNTOffset() == 0 && len(n.Data) == 4096
		if written != (valid && !bytes.Equal(n.Data, make([]byte, 4096))) {
			t.Fatalf("written %v for valid=%v", written, valid)
		}
		if written && !bytes.Equal(r.mem[1].Bytes()[8*512:16*512], n.Data) {
			t.Fatal("data landed in the wrong blocks")
		}
		if len(e.tfree) != maxTargets {
			t.Fatal("target slot not freed")
		}
	})
}

// FuzzWriteDataRequest: a hostile Write Data Request (the pull's NBTH)
// gets a live write's data only when it names that nCMD exactly; anything
// else is answered without data.
func FuzzWriteDataRequest(f *testing.F) {
	named := func(tag, icmd uint32, off uint8, typ wire.NVMePacketType) []byte {
		fl := wire.NVMeFields{Type: typ, InitiatorTag: tag, ICMD: icmd, NCNTOffset: off}
		b, _ := wire.AppendNVMe(nil, &fl)
		return b
	}
	live := named(nTag(0, 1), iTag(0, 1), 0, wire.NVMeWriteDataRequest)
	f.Add(live, uint16(wire.NBTHLen+4096))
	f.Add(live, uint16(100))
	f.Add(named(nTag(0, 2), iTag(0, 1), 0, wire.NVMeWriteDataRequest), uint16(wire.NBTHLen+4096))
	f.Add(named(nTag(0, 1), iTag(0, 1), 1, wire.NVMeWriteDataRequest), uint16(wire.NBTHLen+4096))
	f.Add(named(nTag(0, 1), iTag(0, 1), 0, wire.NVMeReadRequest), uint16(wire.NBTHLen+4096))
	f.Add([]byte{0x10}, uint16(4))
	f.Fuzz(func(t *testing.T, hdr []byte, length uint16) {
		r := newRig(t, rigConfig{namespaces: []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: 64}}})
		data := pattern(4096, 9)
		r.submit(&Command{Op: OpWrite, NSID: 1, Blocks: 8, Data: [][]byte{data}})
		var got []byte
		r.pair.B.SetULP(&pullCatcher{got: &got})
		if len(hdr) > 1024 {
			hdr = hdr[:1024]
		}
		if _, err := r.pair.CB.PullHeader(0, int(length)%5000, hdr); err != nil {
			return
		}
		r.pair.RunUntil(func() bool { return got != nil }, time.Second)
		n, err := wire.ParseNVMe(hdr, wire.TypePullRequest)
		valid := err == nil && n.Type == wire.NVMeWriteDataRequest && n.NBTH.InitiatorTag() == nTag(0, 1) &&
			n.NBTH.ICMD() == iTag(0, 1) && n.NBTH.NCNTOffset() == 0 && int(length)%5000 >= wire.NBTHLen+4096
		carried := len(got) > wire.NBTHLen && bytes.Equal(got[wire.NBTHLen:], data)
		if carried != valid {
			t.Fatalf("data carried %v for a valid=%v request (answer %d bytes)", carried, valid, len(got))
		}
	})
}

// pullCatcher is a ULP that records the data answering its pull.
type pullCatcher struct{ got *[]byte }

func (c *pullCatcher) OnRequest(cn *falcon.Conn, r *falcon.Request) { _ = refuse(cn, r) }
func (c *pullCatcher) OnCompletion(_ *falcon.Conn, cpl *falcon.Completion) {
	if cpl.Kind == tl.Pull {
		*c.got = append([]byte{}, cpl.Data...)
	}
}
func (c *pullCatcher) OnXon(*falcon.Conn) {}
