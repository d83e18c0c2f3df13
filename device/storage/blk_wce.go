package storage

// writeThroughFor reports whether a guest with features acked and the
// config's writeback byte wb sees a write-through disk [virtio 1.2
// §5.2.6.1]: with VIRTIO_BLK_F_CONFIG_WCE the byte decides (0: write
// through); without it, a driver that did not negotiate FLUSH cannot ask
// for durability, so the device writes through. A write-through disk
// completes a write only once it is durable: the NVMe write carries FUA
// [issue 18, finding 6].
func writeThroughFor(acked uint64, wb byte) bool {
	switch {
	case acked&blkFConfigWCE != 0:
		return wb == 0
	case acked&blkFFlush == 0:
		return true
	}
	return false
}
