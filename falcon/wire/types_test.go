package wire

import (
	"strings"
	"testing"
	"time"
)

// TestTypeTableComplete checks that every packet type constant has a row and
// that the rows match [S §7.2].
func TestTypeTableComplete(t *testing.T) {
	want := map[PacketType]struct {
		hdr     int
		win     Window
		payload bool
	}{
		TypePullRequest: {PullRequestLen, WindowRequest, true},
		TypePullData:    {PullDataHeaderLen, WindowData, true},
		TypePushData:    {PushDataHeaderLen, WindowData, true},
		TypeResync:      {ResyncLen, WindowData, false},
		TypeNACK:        {NACKLen, WindowNone, false},
		TypeBACK:        {BACKLen, WindowNone, false},
		TypeEACK:        {EACKLen, WindowNone, false},
	}
	if len(PacketTypes) != len(want) {
		t.Fatalf("PacketTypes has %d entries, want %d", len(PacketTypes), len(want))
	}
	for _, pt := range PacketTypes {
		w, ok := want[pt]
		info, defined := pt.Info()
		if !ok || !defined {
			t.Errorf("%v: missing row", pt)
			continue
		}
		if info.HeaderLen != w.hdr || info.Window != w.win || info.Payload != w.payload || pt.Window() != w.win {
			t.Errorf("%v: row %+v, want %+v", pt, info, w)
		}
		if pt.HeaderLen() != w.hdr || pt.HasPayload() != w.payload {
			t.Errorf("%v: HeaderLen %d HasPayload %v, want %d %v", pt, pt.HeaderLen(), pt.HasPayload(), w.hdr, w.payload)
		}
		if info.HeaderLen > MaxHeaderLen {
			t.Errorf("%v: header longer than MaxHeaderLen", pt)
		}
	}
	for code := 0; code < 16; code++ {
		pt := PacketType(code)
		_, listed := want[pt]
		if pt.Valid() != listed {
			t.Errorf("code %d: Valid() = %v, want %v", code, pt.Valid(), listed)
		}
	}
	if PacketType(1).String() != "PacketType(1)" || TypeEACK.String() != "EACK" || PacketType(200).Valid() ||
		PacketType(200).HeaderLen() != 0 || PacketType(200).Window() != WindowNone || PacketType(1).HasPayload() {
		t.Error("reserved types must print their code and be invalid")
	}
}

func TestCodeNames(t *testing.T) {
	for _, c := range NackCodes {
		if !c.Valid() || strings.HasPrefix(c.String(), "NackCode") {
			t.Errorf("NACK code %d has no name", c)
		}
	}
	for _, c := range []NackCode{0, 3, 9, 255} {
		if c.Valid() {
			t.Errorf("NACK code %d is reserved", c)
		}
	}
	if len(ResyncCodes) != 7 {
		t.Fatalf("want 7 resync codes")
	}
	for i, c := range ResyncCodes {
		if int(c) != i+1 || !c.Valid() || c.String() == ResyncCode(0).String() {
			t.Errorf("resync code %d: %v", i+1, c)
		}
	}
	if ResyncCode(0).Valid() || ResyncCode(8).Valid() || ResyncCode(8).String() != "ResyncCode(8)" {
		t.Error("resync codes 0 and 8 are reserved")
	}
	if ProtoRDMA.String() != "RDMA" || ProtoNVMe.String() != "NVMe" || ProtocolType(1).Valid() {
		t.Error("protocol names")
	}
}

// TestRNRTimeoutTable checks the 5-bit code → delay table of [S §7.8].
func TestRNRTimeoutTable(t *testing.T) {
	ms := map[uint8]float64{
		0: 655.36, 1: 0.01, 2: 0.02, 3: 0.03, 4: 0.04, 5: 0.06, 6: 0.08, 7: 0.12, 8: 0.16, 9: 0.24,
		10: 0.32, 11: 0.48, 12: 0.64, 13: 0.96, 14: 1.28, 15: 1.92, 16: 2.56, 17: 3.84, 18: 5.12,
		19: 7.68, 20: 10.24, 21: 15.36, 22: 20.48, 23: 30.72, 24: 40.96, 25: 61.44, 26: 81.92,
		27: 122.88, 28: 163.84, 29: 245.76, 30: 327.68, 31: 491.52,
	}
	for code, v := range ms {
		want := time.Duration(v*1e6+0.5) * time.Nanosecond
		if got := RNRTimeout(code); got != want {
			t.Errorf("RNRTimeout(%d) = %v, want %v", code, got, want)
		}
		if code != 0 && RNRTimeoutCode(want) != code {
			t.Errorf("RNRTimeoutCode(%v) = %d, want %d", want, RNRTimeoutCode(want), code)
		}
	}
	if RNRTimeout(32+5) != RNRTimeout(5) {
		t.Error("only the low 5 bits count")
	}
	if RNRTimeoutCode(11*time.Microsecond) != 2 || RNRTimeoutCode(time.Second) != 0 {
		t.Error("RNRTimeoutCode must round up")
	}
}
