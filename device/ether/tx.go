package ether

import (
	"falconnic/device/l2"
	"falconnic/vhostuser"
)

// txBatch bounds the chains returned between two notifications.
const txBatch = 256

// runTX owns TX ring q: it pops the guest's chains, strips the
// virtio_net_hdr and hands each frame to the uplink (or to the control
// hook), then returns the chains with one used-idx store per batch.
func (n *NIC) runTX(q *vhostuser.Queue) {
	var c vhostuser.Chain
	scratch := make([]byte, netHdrLen+l2.MaxFrameLen) // per ring start, not per frame
	hdrLen, _ := n.dev.layout()
	for {
		select {
		case <-q.Done():
			return
		case <-q.Wake():
		}
		for i := 1; q.Pop(&c); i++ {
			if hdrLen == netHdrLegacyLen && len(c.Bufs) > 0 && len(c.Bufs[0].Data) != netHdrLegacyLen && c.WriteLen == 0 {
				// Legacy Linux puts the header alone in the first
				// descriptor; this guest does not: it is modern.
				n.dev.modernHdr.Store(true)
				n.counters.HdrFixups.Inc()
				hdrLen = netHdrLen
			}
			n.txChain(&c, hdrLen, scratch)
			// The frame was delivered (copied) before the buffer goes back.
			q.Fill(c.Head, 0)
			if i%txBatch == 0 {
				// A guest that never stops sending must not delay a stop.
				q.Flush()
				q.Notify()
				select {
				case <-q.Done():
					return
				default:
				}
			}
		}
		q.Flush()
		q.Notify()
	}
}

// txChain sends one TX chain. Frames sit in one descriptor with VERSION_1
// and in two (10 B header + frame) in legacy mode (virtio 1.2, "Legacy
// Interface: Message Framing"); any layout
// is gathered.
func (n *NIC) txChain(c *vhostuser.Chain, hdrLen int, scratch []byte) {
	if c.WriteLen != 0 {
		n.counters.TxChainWritable.Inc()
		return
	}
	total := int(c.ReadLen)
	if total < hdrLen+l2.HeaderLen {
		n.counters.TxRunt.Inc()
		return
	}
	if total > hdrLen+l2.MaxFrameLen {
		n.counters.TxTooBig.Inc()
		return
	}
	// Copy before check [issue 18, finding 4]: the frame is gathered out
	// of guest memory first, one descriptor or many, so the guest cannot
	// change the bytes the NIC and the switch checked (source MAC,
	// EtherType) before they reach a neighbour.
	k := 0
	for _, b := range c.Bufs {
		k += copy(scratch[k:], b.Data)
	}
	frame := scratch[hdrLen:total]
	if l2.IsControl(frame, n.cfg.MAC) {
		n.counters.ControlFrames.Inc()
		if h := n.control.Load(); h != nil {
			(*h)(frame)
		} else {
			n.counters.ControlNoHook.Inc()
		}
		return
	}
	up := n.uplink.Load()
	if up == nil {
		n.counters.TxNoUplink.Inc()
		return
	}
	if up.ps != nil {
		up.ps.DeliverPatient(frame)
	} else {
		up.s.Deliver(frame)
	}
	n.counters.TxFrames.Inc()
	n.counters.TxBytes.Add(uint64(len(frame)))
}
