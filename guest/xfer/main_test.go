package main

import (
	"bytes"
	"io"
	"testing"
)

// The pattern must not depend on how it is read: the sender and the
// expected checksum rely on it.
func TestPatternIsTheSameWhateverTheReadSizes(t *testing.T) {
	var whole bytes.Buffer
	io.CopyN(&whole, &pattern{}, 1000)
	var pieces bytes.Buffer
	p := &pattern{}
	for _, n := range []int{1, 3, 7, 8, 9, 100, 872} {
		buf := make([]byte, n)
		if k, err := p.Read(buf); k != n || err != nil {
			t.Fatalf("Read(%d) = %d, %v", n, k, err)
		}
		pieces.Write(buf)
	}
	if !bytes.Equal(whole.Bytes(), pieces.Bytes()) {
		t.Fatal("pattern differs with read sizes")
	}
	if bytes.Count(whole.Bytes(), []byte{0}) > 50 {
		t.Fatal("pattern looks degenerate")
	}
}
