// Package blktest is the block function's test peer: a guest virtio-blk
// driver over vhostusertest's driver queue and guest memory, which builds
// requests ([header][data...][status] in descriptor buffers), posts them,
// waits for their interrupts as a Linux guest does and reads their status
// and data. Tests of the disks and of the daemon use it; none needs QEMU.
package blktest

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

// virtio-blk request types and statuses (virtio 1.2 §5.2.6).
const (
	TypeIn          = 0
	TypeOut         = 1
	TypeFlush       = 4
	TypeGetID       = 8
	TypeDiscard     = 11
	TypeWriteZeroes = 13

	StatusOK     = 0
	StatusIOErr  = 1
	StatusUnsupp = 2
)

// virtio-blk feature bits (virtio 1.2 §5.2.3).
const (
	FeatureSizeMax     = 1 << 1
	FeatureSegMax      = 1 << 2
	FeatureRO          = 1 << 5
	FeatureBlkSize     = 1 << 6
	FeatureFlush       = 1 << 9
	FeatureTopology    = 1 << 10
	FeatureConfigWCE   = 1 << 11
	FeatureMQ          = 1 << 12
	FeatureDiscard     = 1 << 13
	FeatureWriteZeroes = 1 << 14
)

// LinuxFeatures is what Linux 6.1's virtio_blk acknowledges of what a disk offers.
const LinuxFeatures = vhostuser.FeatureVersion1 | vhostuser.FeatureProtocolFeatures | vhostuser.FeatureIndirectDesc |
	FeatureSizeMax | FeatureSegMax | FeatureBlkSize | FeatureFlush | FeatureTopology | FeatureConfigWCE | FeatureDiscard | FeatureWriteZeroes

// Driver is a guest's virtio-blk driver on one queue.
type Driver struct {
	T           testing.TB
	GM          *vhostusertest.GuestMemory
	Q           *vhostusertest.DriverQueue // the queue requests go to
	Consumed    uint16                     // used elements the driver popped
	NoInterrupt bool                       // the driver polls (SeaBIOS)
	// Describe, if set, adds the disk's state to failure messages.
	Describe func() string
}

func (d *Driver) describe() string {
	if d.Describe == nil {
		return ""
	}
	return "; " + d.Describe()
}

// Request is one request being built or in flight.
type Request struct {
	d         *Driver
	typ       uint32
	sector    uint64
	lens      []int
	in        bool
	out       []byte
	dataGPA   uint64
	statusGPA uint64
}

// Request returns a request of type typ at sector with data segments of
// lens bytes: device-writable when in, else filled from out.
func (d *Driver) Request(typ uint32, sector uint64, in bool, out []byte, lens ...int) *Request {
	return &Request{d: d, typ: typ, sector: sector, in: in, out: out, lens: lens}
}

// Post adds the request to the queue's avail ring (not published) and
// returns its head.
func (x *Request) Post() uint16 {
	q := x.d.Q
	i, ok := q.Peek()
	if !ok {
		x.d.T.Fatal("ring full")
	}
	base := q.BufGPAOf(i)
	buf := q.Buf(i)
	binary.LittleEndian.PutUint32(buf[0:], x.typ)
	binary.LittleEndian.PutUint64(buf[8:], x.sector)
	segs := []vhostusertest.Seg{{GPA: base, Len: 16}}
	off := uint64(64)
	for _, n := range x.lens {
		segs = append(segs, vhostusertest.Seg{GPA: base + off, Len: uint32(n), Write: x.in})
		off += uint64(n)
	}
	if x.out != nil {
		copy(buf[64:], x.out)
	}
	x.dataGPA = base + 64
	x.statusGPA = base + off
	buf[off] = 0xff
	segs = append(segs, vhostusertest.Seg{GPA: base + off, Len: 1, Write: true})
	head, err := q.Add(segs)
	if err != nil {
		x.d.T.Fatal(err)
	}
	return head
}

// Status returns the request's status byte (0xff until the device writes it).
func (x *Request) Status() byte { return x.d.GM.Bytes(x.statusGPA, 1)[0] }

// Data returns a copy of the first n bytes of the request's data.
func (x *Request) Data(n int) []byte {
	return append([]byte(nil), x.d.GM.Bytes(x.dataGPA, uint64(n))...)
}

// Run posts the requests together, kicks once and waits for all of them.
func (d *Driver) Run(reqs ...*Request) []vhostusertest.Used {
	d.T.Helper()
	for _, x := range reqs {
		x.Post()
	}
	d.Q.Publish()
	d.Q.Kick()
	d.WaitInterrupts(len(reqs))
	var used []vhostusertest.Used
	for range reqs {
		u, _ := d.Q.PopUsed()
		used = append(used, u)
	}
	d.Consumed += uint16(len(reqs))
	return used
}

// WaitInterrupts waits for n used elements the way a guest driver does:
// asleep until the device signals the call eventfd (unless the queue
// polls, like SeaBIOS). A completion without an interrupt fails the test.
func (d *Driver) WaitInterrupts(n int) {
	d.T.Helper()
	for int(uint16(d.Q.UsedIdx()-d.Consumed)) < n {
		if d.NoInterrupt {
			if !d.Q.WaitUsed(n, 10*time.Second) {
				d.T.Fatalf("%d requests not completed%s", n, d.describe())
			}
			return
		}
		fds := []unix.PollFd{{Fd: int32(d.Q.CallFD), Events: unix.POLLIN}}
		if k, _ := unix.Poll(fds, 10000); k == 0 {
			d.T.Fatalf("no interrupt for %d requests (used %d)%s", n, d.Q.UsedIdx(), d.describe())
		}
		d.Q.Calls()
	}
}
