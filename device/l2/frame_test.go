package l2

import (
	"encoding/binary"
	"net"
	"testing"
)

var (
	macA = net.HardwareAddr{0x52, 0x54, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x52, 0x54, 0, 0, 0, 0xb}
)

func ethFrame(dst, src net.HardwareAddr, etype uint16, payload string) []byte {
	f := append(append(append([]byte(nil), dst...), src...), byte(etype>>8), byte(etype))
	return append(f, payload...)
}

// FuzzFrameParsing runs the parsers the data path applies to
// guest-controlled frames: control-channel detection and the flow hash
// that picks an RX queue pair.
func FuzzFrameParsing(f *testing.F) {
	f.Add(ethFrame(macA, macB, EtherTypeControl, "cm"))
	ip := make([]byte, 24)
	ip[0], ip[9] = 0x45, 6
	f.Add(ethFrame(macA, macB, 0x0800, string(ip)))
	ip[0] = 0x4f // IHL 60 bytes but only 24 present
	f.Add(ethFrame(macA, macB, 0x0800, string(ip)))
	f.Add(make([]byte, HeaderLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < HeaderLen {
			if IsControl(b, macA) {
				t.Fatal("runt taken as control frame")
			}
			return
		}
		e := Frame(b)
		_ = e.Dst().String() + e.Src().String()
		if IsControl(b, macA) != (e.EtherType() == EtherTypeControl && string(b[:6]) == string(macA)) {
			t.Fatal("IsControl disagrees with the header")
		}
		_ = FlowHash(b)
	})
}

func TestFlowHashKeepsAFlowOnOnePair(t *testing.T) {
	ip := make([]byte, 28)
	ip[0], ip[9] = 0x45, 17
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[20:], 4000)
	a := ethFrame(macA, macB, 0x0800, string(ip)+"payload one")
	b := ethFrame(macA, macB, 0x0800, string(ip)+"another payload")
	if FlowHash(a) != FlowHash(b) {
		t.Fatal("same 5-tuple hashed differently")
	}
	binary.BigEndian.PutUint16(ip[20:], 4001)
	if FlowHash(a) == FlowHash(ethFrame(macA, macB, 0x0800, string(ip))) {
		t.Log("port change collided (possible but unlikely)")
	}
}
