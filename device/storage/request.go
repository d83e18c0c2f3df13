package storage

import (
	"encoding/binary"
	"errors"

	"falconnic/vhostuser"
)

// virtio-blk request types and statuses (virtio 1.2 §5.2.6).
const (
	blkTypeIn          = 0
	blkTypeOut         = 1
	blkTypeFlush       = 4
	blkTypeGetID       = 8
	blkTypeDiscard     = 11
	blkTypeWriteZeroes = 13

	blkStatusOK     = 0
	blkStatusIOErr  = 1
	blkStatusUnsupp = 2

	blkHeaderLen  = 16 // type u32, reserved u32, sector u64
	blkSegmentLen = 16 // discard/write-zeroes: sector u64, num_sectors u32, flags u32
	blkIDLen      = 20
	blkSector     = 512
	blkMaxSegs    = 64 // discard / write-zeroes segments per request
)

// blkRequest is a decoded virtio-blk request: views into the chain's
// buffers (guest memory), valid while the chain is.
type blkRequest struct {
	typ    uint32
	sector uint64
	out    [][]byte // device-readable data after the header
	outLen int
	in     [][]byte // device-writable data before the status byte
	inLen  int
	status []byte // the status byte
}

// blkSegment is one discard / write-zeroes range.
type blkSegment struct {
	sector  uint64
	sectors uint32
	unmap   bool
}

// Request decoding errors (each has its own counter).
var (
	errBlkShortHeader = errors.New("blk: request header shorter than 16 bytes")
	errBlkNoStatus    = errors.New("blk: no device-writable status byte")
	errBlkLayout      = errors.New("blk: readable buffer after a writable one")
)

// parseBlkRequest decodes a descriptor chain as [header][data][status]
// whatever the buffer boundaries (VERSION_1 implies any layout). It
// reuses r's slices.
func parseBlkRequest(bufs []vhostuser.Buf, r *blkRequest) error {
	r.out, r.in = r.out[:0], r.in[:0]
	r.outLen, r.inLen, r.status = 0, 0, nil
	var hdr [blkHeaderLen]byte
	got := 0
	seenW := false
	for _, b := range bufs {
		d := b.Data
		if b.Write {
			seenW = true
			if len(d) > 0 {
				r.in = append(r.in, d)
				r.inLen += len(d)
			}
			continue
		}
		if seenW {
			return errBlkLayout
		}
		if got < blkHeaderLen {
			n := copy(hdr[got:], d)
			got += n
			d = d[n:]
		}
		if len(d) > 0 {
			r.out = append(r.out, d)
			r.outLen += len(d)
		}
	}
	if got < blkHeaderLen {
		return errBlkShortHeader
	}
	if r.inLen == 0 {
		return errBlkNoStatus
	}
	last := r.in[len(r.in)-1]
	r.status = last[len(last)-1:]
	if len(last) == 1 {
		r.in = r.in[:len(r.in)-1]
	} else {
		r.in[len(r.in)-1] = last[:len(last)-1]
	}
	r.inLen--
	r.typ = binary.LittleEndian.Uint32(hdr[0:])
	r.sector = binary.LittleEndian.Uint64(hdr[8:])
	return nil
}

// segments decodes the discard / write-zeroes ranges of r's data into
// segs; ok is false for a malformed list.
func (r *blkRequest) segments(segs []blkSegment) ([]blkSegment, bool) {
	segs = segs[:0]
	if r.outLen == 0 || r.outLen%blkSegmentLen != 0 || r.outLen/blkSegmentLen > blkMaxSegs {
		return segs, false
	}
	var raw [blkSegmentLen]byte
	for off := 0; off < r.outLen; off += blkSegmentLen {
		gather(raw[:], r.out, off)
		s := blkSegment{sector: binary.LittleEndian.Uint64(raw[0:]), sectors: binary.LittleEndian.Uint32(raw[8:]),
			unmap: binary.LittleEndian.Uint32(raw[12:])&1 != 0}
		if binary.LittleEndian.Uint32(raw[12:])&^1 != 0 || s.sectors == 0 {
			return segs, false
		}
		segs = append(segs, s)
	}
	return segs, true
}

// gather copies len(dst) bytes of the scatter list starting at off.
func gather(dst []byte, src [][]byte, off int) {
	for _, s := range src {
		if len(dst) == 0 {
			return
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(dst, s[off:])
		dst = dst[n:]
		off = 0
	}
}

// slice appends to dst the pieces of the scatter list src covering bytes
// [off, off+n).
func slice(dst, src [][]byte, off, n int) [][]byte {
	for _, s := range src {
		if n == 0 {
			break
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		k := min(n, len(s)-off)
		dst = append(dst, s[off:off+k])
		n -= k
		off = 0
	}
	return dst
}
