package vsock

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"falconnic/vhostuser"
)

func TestVsockHdrFieldOffsets(t *testing.T) {
	// struct virtio_vsock_hdr (virtio 1.2 §5.10.6), packed little-endian.
	b := make([]byte, VsockHdrLen)
	putVsockHdr(Hdr(b), 0x0102030405060708, 0x11223344, 0x55667788, VsockOpCreditUpdate, 3, 0x99aabbcc, 0xddeeff00, 0x0badf00d)
	want := []byte{
		2, 0, 0, 0, 0, 0, 0, 0, // src_cid
		8, 7, 6, 5, 4, 3, 2, 1, // dst_cid
		0x44, 0x33, 0x22, 0x11, // src_port
		0x88, 0x77, 0x66, 0x55, // dst_port
		0xcc, 0xbb, 0xaa, 0x99, // len
		1, 0, // type
		6, 0, // op
		3, 0, 0, 0, // flags
		0x00, 0xff, 0xee, 0xdd, // buf_alloc
		0x0d, 0xf0, 0xad, 0x0b, // fwd_cnt
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("header\n got %x\nwant %x", b, want)
	}
}

func TestVsockParseAcceptsEveryWellFormedOp(t *testing.T) {
	for op := VsockOpRequest; op <= VsockOpCreditRequest; op++ {
		var payload []byte
		var flags uint32
		if op == VsockOpRW {
			payload = []byte("data")
		}
		if op == VsockOpShutdown {
			flags = VsockShutdownRcv | VsockShutdownSend
		}
		h, p, err := ParseHdr(vsPkt(op, 1, 2, flags, 100, 7, payload), vsockTestCID)
		if err != nil || h.Op() != op || !bytes.Equal(p, payload) || h.BufAlloc() != 100 || h.FwdCnt() != 7 {
			t.Errorf("%v: err %v", op, err)
		}
	}
}

// FuzzVsockHdr feeds arbitrary TX packets to the decoder and the engine:
// nothing panics, accepted headers keep their promises, and the engine's
// answers are always well-formed packets for the guest.
func FuzzVsockHdr(f *testing.F) {
	f.Add(vsPkt(VsockOpRequest, 5000, 80, 0, 65536, 0, nil))
	f.Add(vsPkt(VsockOpRW, 5000, 80, 0, 65536, 0, []byte("hello")))
	f.Add(vsPkt(VsockOpShutdown, 5000, 80, 3, 65536, 5, nil))
	f.Add(vsPkt(VsockOpCreditRequest, 1, 1024, 0, 0, 0, nil))
	f.Add(vsPkt(VsockOpRst, 1, 1024, 0, 0, 0, nil))
	f.Add(make([]byte, 43))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, payload, err := ParseHdr(b, vsockTestCID)
		if err == nil {
			if len(h) != VsockHdrLen || uint64(len(payload)) != uint64(h.Len()) || h.Type() != VsockTypeStream ||
				h.SrcCID() != vsockTestCID || h.DstCID() != VsockHostCID || h.Len() > vsockMaxPayload {
				t.Fatalf("accepted a bad header %x", b)
			}
		}
		var c Counters
		e := newVsockEngine(vsockTestCID, &c)
		// A connection the packet may name, so known-connection paths run too.
		e.guestPacket(vsPkt(VsockOpRequest, 5000, 80, 0, 65536, 0, nil), 0)
		for _, a := range e.takeActs(nil) {
			e.dialDone(a.id, true)
		}
		e.guestPacket(b, 0)
		e.hostRead(1, []byte("x"))
		rx := make([]byte, VsockHdrLen+16)
		for i := 0; e.hasRx() && i < 16; i++ {
			n := e.fillRx([]vhostuser.Buf{{Data: rx, Write: true}}, uint64(len(rx)))
			if n != 0 {
				if _, _, err := vsockParseHostPkt(rx[:n]); err != nil {
					t.Fatalf("engine sent a bad packet %x: %v", rx[:n], err)
				}
			}
		}
	})
}

// vsockParseHostPkt checks a packet we send, with the guest's rules.
func vsockParseHostPkt(b []byte) (Hdr, []byte, error) {
	if len(b) < VsockHdrLen {
		return nil, nil, ErrVsockShort
	}
	h := Hdr(b)
	if h.SrcCID() != VsockHostCID || h.DstCID() != vsockTestCID {
		return nil, nil, ErrVsockDstCID
	}
	// Swap the CIDs so the guest-side decoder applies.
	g := append([]byte(nil), b...)
	Hdr(g).SetSrcCID(vsockTestCID)
	Hdr(g).SetDstCID(VsockHostCID)
	return ParseHdr(g, vsockTestCID)
}

func TestVsockConnectLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		port uint32
		ok   bool
	}{
		{"CONNECT 1024\n", 1024, true},
		{"CONNECT 0\n", 0, true},
		{"CONNECT 4294967295\n", 4294967295, true},
		{"CONNECT 4294967296\n", 0, false},
		{"CONNECT +5\n", 0, false},
		{"CONNECT 5 \n", 0, false},
		{"CONNECT  5\n", 0, false},
		{"CONNECT 5", 0, false},
		{"CONNECT \n", 0, false},
		{"connect 5\n", 0, false},
	} {
		p, ok := parseConnectLine([]byte(tc.line))
		if p != tc.port || ok != tc.ok {
			t.Errorf("%q: %d %v", tc.line, p, ok)
		}
	}
}

// FuzzVsockConnectLine: host clients are hostile too. An accepted line is
// exactly the canonical "CONNECT <port>\n" (leading zeros aside).
func FuzzVsockConnectLine(f *testing.F) {
	f.Add([]byte("CONNECT 1024\n"))
	f.Add([]byte("CONNECT 4294967296\n"))
	f.Add([]byte("CONNECT \n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := parseConnectLine(b)
		if !ok {
			return
		}
		num := strings.TrimLeft(string(b[len("CONNECT "):len(b)-1]), "0")
		if num == "" {
			num = "0"
		}
		if want := fmt.Sprintf("%d", p); num != want {
			t.Fatalf("%q parsed as %d", b, p)
		}
	})
}
