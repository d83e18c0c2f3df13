package rdmauapi

import "testing"

// ALLOC_MR's structural check: handles, a key that can never be the DMA
// key (whatever the low byte ib_inc_rkey steps), and a well-formed page
// list whose npages is the capacity.
func TestAllocMRCheck(t *testing.T) {
	good := func() AllocMR {
		m := AllocMR(make([]byte, AllocMRSize))
		m.SetMR(3)
		m.SetPD(1)
		m.SetKey(0x300)
		m.PBL().SetRoot(0x10000)
		m.PBL().SetNpages(32)
		m.PBL().SetLevels(1)
		m.PBL().SetPageShift(PageShift)
		return m
	}
	if st := good().Check(); st != StatusOK {
		t.Fatalf("good ALLOC_MR: %v", st)
	}
	for _, c := range []struct {
		name string
		mut  func(AllocMR)
		want Status
	}{
		{"mr 0", func(m AllocMR) { m.SetMR(0) }, StatusBadHandle},
		{"pd 0", func(m AllocMR) { m.SetPD(0) }, StatusBadHandle},
		{"DMA key", func(m AllocMR) { m.SetKey(DMALKey) }, StatusBadParam},
		{"key index 0", func(m AllocMR) { m.SetKey(0x7f) }, StatusBadParam},
		{"no pages", func(m AllocMR) { m.PBL().SetNpages(0) }, StatusBadParam},
		{"one level over 512", func(m AllocMR) { m.PBL().SetNpages(513) }, StatusBadParam},
		{"unaligned root", func(m AllocMR) { m.PBL().SetRoot(0x10008) }, StatusBadGPA},
		{"page shift", func(m AllocMR) { m.PBL().SetPageShift(13) }, StatusBadParam},
	} {
		m := good()
		c.mut(m)
		if st := m.Check(); st != c.want {
			t.Errorf("%s: %v, want %v", c.name, st, c.want)
		}
	}
}

func TestArmCQCheck(t *testing.T) {
	for flags, want := range map[uint32]Status{
		ArmNext: StatusOK, ArmSolicited: StatusOK, ArmWord: StatusOK, ArmWord | ArmNext: StatusOK,
		0: StatusBadParam, 1 << 3: StatusBadParam, ArmNext | 1<<31: StatusBadParam,
	} {
		a := ArmCQ(make([]byte, ArmCQSize))
		a.SetCQ(1)
		a.SetFlags(flags)
		if st := a.Check(); st != want {
			t.Errorf("flags %#x: %v, want %v", flags, st, want)
		}
	}
}
