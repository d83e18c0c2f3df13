package litmus

import "unsafe"

// unsafeBytes views words as bytes: an 8-byte-aligned buffer.
func unsafeBytes(words []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
}
