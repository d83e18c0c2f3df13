package rdma

import (
	"testing"

	"falconnic/device/cm"
	"falconnic/device/rdmauapi"
)

// PROBE advertises fast registration and the CQ arm word; ALLOC_MR goes
// through the control channel's checks to the engine.
func TestRDMAProbeAndAllocMR(t *testing.T) {
	v := newVM(t, 11, cm.NewOnFabric(nil))
	st, attr := v.send(rdmauapi.OpProbe, v.inst, make([]byte, rdmauapi.ProbeReqSize))
	a := rdmauapi.DeviceAttr(attr)
	if st != rdmauapi.StatusOK || a.CapFlags()&(rdmauapi.CapMemMgt|rdmauapi.CapArmWord) == 0 || a.MaxFastRegPages() == 0 {
		t.Fatalf("probe: %v caps %#x max_fast_reg_pages %d", st, a.CapFlags(), a.MaxFastRegPages())
	}
	v.ok(rdmauapi.OpOpen, make([]byte, rdmauapi.OpenReqSize))
	v.ok(rdmauapi.OpCreatePD, handle(1))
	body := func(key, npages uint32) []byte {
		b := make([]byte, rdmauapi.AllocMRSize)
		m := rdmauapi.AllocMR(b)
		m.SetMR(7)
		m.SetPD(1)
		m.SetKey(key)
		m.PBL().SetRoot(v.alloc(4096))
		m.PBL().SetNpages(npages)
		m.PBL().SetLevels(1)
		m.PBL().SetPageShift(12)
		return b
	}
	for _, c := range []struct {
		name        string
		key, npages uint32
		want        rdmauapi.Status
	}{
		{"DMA key", 0, 8, rdmauapi.StatusBadParam},
		{"over the limit", 0x700, a.MaxFastRegPages() + 1, rdmauapi.StatusBadParam},
		{"good", 0x700, 8, rdmauapi.StatusOK},
		{"handle in use", 0x800, 8, rdmauapi.StatusHandleInUse},
	} {
		if st, _ := v.send(rdmauapi.OpAllocMR, v.inst, body(c.key, c.npages)); st != c.want {
			t.Errorf("%s: %v, want %v", c.name, st, c.want)
		}
	}
	if st, _ := v.send(rdmauapi.OpDestroyPD, v.inst, handle(1)); st != rdmauapi.StatusBusy {
		t.Fatalf("PD with an FRWR MR: %v", st)
	}
	v.ok(rdmauapi.OpDeregMR, handle(7))
	v.ok(rdmauapi.OpDestroyPD, handle(1))
}

// The DMA engine's compare-and-swap (the CQ arm word) works on aligned
// words inside guest RAM only.
func TestRDMAMemCompareAndSwap(t *testing.T) {
	v := newVM(t, 12, nil)
	m := &v.r.mem
	gpa := uint64(vmBase + 0x2000)
	v.at(gpa, 4)[0] = 2
	if ok, err := m.CompareAndSwap32(gpa, 2, 0); !ok || err != nil || v.at(gpa, 1)[0] != 0 {
		t.Fatalf("swap: %v %v", ok, err)
	}
	if ok, err := m.CompareAndSwap32(gpa, 2, 5); ok || err != nil || v.at(gpa, 1)[0] != 0 {
		t.Fatalf("swap with a stale value: %v %v", ok, err)
	}
	if _, err := m.CompareAndSwap32(gpa+2, 0, 1); err == nil {
		t.Fatal("unaligned word accepted")
	}
	if _, err := m.CompareAndSwap32(vmBase+8<<20, 0, 1); err == nil {
		t.Fatal("word outside RAM accepted")
	}
}
