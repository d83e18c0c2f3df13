package device

import (
	"encoding/binary"
	"reflect"
	"testing"

	"falconnic/internal/stats"
)

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
	f.Add(make([]byte, EthHeaderLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < EthHeaderLen {
			if isControl(b, macA) {
				t.Fatal("runt taken as control frame")
			}
			return
		}
		e := EthFrame(b)
		_ = e.Dst().String() + e.Src().String()
		if isControl(b, macA) != (e.EtherType() == EtherTypeControl && string(b[:6]) == string(macA)) {
			t.Fatal("isControl disagrees with the header")
		}
		_ = flowHash(b)
	})
}

func TestFlowHashKeepsAFlowOnOnePair(t *testing.T) {
	ip := make([]byte, 28)
	ip[0], ip[9] = 0x45, 17
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[20:], 4000)
	a := ethFrame(macA, macB, 0x0800, string(ip)+"payload one")
	b := ethFrame(macA, macB, 0x0800, string(ip)+"another payload")
	if flowHash(a) != flowHash(b) {
		t.Fatal("same 5-tuple hashed differently")
	}
	binary.BigEndian.PutUint16(ip[20:], 4001)
	if flowHash(a) == flowHash(ethFrame(macA, macB, 0x0800, string(ip))) {
		t.Log("port change collided (possible but unlikely)")
	}
}

func TestEveryNetCounterIsListed(t *testing.T) {
	var c NetCounters
	seen := map[*stats.Counter]bool{}
	names := map[string]bool{}
	for _, d := range c.Set() {
		if d.Help == "" || names[d.Name] || seen[d.Counter] {
			t.Errorf("counter %q: empty help or duplicate", d.Name)
		}
		names[d.Name], seen[d.Counter] = true, true
	}
	v := reflect.ValueOf(&c).Elem()
	for i := 0; i < v.NumField(); i++ {
		if !seen[v.Field(i).Addr().Interface().(*stats.Counter)] {
			t.Errorf("counter field %s is not in Set()", v.Type().Field(i).Name)
		}
	}
}
