package tl

import (
	"testing"

	"falconnic/falcon/wire"
)

func TestStatusTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Statuses {
		n := s.String()
		if seen[n] || n == "" || n[0] == 'S' {
			t.Errorf("status %d has no distinct name (%q)", s, n)
		}
		seen[n] = true
	}
}

// TestCellsRounding: ⌈n/CellSize⌉, at least one cell, whether the cell
// size is a power of two (a shift) or not (a division).
func TestCellsRounding(t *testing.T) {
	for _, tc := range []struct{ size, n, want int }{
		{256, 0, 1}, {256, 1, 1}, {256, 256, 1}, {256, 257, 2}, {256, 4352, 17}, {256, 4353, 18},
		{64, 64, 1}, {64, 65, 2}, {1, 5, 5},
		{100, 0, 1}, {100, 100, 1}, {100, 101, 2}, {100, 4352, 44}, {3, 7, 3},
	} {
		r := NewResources(Limits{CellSize: tc.size})
		if got := r.Cells(tc.n); got != tc.want {
			t.Errorf("cell size %d: Cells(%d) = %d, want %d", tc.size, tc.n, got, tc.want)
		}
	}
}

func TestPoolHoLReserve(t *testing.T) {
	r := NewResources(Limits{CellSize: 256, RxNetPkts: 4, RxNetCells: 100, HoLPkts: 1, HoLCells: 10})
	if r.Cells(0) != 1 || r.Cells(256) != 1 || r.Cells(257) != 2 {
		t.Error("cell rounding")
	}
	for i := 0; i < 3; i++ {
		if !r.RxNet.Take(1, false) {
			t.Fatalf("take %d refused", i)
		}
	}
	if r.RxNet.Take(1, false) {
		t.Error("a non-HoL request took the reserve")
	}
	if !r.RxNet.Take(1, true) {
		t.Error("the HoL request was refused its reserve")
	}
	if r.RxNet.Take(1, true) {
		t.Error("over capacity")
	}
	r.RxNet.Give(1)
	if r.RxNet.Pkt.Used != 3 || r.RxNet.Buf.Used != 3 {
		t.Errorf("used %d/%d", r.RxNet.Pkt.Used, r.RxNet.Buf.Used)
	}
	// All or nothing: a buffer shortfall returns the packet.
	if r.RxNet.Take(200, true) || r.RxNet.Pkt.Used != 3 {
		t.Error("failed take leaked a packet")
	}
}

func TestInitiatorTable(t *testing.T) {
	var in Initiator
	in.Init(0xffffffff, 2)
	r1, s1 := in.Add(Push, 1)
	r2, _ := in.Add(Pull, 2)
	if r1 != 0xffffffff || r2 != 0 || !in.Full() {
		t.Fatalf("rsns %d %d full %v", r1, r2, in.Full())
	}
	in.Slot(r2).State = ICompleted
	if in.Advance() != 0 {
		t.Error("base passed a live transaction")
	}
	s1.State = ICompleted
	if in.Advance() != 2 || in.Base != 1 || in.Live() != 0 {
		t.Errorf("base %d live %d", in.Base, in.Live())
	}
}

func TestTargetTable(t *testing.T) {
	var tg Target
	tg.Init(10, 4)
	if fits, old := tg.Fits(14); fits || old {
		t.Error("RSN beyond the table fits")
	}
	if _, old := tg.Fits(9); !old {
		t.Error("RSN below the base is not old")
	}
	s := tg.Claim(11, Push)
	s.State = TFinished
	if tg.Advance() != 0 {
		t.Error("base passed a free slot")
	}
	tg.Claim(10, Pull).State = TFinished
	if tg.Advance() != 2 || tg.Base != 12 || tg.NextDeliver != 12 {
		t.Errorf("base %d next %d", tg.Base, tg.NextDeliver)
	}
	var _ wire.RSN = tg.Base
}

func TestDynamicThreshold(t *testing.T) {
	r := NewResources(Limits{CellSize: 256, TxReqPkts: 8, TxReqCells: 8, Alpha: 0.5})
	if !r.Admit(3, 0) || r.Admit(4, 0) {
		t.Error("alpha 0.5 of 8 free should admit a connection holding 3, not 4")
	}
	r.TxReq.Pkt.Take(6, false)
	if !r.Admit(0, 0) || r.Admit(1, 0) {
		t.Error("with 2 free a connection may hold only one")
	}
	if !r.Admit(1, 1) || r.Admit(2, 1) {
		t.Error("a connection's own alpha 1 of 2 free should admit it holding 1, not 2")
	}
	r.Alpha = 0
	if !r.Admit(100, 0) {
		t.Error("alpha 0 disables the threshold")
	}
	if r.Admit(2, 1) {
		t.Error("a connection's own alpha applies without the NIC's")
	}
}

// The occupancy EMA follows every change with weight 2^-shift and
// quantises to 32 levels of the capacity; shift 0 reports the occupancy.
func TestPoolEMALevel(t *testing.T) {
	p := Pool{Cap: 64}
	p.Take(32, false)
	if p.Level() != 16 {
		t.Errorf("unsmoothed level at half = %d, want 16", p.Level())
	}
	p.Give(32)
	if p.Level() != 0 {
		t.Errorf("level after giving back = %d", p.Level())
	}
	q := Pool{Cap: 64, EMAShift: 2}
	q.Take(64, true)
	if q.EMA() != 16 || q.Level() != 8 {
		t.Errorf("one change at 1/4 weight: ema %d level %d, want 16 and 8", q.EMA(), q.Level())
	}
	for i := 0; i < 40; i++ {
		q.Give(0)
	}
	if q.Level() != 31 {
		t.Errorf("level after the EMA converged on full = %d, want 31", q.Level())
	}
}
