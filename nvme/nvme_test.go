package nvme

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/link"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

var ns1 = NamespaceConfig{NSID: 1, BlockSize: 512, Blocks: 8192} // 4 MiB

func TestWriteThenReadReturnsTheData(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}})
	data := pattern(64<<10+1536, 1) // 16 full nCMDs and a short one
	if st := r.do(&Command{Op: OpWrite, NSID: 1, SLBA: 8, Blocks: uint32(len(data) / 512), Data: split(data)}); !st.OK() {
		t.Fatalf("write: %v", st)
	}
	if got := r.mem[1].Bytes()[8*512 : 8*512+len(data)]; !bytes.Equal(got, data) {
		t.Fatal("backend does not hold the written data")
	}
	back := make([]byte, len(data))
	if st := r.do(&Command{Op: OpRead, NSID: 1, SLBA: 8, Blocks: uint32(len(data) / 512), Data: split(back)}); !st.OK() {
		t.Fatalf("read: %v", st)
	}
	if !bytes.Equal(back, data) {
		t.Fatal("read data differs from written data")
	}
	if got := r.ini.Stats.NCMDsSent.Load(); got != 34 {
		t.Fatalf("NCMDsSent = %d, want 17 per command", got)
	}
	if got := r.tgt.Namespace(1).Stats.Writes.Load(); got != 17 {
		t.Fatalf("namespace Writes = %d, want one per nCMD", got)
	}
}

func TestIdentifyReportsTheNamespace(t *testing.T) {
	ro := NamespaceConfig{NSID: 2, BlockSize: 4096, Blocks: 100, ReadOnly: true}
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1, ro}})
	for _, want := range []NamespaceConfig{ns1, ro} {
		buf := make([]byte, IdentifyLen)
		if st := r.do(&Command{Op: OpIdentify, NSID: want.NSID, Data: [][]byte{buf}}); !st.OK() {
			t.Fatalf("identify %d: %v", want.NSID, st)
		}
		info, err := ParseIdentify(buf)
		if err != nil {
			t.Fatal(err)
		}
		if info.Blocks != want.Blocks || info.BlockSize != want.BlockSize || info.ReadOnly != want.ReadOnly {
			t.Fatalf("identify %d = %+v, want %+v", want.NSID, info, want)
		}
	}
}

// TestStatusCodes: every refusal reaches the host as the NVMe status the
// spec names for it, and a refused write touches nothing.
func TestStatusCodes(t *testing.T) {
	ro := NamespaceConfig{NSID: 2, BlockSize: 512, Blocks: 64, ReadOnly: true}
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1, ro}})
	r.mem[2].Bytes()[0] = 0xaa
	buf := func(n int) [][]byte { return [][]byte{pattern(n, 9)} }
	cases := []struct {
		name string
		cmd  Command
		want Status
	}{
		{"read in range", Command{Op: OpRead, NSID: 1, SLBA: 8184, Blocks: 8, Data: buf(4096)}, StatusSuccess},
		{"read past the end", Command{Op: OpRead, NSID: 1, SLBA: 8185, Blocks: 8, Data: buf(4096)}, StatusLBAOutOfRange},
		{"write past the end", Command{Op: OpWrite, NSID: 1, SLBA: 8192, Blocks: 1, Data: buf(512)}, StatusLBAOutOfRange},
		{"write with huge SLBA", Command{Op: OpWrite, NSID: 1, SLBA: 1<<64 - 1, Blocks: 2, Data: buf(1024)}, StatusLBAOutOfRange},
		{"write to read-only", Command{Op: OpWrite, NSID: 2, SLBA: 0, Blocks: 1, Data: buf(512)}, StatusWriteProtected},
		{"write zeroes to read-only", Command{Op: OpWriteZeroes, NSID: 2, SLBA: 0, Blocks: 4}, StatusWriteProtected},
		{"discard on read-only", Command{Op: OpDSM, NSID: 2, SLBA: 0, Blocks: 4}, StatusWriteProtected},
		{"read of read-only", Command{Op: OpRead, NSID: 2, SLBA: 0, Blocks: 1, Data: buf(512)}, StatusSuccess},
		{"flush of read-only", Command{Op: OpFlush, NSID: 2}, StatusSuccess},
		{"unknown namespace", Command{Op: OpRead, NSID: 3, SLBA: 0, Blocks: 1, Data: buf(512)}, StatusInvalidNamespace},
		{"write zeroes past the end", Command{Op: OpWriteZeroes, NSID: 1, SLBA: 8000, Blocks: 193}, StatusLBAOutOfRange},
	}
	for _, c := range cases {
		cmd := c.cmd
		if got := r.do(&cmd); got != c.want {
			t.Errorf("%s: status %v, want %v", c.name, got, c.want)
		}
	}
	if r.mem[2].Bytes()[0] != 0xaa || !bytes.Equal(r.mem[2].Bytes()[1:], make([]byte, 64*512-1)) {
		t.Error("refused commands changed the read-only namespace")
	}
	if n := r.tgt.Namespace(1).Stats.Writes.Load(); n != 0 {
		t.Errorf("out-of-range writes reached the backend %d times", n)
	}
	if r.tgt.Namespace(2).Stats.WriteProtected.Load() != 3 || r.tgt.Namespace(1).Stats.OutOfRange.Load() != 4 {
		t.Errorf("refusal counters: ns1 %v ns2 %v", r.tgt.Namespace(1).Stats.Set().NonZero(), r.tgt.Namespace(2).Stats.Set().NonZero())
	}
	// A refused write is answered at once, never pulled; a write after it
	// still lands.
	pulls := r.tgt.Stats.PullsSent.Load()
	data := pattern(4096, 3)
	if st := r.do(&Command{Op: OpWrite, NSID: 1, SLBA: 0, Blocks: 8, Data: [][]byte{data}}); !st.OK() {
		t.Fatalf("write after refusals: %v", st)
	}
	if !bytes.Equal(r.mem[1].Bytes()[:4096], data) || r.tgt.Stats.PullsSent.Load() != pulls+1 {
		t.Fatalf("write after refusals lost (pulls %d, want %d)", r.tgt.Stats.PullsSent.Load(), pulls+1)
	}
}

func TestSubmitRefusesMalformedCommands(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}})
	bad := []Command{
		{Op: Opcode(0x7f), NSID: 1},
		{Op: OpRead, NSID: 1, Blocks: 0, Data: [][]byte{make([]byte, 512)}},
		{Op: OpRead, NSID: 1, Blocks: 1, Data: [][]byte{make([]byte, 100)}},
		{Op: OpWrite, NSID: 1, Blocks: 4096, Data: [][]byte{make([]byte, MaxTransfer+512)}},
		{Op: OpFlush, NSID: 1, Blocks: 1},
		{Op: OpIdentify, NSID: 1, Data: [][]byte{make([]byte, 512)}},
		{Op: OpWriteZeroes, NSID: 1, Blocks: MaxBlocks + 1},
	}
	for i := range bad {
		if err := r.path.Submit(&bad[i]); err != ErrInvalid {
			t.Errorf("command %d (%v): %v, want ErrInvalid", i, bad[i].Op, err)
		}
	}
	if r.ini.Stats.NCMDsSent.Load() != 0 {
		t.Fatal("a malformed command was sent")
	}
}

func TestWriteZeroesAndDiscardClearBlocks(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}})
	copy(r.mem[1].Bytes(), pattern(64*512, 5))
	if st := r.do(&Command{Op: OpWriteZeroes, NSID: 1, SLBA: 2, Blocks: 3, Deallocate: true}); !st.OK() {
		t.Fatal(st)
	}
	if st := r.do(&Command{Op: OpDSM, NSID: 1, SLBA: 10, Blocks: 2}); !st.OK() {
		t.Fatal(st)
	}
	if st := r.do(&Command{Op: OpFlush, NSID: 1}); !st.OK() {
		t.Fatal(st)
	}
	m := r.mem[1].Bytes()
	zero := func(from, n int) bool { return bytes.Equal(m[from*512:(from+n)*512], make([]byte, n*512)) }
	if !zero(2, 3) || !zero(10, 2) || zero(1, 1) || zero(5, 1) || zero(9, 1) || zero(12, 1) {
		t.Fatal("zeroed/discarded ranges wrong")
	}
	s := &r.tgt.Namespace(1).Stats
	if s.WriteZeroes.Load() != 1 || s.Discards.Load() != 1 || s.Flushes.Load() != 1 {
		t.Fatalf("namespace counters %v", s.Set().NonZero())
	}
}

// TestManyInFlightUnderImpairments: hundreds of reads and writes in flight
// at once over a link that drops, reorders and duplicates; every command
// completes once, successfully, and the namespace matches a model.
func TestManyInFlightUnderImpairments(t *testing.T) {
	for _, imp := range []link.MemConfig{
		{},
		{DropProb: 0.02, ReorderProb: 0.1, DupProb: 0.02, Seed: 1},
		{DropProb: 0.05, ReorderProb: 0.2, CorruptProb: 0.01, Seed: 2},
	} {
		r := newRig(t, rigConfig{impair: imp, namespaces: []NamespaceConfig{ns1}, maxTxns: 64})
		rng := rand.New(rand.NewSource(imp.Seed))
		model := make([]byte, 8192*512)
		// Round 1: 120 writes to disjoint regions, all in flight together.
		var cmds []*Command
		for i := 0; i < 120; i++ {
			blocks := 1 + rng.Intn(64)
			slba := uint64(i) * 64
			data := pattern(blocks*512, byte(i))
			copy(model[slba*512:], data)
			cmds = append(cmds, r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: slba, Blocks: uint32(blocks), Data: split(data)}))
		}
		r.run(len(cmds))
		// Round 2: reads of random ranges and more writes, mixed.
		type rd struct {
			c    *Command
			slba uint64
			buf  []byte
		}
		var reads []rd
		for i := 0; i < 150; i++ {
			blocks := 1 + rng.Intn(300)
			slba := uint64(rng.Intn(8192 - blocks))
			if i%3 == 0 {
				slba = 8192 - 1024 + uint64(i/3)*16
				data := pattern(16*512, byte(i+50))
				copy(model[slba*512:], data)
				cmds = append(cmds, r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: slba, Blocks: 16, Data: split(data)}))
				continue
			}
			if slba+uint64(blocks) > 8192-1024 {
				slba = 0
			}
			buf := make([]byte, blocks*512)
			c := r.submit(&Command{Op: OpRead, NSID: 1, SLBA: slba, Blocks: uint32(blocks), Data: split(buf)})
			cmds = append(cmds, c)
			reads = append(reads, rd{c, slba, buf})
		}
		r.run(len(cmds))
		if len(r.done) != len(cmds) {
			t.Fatalf("%d completions for %d commands", len(r.done), len(cmds))
		}
		for _, c := range cmds {
			if !c.Status.OK() {
				t.Fatalf("impair %+v: %v failed: %v", imp, c.Op, c.Status)
			}
		}
		for _, x := range reads {
			if !bytes.Equal(x.buf, model[x.slba*512:x.slba*512+uint64(len(x.buf))]) {
				t.Fatalf("impair %+v: read at %d returned wrong data", imp, x.slba)
			}
		}
		if !bytes.Equal(r.mem[1].Bytes(), model) {
			t.Fatalf("impair %+v: namespace differs from the model", imp)
		}
		// Every Read Response went out from its chunk, and once the target's
		// pushes are all acknowledged every chunk is back: held by a slot or
		// free, none kept by Falcon.
		r.pair.RunUntil(func() bool { return r.pair.CB.Outstanding() == 0 }, time.Second)
		if lent, rr := r.tgt.Stats.LentChunks.Load(), r.ini.Stats.ReadResponses.Load(); lent != rr || lent == 0 {
			t.Errorf("impair %+v: %d Read Responses sent from their chunk, %d received", imp, lent, rr)
		}
		if err := chunkLedger(r.tgt); err != nil {
			t.Errorf("impair %+v: %v", imp, err)
		}
		if imp.DropProb > 0 && (r.pair.AB.Stats.DroppedRandom.Load() == 0 || r.pair.BA.Stats.Reordered.Load() == 0) {
			t.Fatalf("impair %+v: the link impaired nothing", imp)
		}
		t.Logf("impair %+v: link A→B %v B→A %v; initiator %v", imp, r.pair.AB.Stats.Set().NonZero(),
			r.pair.BA.Stats.Set().NonZero(), r.ini.Stats.Set().NonZero())
	}
}

// TestPathFailureCompletesEverything: when the connection dies, every
// command in flight or waiting completes once with a path error, and new
// submissions are refused.
func TestPathFailureCompletesEverything(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}})
	var cmds []*Command
	for i := 0; i < 40; i++ {
		cmds = append(cmds, r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: uint64(i) * 8, Blocks: 8,
			Data: [][]byte{pattern(4096, byte(i))}}))
	}
	r.pair.Step() // some requests on the wire, none answered yet
	if err := r.pair.A.Close(r.path.conn.SCID()); err != nil {
		t.Fatal(err)
	}
	r.run(len(cmds))
	if len(r.done) != len(cmds) {
		t.Fatalf("%d completions for %d commands", len(r.done), len(cmds))
	}
	for _, c := range cmds {
		if c.Status != StatusInternalPathError {
			t.Fatalf("status %v, want internal path error", c.Status)
		}
	}
	if err := r.path.Submit(&Command{Op: OpFlush, NSID: 1}); err != ErrPathDown {
		t.Fatalf("submit on a failed path: %v", err)
	}
}

// TestResubmitFromACompletionOnADeadPath: a submitter that resubmits
// from its completion callback (a disk retrying on a path error) while
// the path fails under it gets ErrPathDown; nothing is lost or doubled.
func TestResubmitFromACompletionOnADeadPath(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}, maxTxns: 4})
	var refused, final int
	var cmds []*Command
	for i := 0; i < 40; i++ {
		c := &Command{Op: OpWrite, NSID: 1, SLBA: uint64(i) * 8, Blocks: 8, Data: [][]byte{pattern(4096, byte(i))}}
		c.Done = func(c *Command) {
			if c.Status == StatusInternalPathError {
				if err := r.path.Submit(c); err == ErrPathDown {
					refused++
					final++
				} else if err != nil {
					t.Errorf("resubmit: %v", err)
				}
				return
			}
			final++
		}
		cmds = append(cmds, r.submit(c))
	}
	r.pair.Step()
	if err := r.pair.A.Close(r.path.conn.SCID()); err != nil {
		t.Fatal(err)
	}
	r.pair.RunUntil(func() bool { return final == len(cmds) }, 10*time.Second)
	if final != len(cmds) || refused == 0 {
		t.Fatalf("%d of %d commands final, %d resubmissions refused", final, len(cmds), refused)
	}
}

// TestCancelDetachesBuffers: a cancelled read's data never reaches its
// buffer, a cancelled write's data is never pulled, and neither calls
// its submitter back.
func TestCancelDetachesBuffers(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}})
	copy(r.mem[1].Bytes(), pattern(4096, 4))
	buf := make([]byte, 4096)
	called := false
	rd := r.submit(&Command{Op: OpRead, NSID: 1, Blocks: 8, Data: [][]byte{buf}, Done: func(*Command) { called = true }})
	wr := r.submit(&Command{Op: OpWrite, NSID: 1, SLBA: 100, Blocks: 8, Data: [][]byte{pattern(4096, 5)},
		Done: func(*Command) { called = true }})
	r.path.Cancel(rd)
	r.path.Cancel(wr)
	r.pair.RunUntil(func() bool { return false }, 10*time.Millisecond)
	if called || !bytes.Equal(buf, make([]byte, 4096)) {
		t.Fatal("a cancelled command touched its buffer or called back")
	}
	if !bytes.Equal(r.mem[1].Bytes()[100*512:108*512], make([]byte, 4096)) {
		t.Fatal("a cancelled write landed")
	}
	if r.path.Outstanding() != 0 {
		t.Fatalf("%d commands still outstanding", r.path.Outstanding())
	}
}

// TestCommandTimeout: a command whose response never comes (the target
// dropped its path; the initiator's connections look healthy) fails with a
// transient transport error after CommandTimeout, and a late response
// would find no live tag.
func TestCommandTimeout(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}, timeout: 2 * time.Second})
	r.tgt.RemovePath(r.back)
	buf := make([]byte, 4096)
	c := r.submit(&Command{Op: OpRead, NSID: 1, Blocks: 8, Data: [][]byte{buf}})
	r.pair.RunUntil(func() bool { return false }, 100*time.Millisecond)
	if len(r.done) != 0 {
		t.Fatalf("completed early: %v", c.Status)
	}
	for i := 0; i < 20 && len(r.done) == 0; i++ {
		at, ok := r.ini.NextDeadline()
		if !ok {
			t.Fatal("no timeout deadline with a command in flight")
		}
		r.pair.Clock.Set(max(at, r.pair.Clock.Now()))
		r.ini.OnTimer(r.pair.Clock.Now())
	}
	if len(r.done) != 1 || c.Status != StatusTransportError || r.ini.Stats.TimedOut.Load() != 1 {
		t.Fatalf("done %d status %v", len(r.done), c.Status)
	}
	if now := r.pair.Clock.Now(); now < 2*time.Second || now > 3*time.Second {
		t.Fatalf("timed out at %v, want about 2 s", now)
	}
	if _, ok := r.ini.NextDeadline(); ok {
		t.Fatal("timer still armed with nothing in flight")
	}
}

// requestTap records what the initiator's ULP is handed, then passes it on.
type requestTap struct {
	falcon.ULP
	conns []*falcon.Conn
	kinds []tl.Kind
	nbths []wire.NVMe
}

func (t *requestTap) OnRequest(c *falcon.Conn, r *falcon.Request) {
	ft := wire.TypePushData
	if r.Kind == tl.Pull {
		ft = wire.TypePullRequest
	}
	n, _ := wire.ParseNVMe(append([]byte(nil), r.Payload...), ft)
	t.conns, t.kinds, t.nbths = append(t.conns, c), append(t.kinds, r.Kind), append(t.nbths, n)
	t.ULP.OnRequest(c, r)
}

// TestWrite8KFlow is [S §6.6] flow 8 on one unordered connection: two
// Write Requests (pushes), two Write Data Requests (pulls whose header is
// the NBTH naming each nCMD), two Write Completions (pushes).
func TestWrite8KFlow(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}})
	tap := &requestTap{ULP: r.ini}
	r.pair.A.SetULP(tap)
	data := pattern(8192, 4)
	if st := r.do(&Command{Op: OpWrite, NSID: 1, SLBA: 16, Blocks: 16, Data: [][]byte{data}}); !st.OK() {
		t.Fatalf("write: %v", st)
	}
	var pulls, pushes int
	offs := map[uint8]uint32{}
	for i, k := range tap.kinds {
		if tap.conns[i] != r.path.Conn() {
			t.Fatal("a request came on another connection")
		}
		n := tap.nbths[i]
		switch {
		case k == tl.Pull && n.Type == wire.NVMeWriteDataRequest:
			pulls++
			offs[n.NBTH.NCNTOffset()] = n.NBTH.InitiatorTag()
			if n.NBTH.NCNTTotal() != 1 {
				t.Errorf("pull NBTH NCNT total %d", n.NBTH.NCNTTotal())
			}
		case k == tl.Push && n.Type == wire.NVMeWriteCompletion:
			pushes++
		default:
			t.Errorf("unexpected %v request of NVMe type %v", k, n.Type)
		}
	}
	if pulls != 2 || pushes != 2 || len(offs) != 2 || offs[0] == offs[1] {
		t.Fatalf("%d pulls (offsets→tags %v), %d completions", pulls, offs, pushes)
	}
	if !bytes.Equal(r.mem[1].Bytes()[16*512:32*512], data) {
		t.Fatal("data not in the namespace")
	}
}

// chunkLedger checks that each of e's chunks is held by a target slot or
// free, and that Falcon kept none.
func chunkLedger(e *Engine) error {
	held := 0
	for i := range e.tslots {
		if e.tslots[i].buf != nil {
			held++
		}
	}
	for id, c := range e.chunks {
		if c == nil {
			return fmt.Errorf("chunk %d was kept by Falcon", id)
		}
	}
	if held+len(e.free) != len(e.chunks) {
		return fmt.Errorf("%d chunks: %d held by slots, %d free", len(e.chunks), held, len(e.free))
	}
	return nil
}

// TestOpcodeTableHasARowPerOpcode: every supported opcode has its named
// row, and no other opcode is taken for supported.
func TestOpcodeTableHasARowPerOpcode(t *testing.T) {
	supported := map[Opcode]bool{}
	for _, o := range Opcodes {
		supported[o] = true
		if i, ok := o.Info(); !ok || i.Name == "" || o.String() != i.Name {
			t.Errorf("opcode %#x: no row (%+v, %v)", uint8(o), i, ok)
		}
	}
	for o := 0; o < 256; o++ {
		if _, ok := Opcode(o).Info(); ok != supported[Opcode(o)] {
			t.Errorf("opcode %#x: supported %v, want %v", o, ok, supported[Opcode(o)])
		}
	}
}

// TestRefusalFalconCannotSendIsCounted: an answer to an unusable request
// that Falcon refuses (here: no transaction holds the RSN) is counted,
// not ignored.
func TestRefusalFalconCannotSendIsCounted(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: []NamespaceConfig{ns1}})
	r.tgt.refuse(r.pair.CB, &falcon.Request{Kind: tl.Pull, RSN: 12345})
	r.tgt.refuse(r.pair.CB, &falcon.Request{Kind: tl.Push, RSN: 12346})
	if got := r.tgt.Stats.RefuseLost.Load(); got != 2 {
		t.Fatalf("refuse_lost = %d, want 2", got)
	}
	// The path still works.
	data := pattern(4096, 3)
	if st := r.do(&Command{Op: OpWrite, NSID: 1, Blocks: 8, Data: split(data)}); !st.OK() {
		t.Fatalf("write after the refusals: %v", st)
	}
}
