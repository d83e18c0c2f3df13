package ether

import (
	"bytes"
	"sync"
	"testing"

	"falconnic/device/l2"
	"falconnic/vhostuser"
)

// fakeUpper records what the NIC hands its upper function.
type fakeUpper struct {
	mu     sync.Mutex
	frames [][]byte
	tables []*vhostuser.MemTable
}

func (u *fakeUpper) HandleControl(f []byte) {
	u.mu.Lock()
	u.frames = append(u.frames, append([]byte(nil), f...))
	u.mu.Unlock()
}

func (u *fakeUpper) SetMemTable(t *vhostuser.MemTable) {
	u.mu.Lock()
	u.tables = append(u.tables, t)
	u.mu.Unlock()
}

func (u *fakeUpper) Status() map[string]uint64 { return map[string]uint64{"doorbells": 7} }

// TestUpperFunctionGetsControlFramesMemoryAndStatus attaches an upper
// function as the daemon attaches the RDMA function: it receives the
// control frames, the session's memory table, and its counters appear in
// the NIC's status under its name.
func TestUpperFunctionGetsControlFramesMemoryAndStatus(t *testing.T) {
	up := &recorder{}
	n := newTestNIC(t, "n", macA, 1)
	n.SetUplink(up)
	u := &fakeUpper{}
	n.Attach("rdma", u)
	g := attach(t, n, acked1)
	ctl := ethFrame(macA, macA, l2.EtherTypeControl, "doorbell")
	marker := ethFrame(macB, macA, 0x0800, "marker")
	g.Send(0, ctl, marker)
	up.wait(t, 1)
	u.mu.Lock()
	frames, tables := u.frames, u.tables
	u.mu.Unlock()
	if len(frames) != 1 || !bytes.Equal(frames[0], ctl) {
		t.Errorf("upper got frames %q", frames)
	}
	if len(tables) == 0 || tables[len(tables)-1] == nil {
		t.Errorf("upper got memory tables %v, want the session's", tables)
	}
	if got := n.Status().Counters["rdma.doorbells"]; got != 7 {
		t.Errorf("status rdma.doorbells = %d, want 7", got)
	}
	n.Attach("rdma", nil)
	if _, ok := n.Status().Counters["rdma.doorbells"]; ok {
		t.Error("a detached function still reports")
	}
}
