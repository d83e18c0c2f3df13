package tests

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	iomemRAM   = regexp.MustCompile(`(?m)^\s*([0-9a-f]+)-([0-9a-f]+) : System RAM$`)
	zoneNormal = regexp.MustCompile(`(?m)^Node 0, zone\s+Normal\n(?:.*\n)*?\s+present\s+(\d+)`)
)

// memFaultCounters are the back-end counters that a GPA the NIC cannot
// translate, or a region it failed to map, would raise.
var memFaultCounters = []string{
	"vhost.bad_mem_region", "vhost.memory_faults", "vhost.chain_bad_gpa",
	"vhost.bad_ring_addr", "vhost.ring_unmapped", "vhost.session_resets",
}

// A 3 GiB guest on q35 has RAM on both sides of the PCI hole: [0, 2 GiB)
// and [4 GiB, 5 GiB), which QEMU sends as two memory regions of one memfd
// (vhostusertest.TwoRegions builds the same layout). Linux allocates from ZONE_NORMAL,
// the RAM above 4 GiB, first, so the rings and packet buffers the NIC
// translates live mostly in the second region. Ping and a checksummed
// transfer each way with a 1 GiB guest must work, with no memory fault
// counted. Runs only in full mode: a 3 GiB guest is heavy for CI's budget.
func TestThreeGiBGuestThroughAFalconnicNIC(t *testing.T) {
	requireE2E(t)
	if mode != "full" {
		t.Skip("the 3 GiB guest runs with FALCONNIC_E2E=full")
	}
	guestImage(t)
	state := stateDir(t)
	d := newDaemonProc(t, state, fullConfig{
		daemonConfig: daemonConfig{
			Control: "control.sock",
			NICs: []nicSpec{
				{Name: "big0", Socket: "big0.sock", MAC: "52:54:00:fd:00:0a"},
				{Name: "small0", Socket: "small0.sock", MAC: "52:54:00:fd:00:0b"},
			},
		},
		// The vsock device reports how many memory regions QEMU sent.
		Vsock: []vsockSpec{{Name: "vsbig", Socket: "vsbig.sock", GuestCID: 3, UDS: "vsbig.uds"}},
	})
	big := boot(t, state, "Big", "--mem", "3G", "--nic", filepath.Join(state, "big0.sock")+",mac=52:54:00:fd:00:0a,ip=10.0.0.1/24",
		"--vsock", filepath.Join(state, "vsbig.sock")+",uds="+filepath.Join(state, "vsbig.uds"))
	if vs := vsockStatus(t, d, "vsbig"); vs.Session.MemRegions != 2 {
		t.Fatalf("QEMU sent %d memory regions for the 3 GiB guest, want 2 (below and above the PCI hole)", vs.Session.MemRegions)
	}
	small := boot(t, state, "Small", "--mem", "1G", "--nic", filepath.Join(state, "small0.sock")+",mac=52:54:00:fd:00:0b,ip=10.0.0.2/24")

	// The guest really has RAM above 4 GiB, and a Normal zone there.
	var high uint64
	for _, m := range iomemRAM.FindAllStringSubmatch(big.exec(t, "cat", "/proc/iomem"), -1) {
		lo, _ := strconv.ParseUint(m[1], 16, 64)
		hi, _ := strconv.ParseUint(m[2], 16, 64)
		if lo >= 4<<30 {
			high += hi - lo + 1
		}
	}
	if high < 512<<20 {
		t.Fatalf("3 GiB guest has only %d MiB of RAM above 4 GiB", high>>20)
	}
	z := zoneNormal.FindStringSubmatch(big.exec(t, "cat", "/proc/zoneinfo"))
	if z == nil || z[1] == "0" {
		t.Fatalf("3 GiB guest has no populated Normal zone: %v", z)
	}
	t.Logf("3 GiB guest: %d MiB of RAM above 4 GiB, Normal zone %s pages", high>>20, z[1])

	ping(t, big, "10.0.0.2")
	ping(t, small, "10.0.0.1")
	transfer(t, big, small, "10.0.0.2", transferBytes())
	transfer(t, small, big, "10.0.0.1", transferBytes())

	st, err := d.status()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := nicReport(st, "big0")
	if !ok {
		t.Fatal("status has no NIC big0")
	}
	c := nicCounters(t, r)
	var faults []string
	for _, k := range memFaultCounters {
		if c[k] != 0 {
			faults = append(faults, k+"="+strconv.FormatUint(c[k], 10))
		}
	}
	if len(faults) > 0 {
		t.Fatalf("big0 counted memory faults: %s", strings.Join(faults, " "))
	}
	t.Logf("big0: vhost.mem_tables %d, vhost.chains_popped %d", c["vhost.mem_tables"], c["vhost.chains_popped"])
	if vs := vsockStatus(t, d, "vsbig"); vs.Counters["host_connects"] < 2 {
		t.Fatalf("the 3 GiB guest's agent sessions did not use vsock: %+v", vs.Counters)
	}
}
