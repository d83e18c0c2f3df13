package ether

import (
	"sync/atomic"

	"falconnic/internal/stats"
	"falconnic/vhostuser"
)

// virtio-net feature bits (virtio 1.2 §5.1.3). We offer no offloads: no
// CSUM, GSO, TSO or UFO until the NIC implements them.
const (
	netFMrgRxbuf = 1 << 15
	netFMQ       = 1 << 22
)

// virtio_net_hdr sizes (virtio 1.2 §5.1.6): 12 bytes with VERSION_1 or
// MRG_RXBUF, 10 in legacy mode without MRG_RXBUF.
const (
	netHdrLen       = 12
	netHdrLegacyLen = 10
	netHdrNumBufs   = 10 // offset of num_buffers
)

// Counters counts the Ethernet function's traffic and every drop cause.
type Counters struct {
	TxFrames          stats.Counter
	TxBytes           stats.Counter
	TxRunt            stats.Counter
	TxTooBig          stats.Counter
	TxChainWritable   stats.Counter
	TxNoUplink        stats.Counter
	ControlFrames     stats.Counter
	ControlNoHook     stats.Counter
	RxFrames          stats.Counter
	RxBytes           stats.Counter
	RxRunt            stats.Counter
	RxTooBig          stats.Counter
	RxQueueFull       stats.Counter
	RxWaits           stats.Counter
	RxWaitTimeouts    stats.Counter
	RxNoPoolBuf       stats.Counter
	RxChainReadable   stats.Counter
	RxChainTooSmall   stats.Counter
	RxTooManyBufs     stats.Counter
	RxGuestNoBufs     stats.Counter
	RxPendingReset    stats.Counter
	RxPartialReturned stats.Counter
	HdrFixups         stats.Counter
}

// Set lists the counters with their help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "tx_frames", Help: "frames the guest transmitted to the uplink", Counter: &c.TxFrames},
		{Name: "tx_bytes", Help: "bytes of those frames (no virtio_net_hdr)", Counter: &c.TxBytes},
		{Name: "tx_runt", Help: "TX chains shorter than virtio_net_hdr + Ethernet header", Counter: &c.TxRunt},
		{Name: "tx_too_big", Help: "TX chains longer than the largest frame", Counter: &c.TxTooBig},
		{Name: "tx_chain_writable", Help: "TX chains with device-writable descriptors", Counter: &c.TxChainWritable},
		{Name: "tx_no_uplink", Help: "TX frames dropped for want of an uplink", Counter: &c.TxNoUplink},
		{Name: "control_frames", Help: "EtherType 0x88B5 frames to our MAC, kept for the RDMA function", Counter: &c.ControlFrames},
		{Name: "control_no_hook", Help: "control-channel frames dropped: no RDMA function attached", Counter: &c.ControlNoHook},
		{Name: "rx_frames", Help: "frames written to the guest", Counter: &c.RxFrames},
		{Name: "rx_bytes", Help: "bytes of those frames (no virtio_net_hdr)", Counter: &c.RxBytes},
		{Name: "rx_runt", Help: "frames toward the guest shorter than an Ethernet header", Counter: &c.RxRunt},
		{Name: "rx_too_big", Help: "frames toward the guest longer than the largest frame", Counter: &c.RxTooBig},
		{Name: "rx_queue_full", Help: "frames dropped: the NIC's RX queue was full", Counter: &c.RxQueueFull},
		{Name: "rx_waits", Help: "times a local sender waited for room in the full RX queue", Counter: &c.RxWaits},
		{Name: "rx_wait_timeouts", Help: "waits for room that timed out (the frame dropped; no more waits until RX progresses)", Counter: &c.RxWaitTimeouts},
		{Name: "rx_no_pool_buf", Help: "frames dropped: no free NIC buffer", Counter: &c.RxNoPoolBuf},
		{Name: "rx_chain_readable", Help: "RX chains with device-readable descriptors", Counter: &c.RxChainReadable},
		{Name: "rx_chain_too_small", Help: "frames dropped: RX chain too small (no MRG_RXBUF) or header split", Counter: &c.RxChainTooSmall},
		{Name: "rx_too_many_bufs", Help: "frames dropped: would need more merged buffers than allowed", Counter: &c.RxTooManyBufs},
		{Name: "rx_guest_no_bufs", Help: "times a frame waited because the guest had posted no RX buffers", Counter: &c.RxGuestNoBufs},
		{Name: "rx_partial_returned", Help: "RX chains given back empty: a bad chain sat between a frame's buffers", Counter: &c.RxPartialReturned},
		{Name: "hdr_fixups", Help: "switches to the 12-byte header: features said legacy, TX chains said modern (QEMU reconnect quirk)", Counter: &c.HdrFixups},
		{Name: "rx_pending_reset", Help: "frames dropped because the RX ring stopped while they waited", Counter: &c.RxPendingReset},
	}
}

// netDev is the virtio-net function as a vhostuser.Device. Queue 2k is the
// RX ring of pair k, 2k+1 its TX ring (virtio 1.2 §5.1.2); the control queue stays
// in QEMU.
type netDev struct {
	nic      *NIC
	pairs    int
	features atomic.Uint64
	// modernHdr is set when the acked features say legacy (10-byte header)
	// but the guest's TX chains show it uses the modern layout. QEMU 7.2
	// does this after a reconnect when the guest driver negotiated features
	// while no back-end was connected: SET_FEATURES then carries only
	// PROTOCOL_FEATURES. A legacy Linux guest (no ANY_LAYOUT, which we
	// never offer) always puts the 10-byte header in its own descriptor.
	modernHdr atomic.Bool
}

func (d *netDev) Features() uint64 {
	f := vhostuser.FeatureVersion1 | vhostuser.FeatureIndirectDesc | vhostuser.FeatureEventIdx | netFMrgRxbuf
	if d.pairs > 1 {
		f |= netFMQ
	}
	return f
}

// ProtocolFeatures adds nothing: QEMU emulates net config itself
// (hw/virtio/vhost-user.c drops PROTOCOL_F_CONFIG for net).
func (d *netDev) ProtocolFeatures() uint64 { return 0 }
func (d *netDev) NumQueues() int           { return 2 * d.pairs }
func (d *netDev) QueueNum() uint64         { return uint64(d.pairs) }

func (d *netDev) GetConfig(offset, size uint32) ([]byte, error) { return nil, vhostuser.ErrNoConfig }
func (d *netDev) SetConfig(offset uint32, data []byte) error    { return vhostuser.ErrNoConfig }

// SetFeatures records the latest acked bits; rings read them at start.
func (d *netDev) SetFeatures(acked uint64) {
	d.features.Store(acked)
	if h, _ := hdrLayout(acked); h == netHdrLen {
		d.modernHdr.Store(false)
	}
}

// layout returns the header layout rings use now.
func (d *netDev) layout() (hdrLen int, mrg bool) {
	hdrLen, mrg = hdrLayout(d.features.Load())
	if hdrLen == netHdrLegacyLen && d.modernHdr.Load() {
		return netHdrLen, true
	}
	return hdrLen, mrg
}

// hdrLen and mrg derive the header layout from the acked features.
func hdrLayout(acked uint64) (hdrLen int, mrg bool) {
	mrg = acked&netFMrgRxbuf != 0
	if mrg || acked&vhostuser.FeatureVersion1 != 0 {
		return netHdrLen, mrg
	}
	return netHdrLegacyLen, mrg
}

// RunQueue runs the ring's owning goroutine: RX for even, TX for odd rings.
func (d *netDev) RunQueue(q *vhostuser.Queue) {
	pair := q.Index() / 2
	if q.Index()%2 == 0 {
		d.nic.runRX(q, pair)
	} else {
		d.nic.runTX(q)
	}
}
