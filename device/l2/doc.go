// Package l2 is the Ethernet vocabulary the NIC's Ethernet function, the
// daemon's switch and its fabric port share: a byte view of a frame, the
// sinks frames are delivered to (Sink, and PatientSink for a sender that
// can be held back), the control channel's EtherType and the flow hash
// that spreads frames over queue pairs. It imports nothing of the module.
package l2
