package main

import (
	"fmt"

	"falconnic/qemu"
)

// intxDisks applies a bench's --intx choice to its two disks (the NVMe
// disk first, the local one second): "none" keeps MSI-X on both, "local"
// gives QEMU's own virtio-blk the PCI pin's level interrupt instead, "all"
// both. QEMU 7.2 under TCG was caught losing a completion interrupt of its
// own virtio-blk with MSI-X; the choice lets a run compare.
func intxDisks(mode string, disks []qemu.Disk) error {
	switch mode {
	case "none":
	case "local":
		disks[1].INTx = true
	case "all":
		disks[0].INTx, disks[1].INTx = true, true
	default:
		return fmt.Errorf("--intx %q: none, local or all", mode)
	}
	return nil
}

// intxSetup says in a report which disks run without MSI-X.
func intxSetup(mode string) string {
	return map[string]string{"none": "MSI-X on both disks", "local": "the local disk on INTx (vectors=0), the NVMe disk on MSI-X",
		"all": "both disks on INTx (vectors=0)"}[mode]
}
