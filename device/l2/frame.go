package l2

import (
	"bytes"
	"encoding/binary"
	"net"
)

// Sink accepts Ethernet frames. Deliver must copy frame if it keeps it
// and must not block for long.
type Sink interface{ Deliver(frame []byte) }

// A PatientSink can hold a sender back instead of dropping: DeliverPatient
// may wait, bounded, for room at the destination. A local NIC's TX path
// uses it, so a busy receiving guest slows its local senders down (their
// TX rings fill and their stacks back off, as over QEMU's own net queues)
// instead of making TCP retransmit. Paths that serve many senders (the
// fabric's receiver, flooding) never wait.
type PatientSink interface {
	Sink
	DeliverPatient(frame []byte)
}

// Ethernet constants (IEEE 802.3 §3.1.1).
const (
	// HeaderLen is destination MAC, source MAC and EtherType.
	HeaderLen = 14
	// EtherTypeControl is the NIC control channel's EtherType (IEEE 802 local
	// experimental, ARCHITECTURE.md §3.2). Such frames are consumed by the NIC
	// they are addressed to and must never cross the switch or the fabric.
	EtherTypeControl = 0x88B5
	// MaxFrameLen bounds a frame without offloads: the largest MTU a
	// virtio-net guest may set without VIRTIO_NET_F_MTU (65535) plus the header.
	MaxFrameLen = 65535 + HeaderLen
)

// Frame is a byte view of an Ethernet frame.
type Frame []byte

// Dst returns the destination MAC.
func (f Frame) Dst() net.HardwareAddr { return net.HardwareAddr(f[0:6]) }

// Src returns the source MAC.
func (f Frame) Src() net.HardwareAddr { return net.HardwareAddr(f[6:12]) }

// EtherType returns the EtherType (no VLAN parsing).
func (f Frame) EtherType() uint16 { return binary.BigEndian.Uint16(f[12:14]) }

// IsControl reports whether f is a control-channel frame for mac.
func IsControl(f []byte, mac net.HardwareAddr) bool {
	return len(f) >= HeaderLen && binary.BigEndian.Uint16(f[12:14]) == EtherTypeControl && bytes.Equal(f[0:6], mac)
}

// FlowHash spreads frames over queue pairs: MACs, EtherType and, for IPv4,
// the addresses and (TCP/UDP) ports, so one flow stays on one pair.
func FlowHash(f []byte) uint32 {
	h := uint32(2166136261)
	mix := func(b []byte) {
		for _, c := range b {
			h ^= uint32(c)
			h *= 16777619
		}
	}
	mix(f[:HeaderLen])
	if binary.BigEndian.Uint16(f[12:14]) == 0x0800 && len(f) >= HeaderLen+20 {
		ip := f[HeaderLen:]
		mix(ip[12:20])
		ihl := int(ip[0]&0xf) * 4
		if (ip[9] == 6 || ip[9] == 17) && ihl >= 20 && len(ip) >= ihl+4 {
			mix(ip[ihl : ihl+4])
		}
	}
	return h
}
