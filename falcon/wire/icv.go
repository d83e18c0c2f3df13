package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// ICVLen is the length of the integrity check value SealICV appends.
const ICVLen = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SealICV appends a 4-byte CRC32C (big-endian) of b to b and returns the
// extended slice. It is falconnic's stand-in for the PSP trailer's ICV [S
// §7.1]: Rev 0.9 relies on PSP to authenticate every Falcon packet and drop
// corrupted ones before the PDL sees them, and we do not emulate PSP, so the
// link carries this checksum instead. It catches corruption, not forgery.
// SealICV does not allocate when b has ICVLen bytes of spare capacity.
func SealICV(b []byte) []byte {
	sum := crc32.Checksum(b, castagnoli)
	return binary.BigEndian.AppendUint32(b, sum)
}

// OpenICV verifies the trailing ICV of b and returns b without it. It
// reports false (and nil) when b is shorter than ICVLen or the check fails;
// receivers drop such packets silently [S §9.2.2.1].
func OpenICV(b []byte) ([]byte, bool) {
	if len(b) < ICVLen {
		return nil, false
	}
	n := len(b) - ICVLen
	if crc32.Checksum(b[:n], castagnoli) != binary.BigEndian.Uint32(b[n:]) {
		return nil, false
	}
	return b[:n], true
}
