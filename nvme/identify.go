package nvme

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// IdentifyLen is the size of an Identify data structure.
const IdentifyLen = 4096

// NamespaceInfo is what Identify Namespace (CNS 0) tells the host.
type NamespaceInfo struct {
	Blocks    uint64 // NSZE = NCAP
	BlockSize int    // from LBA format 0's LBADS
	ReadOnly  bool   // NSATTR bit 0 (write protected)
	Discard   bool   // NSFEAT bit 0 (thin provisioning: deallocate is meaningful)
}

// Identify errors.
var ErrIdentify = errors.New("nvme: malformed Identify Namespace data")

// Identify Namespace offsets [NVM Command Set 1.0 Figure 97].
const (
	idNSZE   = 0
	idNCAP   = 8
	idNUSE   = 16
	idNSFEAT = 24
	idNLBAF  = 25
	idFLBAS  = 26
	idNSATTR = 99
	idLBAF0  = 128 // LBA format 0: MS 16 | LBADS 8 | RP 2
)

// AppendIdentify appends the Identify Namespace structure for ns to b.
func (ns NamespaceInfo) AppendIdentify(b []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, IdentifyLen)...)
	d := b[start:]
	binary.LittleEndian.PutUint64(d[idNSZE:], ns.Blocks)
	binary.LittleEndian.PutUint64(d[idNCAP:], ns.Blocks)
	binary.LittleEndian.PutUint64(d[idNUSE:], ns.Blocks)
	if ns.Discard {
		d[idNSFEAT] = 1
	}
	d[idNLBAF] = 0 // one format (0-based)
	d[idFLBAS] = 0
	if ns.ReadOnly {
		d[idNSATTR] = 1
	}
	d[idLBAF0+2] = uint8(bits.TrailingZeros(uint(ns.BlockSize)))
	return b
}

// ParseIdentify decodes an Identify Namespace structure (untrusted: it
// comes from the target over the network).
func ParseIdentify(d []byte) (NamespaceInfo, error) {
	if len(d) < IdentifyLen {
		return NamespaceInfo{}, ErrIdentify
	}
	flbas := d[idFLBAS] & 0x0f
	if flbas > d[idNLBAF] || flbas >= 16 {
		return NamespaceInfo{}, ErrIdentify
	}
	lbads := d[idLBAF0+4*int(flbas)+2]
	if lbads < 9 || lbads > 12 {
		return NamespaceInfo{}, ErrIdentify // 512 B .. 4 KiB blocks
	}
	ns := NamespaceInfo{Blocks: binary.LittleEndian.Uint64(d[idNSZE:]), BlockSize: 1 << lbads,
		ReadOnly: d[idNSATTR]&1 != 0, Discard: d[idNSFEAT]&1 != 0}
	if ns.Blocks == 0 || ns.Blocks > 1<<48 {
		return NamespaceInfo{}, ErrIdentify
	}
	return ns, nil
}
