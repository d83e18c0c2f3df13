package wire

import "time"

// Timestamp is a 32-bit Falcon time value in units of 131.072 ns (2^17 ps)
// [S §7.7, §10.1]: t1/t2 in ACKs and NACKs, and the PSP IV timestamps T1/T3.
// It wraps every 2^32 units ≈ 562.95 s; differences are wrap-safe.
type Timestamp uint32

// TimestampUnit is the duration of one Timestamp tick rounded to the
// nanosecond; exact conversions use 131.072 ns = 16384/125 ns.
const TimestampUnit = 131 * time.Nanosecond

// TimestampAt converts a clock reading to a Timestamp (truncating to the
// tick below, modulo 2^32).
func TimestampAt(t time.Duration) Timestamp {
	ns := int64(t)
	q, r := ns/16384, ns%16384
	return Timestamp(uint64(q*125 + r*125/16384))
}

// Sub returns the wrap-safe elapsed time t−u, taken as the signed 32-bit tick
// distance (so |t−u| must be under ≈ 281 s).
func (t Timestamp) Sub(u Timestamp) time.Duration {
	return ticksToDuration(int64(int32(uint32(t) - uint32(u))))
}

// Duration returns t as a duration since the (wrapping) timestamp epoch.
func (t Timestamp) Duration() time.Duration { return ticksToDuration(int64(t)) }

func ticksToDuration(ticks int64) time.Duration {
	return time.Duration(ticks * 16384 / 125)
}
