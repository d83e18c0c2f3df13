package link

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

func TestDumpCapture(t *testing.T) {
	clk := clock.NewManual(time.Second)
	var file bytes.Buffer
	c, err := NewCapture(&file, nil, CaptureConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	push := wire.AppendPushData(nil, &wire.TxnFields{CID: 5, PSN: 300}, []byte("data"))
	c.Send(wire.SealICV(binary.BigEndian.AppendUint32(push, 99)), 0x12)
	clk.Advance(1500 * time.Nanosecond)
	c.Send(wire.AppendBACK(nil, &wire.AckFields{CID: 6}), 0x34)
	clk.Advance(time.Microsecond)
	c.Send([]byte{0xde, 0xad}, 1) // not a Falcon packet
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	n, err := DumpCapture(bytes.NewReader(file.Bytes()), &out, nil)
	if err != nil || n != 3 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	want := []string{
		" 0.000000000 fd00::1 > fd00::2 flow=0x00012 PushData cid=5 len=32 iv=99",
		" 0.000001500 fd00::1 > fd00::2 flow=0x00034 BACK cid=6 len=32",
		" 0.000002500 fd00::1 > fd00::2 flow=0x00001 undecodable: ",
	}
	for i, w := range want {
		if i >= len(lines) || !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n got %q\nwant prefix %q", i, lines[i], w)
		}
	}
	// A custom describer sees the bare packet.
	out.Reset()
	DumpCapture(bytes.NewReader(file.Bytes()), &out, func(b []byte) string {
		p, err := wire.Parse(b)
		if err != nil {
			return err.Error()
		}
		return p.Type().String()
	})
	if !strings.Contains(out.String(), "PushData iv=99") {
		t.Errorf("custom describe: %s", out.String())
	}
	if _, err := DumpCapture(strings.NewReader("not a pcapng"), &out, nil); err == nil {
		t.Error("garbage accepted")
	}
}

func TestDumpCaptureNonFalconFrame(t *testing.T) {
	var file bytes.Buffer
	nw, err := pcapgo.NewNgWriter(&file, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 60)
	frame[12], frame[13] = 0x08, 0x06 // ARP
	nw.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: 60, Length: 60}, frame)
	nw.Flush()
	var out strings.Builder
	if n, err := DumpCapture(&file, &out, nil); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if !strings.Contains(out.String(), "not Falcon (60 bytes)") {
		t.Errorf("output %q", out.String())
	}
}
