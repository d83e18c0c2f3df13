package fabric

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func groControl(seg int) []byte {
	b := make([]byte, unix.CmsgSpace(4))
	binary.NativeEndian.PutUint64(b, uint64(unix.CmsgLen(4)))
	binary.NativeEndian.PutUint32(b[8:], unix.SOL_UDP)
	binary.NativeEndian.PutUint32(b[12:], unix.UDP_GRO)
	binary.NativeEndian.PutUint32(b[16:], uint32(seg))
	return b
}

func TestGROSegmentReadsTheControlMessage(t *testing.T) {
	if got := groSegment(groControl(1400)); got != 1400 {
		t.Errorf("segment %d, want 1400", got)
	}
	other := groControl(7)
	binary.NativeEndian.PutUint32(other[12:], unix.UDP_SEGMENT)
	for name, ctrl := range map[string][]byte{
		"none": nil, "short": groControl(9)[:10], "other type": other,
		"length past the buffer": append([]byte{0xff}, groControl(9)[1:]...),
	} {
		if got := groSegment(ctrl); got != 0 {
			t.Errorf("%s: segment %d, want 0", name, got)
		}
	}
	if got := groSegment(append(other, groControl(512)...)); got != 512 {
		t.Errorf("second message: segment %d, want 512", got)
	}
}

func TestSockaddrRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		ap string
		v6 bool
	}{{"127.0.0.1:4791", false}, {"127.0.0.1:4791", true}, {"[fd00::1]:9", true}} {
		ap := netip.MustParseAddrPort(tc.ap)
		var sa rawSockaddr
		n := putSockaddr(&sa, ap, tc.v6)
		got, ok := parseSockaddr(&sa, n)
		if !ok || got != ap {
			t.Errorf("%v (v6 %v): parsed %v %v", ap, tc.v6, got, ok)
		}
	}
	var sa rawSockaddr
	if n := putSockaddr(&sa, netip.MustParseAddrPort("[fd00::1]:9"), false); n != 0 {
		t.Errorf("IPv6 peer from an IPv4 socket: length %d, want 0", n)
	}
}

func FuzzGROSegment(f *testing.F) {
	f.Add(groControl(1400))
	f.Add(groControl(0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, ctrl []byte) {
		_ = groSegment(ctrl) // must not panic
	})
}

func FuzzParseSockaddr(f *testing.F) {
	var sa rawSockaddr
	n := putSockaddr(&sa, netip.MustParseAddrPort("127.0.0.1:1"), true)
	f.Add(sa[:], n)
	f.Fuzz(func(t *testing.T, b []byte, n uint32) {
		var sa rawSockaddr
		copy(sa[:], b)
		if ap, ok := parseSockaddr(&sa, n); ok && !ap.Addr().IsValid() {
			t.Errorf("ok with an invalid address")
		}
	})
}

// FuzzReceiveSlot feeds one receive slot as the kernel could fill it —
// any bytes, length, flags, source and control data — through the
// batched receive path: it never panics, and what it delivers lies within
// the received bytes.
func FuzzReceiveSlot(f *testing.F) {
	fab, err := New(Options{Listen: loopback, Logger: discardLogger()})
	if err != nil {
		f.Fatal(err)
	}
	defer fab.Close()
	peer := netip.MustParseAddrPort("127.0.0.1:4000")
	if err := fab.AddPeer(peer); err != nil {
		f.Fatal(err)
	}
	var delivered, bytes int
	fab.Handle(KindFalcon, ReceiverFunc(func(_ netip.AddrPort, _ uint32, p []byte) { delivered++; bytes += len(p) }))
	var src rawSockaddr
	srcLen := putSockaddr(&src, peer, false)
	good := fabricDatagram(KindFalcon, 1, falconPayload(1, 64))
	two := append(append([]byte(nil), good...), good...)
	f.Add(good, uint32(len(good)), 0, src[:], srcLen, []byte(nil))
	f.Add(two, uint32(len(two)), 0, src[:], srcLen, groControl(len(good)))
	f.Add(two, uint32(len(two)), unix.MSG_TRUNC, src[:], srcLen, groControl(1))
	r := newRxRing()
	local := fab.LocalAddr()
	f.Fuzz(func(t *testing.T, data []byte, n uint32, flags int, name []byte, namelen uint32, ctrl []byte) {
		r.reset()
		if len(data) > rxBufLen {
			data = data[:rxBufLen]
		}
		copy(r.buf, data)
		m := &r.msgs[0]
		m.Len = n
		m.Hdr.Flags = int32(flags)
		copy(r.names[0][:], name)
		m.Hdr.Namelen = namelen
		copy(r.ctrl[0][:], ctrl)
		m.Hdr.SetControllen(len(ctrl))
		delivered, bytes = 0, 0
		fab.receiveSlot(local, r, 0)
		if bytes > rxBufLen || bytes > int(n) && int(n) <= rxBufLen {
			t.Errorf("delivered %d bytes of a %d-byte receive", bytes, n)
		}
	})
}
