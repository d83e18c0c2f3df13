package wire

// falconnic's use of two reserved RBTH fields [R §5.1] for what the RDMA
// layer must carry but Falcon's RBTH has no field for:
//
//   - W1 bits 24:31 (reserved) carry the responder's IB syndrome on a
//     complete-in-error Pull Data (CE set, zero data), since a Pull Data has
//     no NACK to put the ULP code in: 0x60+ sequence/invalid request, 0x62
//     remote access, 0x63 remote operation (the codes Isekai uses in the
//     NACK's ULP code field, digest §9.2).
//   - W0 bits 13:15 (reserved) carry the requester QP's RNR retry count
//     (0-7, 7 = infinite) on SEND and WRITE-with-immediate packets, so the
//     responder, which counts the RNR NACKs it sends, knows when to give up
//     with a complete-in-error RNR NACK.
//
// Senders that do not use them leave them zero; ParseRDMA ignores them.

// IB syndromes carried in CIE NACKs (the NACK's ULP code) and in a CE Pull
// Data's Syndrome field.
const (
	SyndromeRNR          uint8 = 0x20 // 32: receiver not ready (retries exhausted)
	SyndromePSNSeqErr    uint8 = 0x60 // 96
	SyndromeInvalidReq   uint8 = 0x61 // 97
	SyndromeRemoteAccess uint8 = 0x62 // 98
	SyndromeRemoteOp     uint8 = 0x63 // 99
)

// Syndrome returns W1 bits 24:31 (see above).
func (h RBTH) Syndrome() uint8 { return h[7] }

// SetSyndrome sets W1 bits 24:31.
func (h RBTH) SetSyndrome(s uint8) { h[7] = s }

// RNRRetry returns W0 bits 13:15 (see above).
func (h RBTH) RNRRetry() uint8 { return h[1] & 7 }

// SetRNRRetry sets W0 bits 13:15 (low 3 bits of n).
func (h RBTH) SetRNRRetry(n uint8) { h[1] = h[1]&^7 | n&7 }
