package litmus

import (
	"errors"
	"fmt"
	"io"
)

// scanChunk is how much of the RAM file one read takes.
const scanChunk = 1 << 20

// Scan returns the offset of the one page-aligned page in r's first size
// bytes whose header Init wrote for magic. No page is ErrNoPage; more than
// one (a copy, or a stale page of an earlier run with the same magic) is
// ErrTwoPages: the host must not guess which one the guest plays on.
func Scan(r io.ReaderAt, size int64, magic uint64) (int64, error) {
	if size <= 0 {
		return -1, ErrNoPage
	}
	buf := make([]byte, min(scanChunk, size))
	found, n := int64(-1), 0
	for base := int64(0); base < size; base += scanChunk {
		want := min(int64(scanChunk), size-base)
		got, err := r.ReadAt(buf[:want], base)
		if err != nil && !errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("litmus: reading guest RAM at %#x: %w", base, err)
		}
		for off := 0; off+headerSize <= got; off += PageSize {
			if Matches(buf[off:], magic) {
				if n == 0 {
					found = base + int64(off)
				}
				n++
			}
		}
		if int64(got) < want {
			break // the file is shorter than size
		}
	}
	switch {
	case n == 0:
		return -1, ErrNoPage
	case n > 1:
		return -1, fmt.Errorf("%w: %d of them", ErrTwoPages, n)
	}
	return found, nil
}
