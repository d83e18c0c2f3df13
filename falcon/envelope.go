package falcon

import (
	"encoding/binary"

	"falconnic/falcon/wire"
)

// The envelope stands in for PSP [S §7.1]: a Falcon packet is followed by a
// 4-byte IV timestamp (PSP's IV carries T1/T3, the transmit time in Falcon
// units, which the replay check and the delay measurements use) and the
// 4-byte ICV (wire.SealICV, CRC32C over packet and IV).
//
//	| Falcon header | payload | IV timestamp (4) | ICV (4) |
const (
	ivLen       = 4
	envelopeLen = ivLen + wire.ICVLen
)

// EnvelopeLen is the length of the envelope after the packet in a frame:
// a link that wants a payload placed (aligned) finds its end here.
const EnvelopeLen = envelopeLen

// seal appends the IV timestamp and ICV to pkt in its spare capacity and
// returns the frame; pkt's own length is unchanged.
func seal(pkt []byte, iv wire.Timestamp) []byte {
	b := binary.BigEndian.AppendUint32(pkt, uint32(iv))
	return wire.SealICV(b)
}

// sealInProcess is seal for a link that never leaves the process
// (InProcessLink): the frame keeps its layout but the ICV field is zero,
// not computed — there is no wire to corrupt it and no PSP to emulate.
func sealInProcess(pkt []byte, iv wire.Timestamp) []byte {
	b := binary.BigEndian.AppendUint32(pkt, uint32(iv))
	return binary.BigEndian.AppendUint32(b, 0)
}

// Restamp sets the IV timestamp of a frame the endpoint handed to an
// InProcessLink (whose ICV is not computed, so nothing else changes). A
// link that holds frames before they leave — a port link's outbox, which
// hands a burst over at its end — stamps them with the time they do, as a
// NIC stamps a packet when it goes on the wire: the peer echoes the IV as
// the packet's t1, so time spent waiting in the sender counts as the
// sender's, not as fabric delay. A frame shorter than the envelope is
// left alone.
func Restamp(frame []byte, iv wire.Timestamp) {
	if n := len(frame) - envelopeLen; n >= 0 {
		binary.BigEndian.PutUint32(frame[n:], uint32(iv))
	}
}

// SplitEnvelope returns the packet and the IV timestamp of a frame the
// endpoint handed to a SealingLink (or an InProcessLink); false if the
// frame is shorter than the envelope. The ICV is neither checked nor
// returned.
func SplitEnvelope(frame []byte) (pkt []byte, iv wire.Timestamp, ok bool) {
	return openInProcess(frame)
}

// Envelope appends the envelope (iv, a zero ICV) to pkt in its spare
// capacity, where there is room (a packet PSP opened in place has its
// 16-byte tag behind it), and returns the frame for ReceiveAuthenticated.
func Envelope(pkt []byte, iv wire.Timestamp) []byte { return sealInProcess(pkt, iv) }

// openInProcess splits a frame from an InProcessLink: no ICV check.
func openInProcess(frame []byte) (pkt []byte, iv wire.Timestamp, ok bool) {
	if len(frame) < envelopeLen {
		return nil, 0, false
	}
	n := len(frame) - envelopeLen
	return frame[:n], wire.Timestamp(binary.BigEndian.Uint32(frame[n:])), true
}

// open checks a frame's ICV and splits off the IV timestamp.
func open(frame []byte) (pkt []byte, iv wire.Timestamp, ok bool) {
	b, ok := wire.OpenICV(frame)
	if !ok || len(b) < ivLen {
		return nil, 0, false
	}
	n := len(b) - ivLen
	return b[:n], wire.Timestamp(binary.BigEndian.Uint32(b[n:])), true
}
