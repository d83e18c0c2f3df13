package storage

import (
	"bytes"
	"encoding/binary"
	"testing"

	"falconnic/vhostuser"
)

func blkHeader(typ uint32, sector uint64) []byte {
	h := make([]byte, 16)
	binary.LittleEndian.PutUint32(h, typ)
	binary.LittleEndian.PutUint64(h[8:], sector)
	return h
}

func TestParseBlkRequestAnyLayout(t *testing.T) {
	// Header split over two buffers and fused with data; status fused with
	// the last data buffer.
	hdr := blkHeader(blkTypeOut, 42)
	data := bytes.Repeat([]byte{7}, 1024)
	in := make([]byte, 513)
	bufs := []vhostuser.Buf{{Data: hdr[:5]}, {Data: append(append([]byte{}, hdr[5:]...), data[:100]...)},
		{Data: data[100:]}, {Data: in, Write: true}}
	var r blkRequest
	if err := parseBlkRequest(bufs, &r); err != nil {
		t.Fatal(err)
	}
	if r.typ != blkTypeOut || r.sector != 42 || r.outLen != 1024 || r.inLen != 512 || &r.status[0] != &in[512] {
		t.Fatalf("decoded %+v", r)
	}
	got := make([]byte, 1024)
	gather(got, r.out, 0)
	if !bytes.Equal(got, data) {
		t.Fatal("data pieces wrong")
	}
}

func TestParseBlkRequestRefusals(t *testing.T) {
	st := []byte{0}
	cases := []struct {
		name string
		bufs []vhostuser.Buf
		want error
	}{
		{"short header", []vhostuser.Buf{{Data: make([]byte, 15)}, {Data: st, Write: true}}, errBlkShortHeader},
		{"no status", []vhostuser.Buf{{Data: blkHeader(0, 0)}}, errBlkNoStatus},
		{"empty writable", []vhostuser.Buf{{Data: blkHeader(0, 0)}, {Data: nil, Write: true}}, errBlkNoStatus},
		{"readable after writable", []vhostuser.Buf{{Data: blkHeader(0, 0)}, {Data: st, Write: true}, {Data: st}}, errBlkLayout},
	}
	for _, c := range cases {
		var r blkRequest
		if err := parseBlkRequest(c.bufs, &r); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestBlkSegments(t *testing.T) {
	seg := func(sector uint64, n, flags uint32) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint64(b, sector)
		binary.LittleEndian.PutUint32(b[8:], n)
		binary.LittleEndian.PutUint32(b[12:], flags)
		return b
	}
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"one", seg(8, 16, 1), true},
		{"two", append(seg(8, 16, 0), seg(100, 1, 0)...), true},
		{"zero sectors", seg(8, 0, 0), false},
		{"unknown flag", seg(8, 1, 2), false},
		{"ragged", seg(8, 1, 0)[:15], false},
		{"none", nil, false},
	} {
		r := blkRequest{out: [][]byte{c.data}, outLen: len(c.data)}
		segs, ok := r.segments(nil)
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v (%+v)", c.name, ok, c.ok, segs)
		}
	}
}

// FuzzBlkRequest: any chain decodes without panic; the views it returns
// lie inside the chain's writable / readable buffers and add up.
func FuzzBlkRequest(f *testing.F) {
	f.Add(blkHeader(blkTypeIn, 0), []byte{16, 0, 1, 0}, uint16(512), uint8(2))
	f.Add(blkHeader(blkTypeDiscard, 8), []byte{5, 27}, uint16(17), uint8(1))
	f.Add([]byte{1, 2, 3}, []byte{1}, uint16(1), uint8(0))
	f.Fuzz(func(t *testing.T, head []byte, cuts []byte, inLen uint16, nIn uint8) {
		var bufs []vhostuser.Buf
		rest := head
		for _, c := range cuts {
			k := min(int(c), len(rest))
			bufs = append(bufs, vhostuser.Buf{Data: rest[:k]})
			rest = rest[k:]
		}
		bufs = append(bufs, vhostuser.Buf{Data: rest})
		totalIn := 0
		for i := 0; i < int(nIn%4); i++ {
			n := int(inLen) >> i
			bufs = append(bufs, vhostuser.Buf{Data: make([]byte, n), Write: true})
			totalIn += n
		}
		var r blkRequest
		if err := parseBlkRequest(bufs, &r); err != nil {
			return
		}
		if r.inLen+1 != totalIn || len(r.status) != 1 || r.outLen+blkHeaderLen != len(head) {
			t.Fatalf("lengths in %d/%d out %d/%d", r.inLen, totalIn, r.outLen, len(head))
		}
		n := 0
		for _, d := range r.in {
			n += len(d)
		}
		if n != r.inLen {
			t.Fatal("in pieces do not add up")
		}
		segs, ok := r.segments(nil)
		if ok && len(segs) != r.outLen/blkSegmentLen {
			t.Fatal("segment count")
		}
	})
}
