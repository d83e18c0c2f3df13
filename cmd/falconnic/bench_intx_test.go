package main

import (
	"testing"

	"falconnic/qemu"
)

func TestIntxDisks(t *testing.T) {
	for mode, want := range map[string][2]bool{"none": {false, false}, "local": {false, true}, "all": {true, true}} {
		d := []qemu.Disk{{VhostUserBlk: "/s"}, {File: "/f"}}
		if err := intxDisks(mode, d); err != nil || d[0].INTx != want[0] || d[1].INTx != want[1] {
			t.Errorf("--intx %s: %v, disks %+v", mode, err, d)
		}
		if intxSetup(mode) == "" {
			t.Errorf("--intx %s: no setup text", mode)
		}
	}
	if err := intxDisks("msi", []qemu.Disk{{}, {}}); err == nil {
		t.Error("--intx msi accepted")
	}
}
