package pdl

import "math/bits"

// Bits is a 128-bit window bitmap; bit n stands for PSN base+n.
type Bits [2]uint64

// Test reports bit n.
func (b *Bits) Test(n uint32) bool { return n < 128 && b[n>>6]&(1<<(n&63)) != 0 }

// Set sets bit n.
func (b *Bits) Set(n uint32) {
	if n < 128 {
		b[n>>6] |= 1 << (n & 63)
	}
}

// Clear clears bit n.
func (b *Bits) Clear(n uint32) {
	if n < 128 {
		b[n>>6] &^= 1 << (n & 63)
	}
}

// Zero reports whether no bit is set.
func (b *Bits) Zero() bool { return b[0]|b[1] == 0 }

// TrailingOnes returns the length of the run of set bits starting at bit 0.
func (b *Bits) TrailingOnes() uint32 {
	n := uint32(bits.TrailingZeros64(^b[0]))
	if n < 64 {
		return n
	}
	return 64 + uint32(bits.TrailingZeros64(^b[1]))
}

// ShiftDown drops the n lowest bits (the window base advanced by n).
func (b *Bits) ShiftDown(n uint32) {
	switch {
	case n == 0:
	case n >= 128:
		b[0], b[1] = 0, 0
	case n >= 64:
		b[0], b[1] = b[1]>>(n-64), 0
	default:
		b[0] = b[0]>>n | b[1]<<(64-n)
		b[1] >>= n
	}
}

// Contiguous reports whether the set bits form one run starting at bit 0
// (no hole), the BACK-vs-EACK test for the data-rx bitmap [S §9.1.6].
func (b *Bits) Contiguous() bool {
	n := b.TrailingOnes()
	c := *b
	c.ShiftDown(n)
	return c.Zero()
}

// Highest returns the index of the highest set bit, or -1.
func (b *Bits) Highest() int {
	if b[1] != 0 {
		return 127 - bits.LeadingZeros64(b[1])
	}
	if b[0] != 0 {
		return 63 - bits.LeadingZeros64(b[0])
	}
	return -1
}

// Count returns the number of set bits.
func (b *Bits) Count() int { return bits.OnesCount64(b[0]) + bits.OnesCount64(b[1]) }
