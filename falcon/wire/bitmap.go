package wire

import "math/bits"

// MaxBitmapBits is the largest Bitmap: Isekai's 1024-entry TX window.
const MaxBitmapBits = 1024

// Bitmap sizes carried on the wire by an EACK [S §7.7.2].
const (
	DataBitmapBits = 128 // data-ack and data-rx bitmaps, RX data window
	ReqBitmapBits  = 64  // request bitmap, RX request window
)

// Bitmap is a fixed-capacity window of bits: bit i stands for PSN base+i.
// It is a value type (copying it copies the bits) and never allocates. Bits
// at or above Size are always zero. Out-of-range indices are ignored by the
// setters and read as false.
type Bitmap struct {
	size int
	w    [MaxBitmapBits / 64]uint64
}

// NewBitmap returns an all-clear bitmap of size bits, clamped to
// [0, MaxBitmapBits].
func NewBitmap(size int) Bitmap {
	return Bitmap{size: min(max(size, 0), MaxBitmapBits)}
}

// Size returns the number of bits in the window.
func (b Bitmap) Size() int { return b.size }

// Set sets bit i.
func (b *Bitmap) Set(i int) {
	if uint(i) < uint(b.size) {
		b.w[i>>6] |= 1 << (i & 63)
	}
}

// Clear clears bit i.
func (b *Bitmap) Clear(i int) {
	if uint(i) < uint(b.size) {
		b.w[i>>6] &^= 1 << (i & 63)
	}
}

// Test reports whether bit i is set.
func (b *Bitmap) Test(i int) bool {
	return uint(i) < uint(b.size) && b.w[i>>6]&(1<<(i&63)) != 0
}

// words returns the number of 64-bit words in use.
func (b *Bitmap) words() int { return (b.size + 63) >> 6 }

// ShiftDown advances the window by n: the n lowest bits are dropped, bit n
// becomes bit 0 and zeros enter at the top. n ≥ Size clears the bitmap; n ≤ 0
// does nothing.
func (b *Bitmap) ShiftDown(n int) {
	if n <= 0 {
		return
	}
	if n >= b.size {
		b.Reset()
		return
	}
	nw := b.words()
	ws, bs := n>>6, uint(n&63)
	for i := 0; i < nw; i++ {
		var v uint64
		if j := i + ws; j < nw {
			v = b.w[j] >> bs
			if bs != 0 && j+1 < nw {
				v |= b.w[j+1] << (64 - bs)
			}
		}
		b.w[i] = v
	}
}

// TrailingOnes returns the number of consecutive set bits starting at bit 0:
// how far a window base can advance.
func (b *Bitmap) TrailingOnes() int {
	n := 0
	for i := 0; i < b.words(); i++ {
		t := bits.TrailingZeros64(^b.w[i])
		n += t
		if t < 64 {
			break
		}
	}
	return min(n, b.size)
}

// Count returns the number of set bits.
func (b *Bitmap) Count() int {
	n := 0
	for i := 0; i < b.words(); i++ {
		n += bits.OnesCount64(b.w[i])
	}
	return n
}

// Reset clears every bit, keeping the size.
func (b *Bitmap) Reset() { b.w = [MaxBitmapBits / 64]uint64{} }

// IsZero reports whether no bit is set.
func (b *Bitmap) IsZero() bool {
	for i := 0; i < b.words(); i++ {
		if b.w[i] != 0 {
			return false
		}
	}
	return true
}

// Highest returns the index of the highest set bit, or -1 if none is set.
func (b *Bitmap) Highest() int {
	for i := b.words() - 1; i >= 0; i-- {
		if b.w[i] != 0 {
			return i*64 + 63 - bits.LeadingZeros64(b.w[i])
		}
	}
	return -1
}

// HasHole reports whether the set bits are not one contiguous run starting
// at bit 0 (the EACK trigger for the data-rx bitmap [S §9.1.6]).
func (b *Bitmap) HasHole() bool { return b.Count() != b.TrailingOnes() }

// Or sets every bit that is set in o (bits of o beyond b's size are ignored).
func (b *Bitmap) Or(o *Bitmap) {
	nw := min(b.words(), o.words())
	for i := 0; i < nw; i++ {
		b.w[i] |= o.w[i]
	}
	b.trim()
}

// trim clears bits at or above size.
func (b *Bitmap) trim() {
	nw := b.words()
	if r := b.size & 63; r != 0 {
		b.w[nw-1] &= 1<<r - 1
	}
	for i := nw; i < len(b.w); i++ {
		b.w[i] = 0
	}
}

// String renders the bitmap as bits from the highest index down to bit 0,
// the way the spec draws them (e.g. "0111" has bits 0-2 set).
func (b *Bitmap) String() string {
	s := make([]byte, b.size)
	for i := 0; i < b.size; i++ {
		s[b.size-1-i] = '0' + boolBit(b.Test(i))
	}
	return string(s)
}

// getWire loads an n-bit wire bitmap (n a multiple of 64) that is stored as
// one big-endian integer — the first word holds bits n-1..n-32, the last
// word bits 31..0 — into dst, resized to n bits.
func getWire(dst *Bitmap, src []byte, n int) {
	*dst = NewBitmap(n)
	nw := n / 64
	if len(src) < nw*8 {
		return // not an EACK: no bitmap, all clear
	}
	for k := 0; k < nw; k++ {
		dst.w[k] = be.Uint64(src[(nw-1-k)*8:])
	}
}

// putWire stores the low n bits of src into an n-bit wire bitmap (bit 0 is
// the least significant bit of the last byte). Bits beyond src's size are 0.
func putWire(dst []byte, src *Bitmap, n int) {
	nw := n / 64
	if len(dst) < nw*8 {
		return
	}
	for k := 0; k < nw; k++ {
		be.PutUint64(dst[(nw-1-k)*8:], src.w[k])
	}
}
