package wire

import "strconv"

// PSN is a 32-bit packet sequence number of one sliding window (request or
// data) [S §7.2, §9]. All arithmetic is modulo 2^32 and every comparison is a
// serial-number comparison (signed 32-bit distance), so the order holds across
// the wrap as long as the two numbers are less than 2^31 apart.
type PSN uint32

// Add returns p+n modulo 2^32.
func (p PSN) Add(n uint32) PSN { return p + PSN(n) }

// Sub returns the serial-number distance p−b as a signed 32-bit value:
// positive when p is after b, negative when it is before.
func (p PSN) Sub(b PSN) int32 { return int32(uint32(p) - uint32(b)) }

// Less reports whether p comes strictly before b in serial order.
func (p PSN) Less(b PSN) bool { return p.Sub(b) < 0 }

// LessEq reports whether p comes before b or equals it.
func (p PSN) LessEq(b PSN) bool { return p.Sub(b) <= 0 }

// String returns the PSN in decimal.
func (p PSN) String() string { return strconv.FormatUint(uint64(p), 10) }

// RSN is a 32-bit request sequence number: the transaction id assigned by the
// initiator's transaction layer, modulo 2^32 [S §6.3]. Comparisons are
// serial-number comparisons like PSN's.
type RSN uint32

// Add returns r+n modulo 2^32.
func (r RSN) Add(n uint32) RSN { return r + RSN(n) }

// Sub returns the serial-number distance r−b as a signed 32-bit value.
func (r RSN) Sub(b RSN) int32 { return int32(uint32(r) - uint32(b)) }

// Less reports whether r comes strictly before b in serial order.
func (r RSN) Less(b RSN) bool { return r.Sub(b) < 0 }

// LessEq reports whether r comes before b or equals it.
func (r RSN) LessEq(b RSN) bool { return r.Sub(b) <= 0 }

// String returns the RSN in decimal.
func (r RSN) String() string { return strconv.FormatUint(uint64(r), 10) }
