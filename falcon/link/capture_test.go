package link

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// TestCaptureRoundTrip writes a capture through a Capture in front of a Mem,
// reads it back with pcapgo and gopacket and checks the outer stack and the
// decoded Falcon fields.
func TestCaptureRoundTrip(t *testing.T) {
	clk := clock.NewManual(3 * time.Second)
	mem := NewMem(clk, MemConfig{Delay: time.Microsecond})
	var file bytes.Buffer
	epoch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c, err := NewCapture(&file, mem, CaptureConfig{Clock: clk, Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	txf := wire.TxnFields{CID: 0x123456, DestFunction: 0x0a0b0c, Protocol: wire.ProtoRDMA, AR: true,
		DataBase: 200, ReqBase: 100, PSN: 301, RSN: 7}
	payload := []byte("RBTH+RETH+data, odd length")
	// The transport's envelope: packet, IV timestamp, ICV.
	push := wire.SealICV(binary.BigEndian.AppendUint32(wire.AppendPushData(nil, &txf, payload), 0xcafe))
	pull := wire.AppendPullRequest(nil, &wire.TxnFields{CID: 9, PSN: 101, RSN: 2, RequestLength: 4096})
	af := wire.AckFields{CID: 0x654321, DataBase: 300, ReqBase: 102, T1: 11, T2: 22,
		CC: wire.CCInfo{HopCount: 2, RxBufferLevel: 5, ECNCount: 77, RUEValue: 1234}, OWNData: true}
	af.DataAck, af.DataRx, af.Req = wire.NewBitmap(128), wire.NewBitmap(128), wire.NewBitmap(64)
	af.DataRx.Set(1)
	af.DataRx.Set(2)
	eack := wire.SealICV(wire.AppendEACK(nil, &af))
	nack := wire.SealICV(wire.AppendNACK(nil, &wire.NackFields{CID: 5, NackPSN: 301, Code: wire.NackRNR, RNRTimeoutCode: 14}))

	sent := []struct {
		pkt  []byte
		flow uint32
	}{{push, 0xabcde}, {pull, 1}, {eack, 0xfffff}, {nack, 0x40003}}
	for i, s := range sent {
		c.Send(s.pkt, s.flow)
		if i < len(sent)-1 {
			clk.Advance(time.Millisecond)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if c.Captured.Load() != 4 || mem.Len() != 4 {
		t.Fatalf("captured %d, forwarded %d", c.Captured.Load(), mem.Len())
	}

	r, err := pcapgo.NewNgReader(&file, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Errorf("link type %v", r.LinkType())
	}
	for i, s := range sent {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if want := epoch.Add(3*time.Second + time.Duration(i)*time.Millisecond); !ci.Timestamp.Equal(want) {
			t.Errorf("packet %d at %v, want %v", i, ci.Timestamp, want)
		}
		pkt := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("packet %d: %v", i, el.Error())
		}
		ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		udp := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip.FlowLabel != s.flow&0xfffff || ip.HopLimit != 255 || ip.NextHeader != layers.IPProtocolUDP ||
			ip.SrcIP.String() != "fd00::1" || ip.DstIP.String() != "fd00::2" {
			t.Errorf("packet %d: IPv6 %+v", i, ip)
		}
		if udp.DstPort != FalconUDPPort || udp.SrcPort != layers.UDPPort(0xc000|s.flow&0x3fff) || int(udp.Length) != 8+len(s.pkt) {
			t.Errorf("packet %d: UDP %d→%d len %d", i, udp.SrcPort, udp.DstPort, udp.Length)
		}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		if err, res := udp.VerifyChecksum(); err != nil || !res.Valid {
			t.Errorf("packet %d: UDP checksum %+v %v", i, res, err)
		}
		fl, ok := pkt.Layer(LayerTypeFalcon).(*Falcon)
		if !ok {
			t.Fatalf("packet %d: no Falcon layer; layers %v", i, pkt.Layers())
		}
		_, sealed := wire.OpenICV(s.pkt)
		if fl.ICV != sealed || fl.HasIV != (i == 0) {
			t.Errorf("packet %d: ICV %v IV %v, want %v", i, fl.ICV, fl.HasIV, sealed)
		}
		switch i {
		case 0:
			if fl.Type != wire.TypePushData || fl.Txn.PSN != 301 || fl.Txn.RSN != 7 || fl.CID != 0x123456 ||
				fl.Txn.DestFunction != 0x0a0b0c || !fl.Txn.AR || fl.DataBase != 200 || fl.ReqBase != 100 ||
				fl.Txn.RequestLength != uint16(len(payload)) || !bytes.Equal(fl.Payload, payload) || fl.IV != 0xcafe {
				t.Errorf("push data decoded as %+v", fl.Txn)
			}
			if app := pkt.ApplicationLayer(); app == nil || !bytes.Equal(app.Payload(), payload) {
				t.Error("ULP payload not exposed as the application layer")
			}
		case 1:
			if fl.Type != wire.TypePullRequest || fl.Txn.RequestLength != 4096 || fl.Txn.PSN != 101 || len(fl.Payload) != 0 {
				t.Errorf("pull request decoded as %+v", fl.Txn)
			}
		case 2:
			if fl.Type != wire.TypeEACK || fl.Ack.T2 != 22 || fl.Ack.CC != af.CC || !fl.Ack.OWNData || fl.Ack.DataRx.String()[125:] != "110" {
				t.Errorf("EACK decoded as %+v", fl.Ack)
			}
		case 3:
			if fl.Type != wire.TypeNACK || fl.Nack.Code != wire.NackRNR || fl.Nack.RNRTimeoutCode != 14 || fl.Nack.NackPSN != 301 {
				t.Errorf("NACK decoded as %+v", fl.Nack)
			}
		}
	}
	if _, _, err := r.ReadPacketData(); err != io.EOF {
		t.Errorf("extra packet or error: %v", err)
	}
}

// TestAppendFrameMatchesGopacket compares our framing byte for byte with
// gopacket's serialization of the same headers.
func TestAppendFrameMatchesGopacket(t *testing.T) {
	src, dst := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::ff")
	smac, dmac := net.HardwareAddr{2, 1, 2, 3, 4, 5}, net.HardwareAddr{2, 6, 7, 8, 9, 10}
	for _, n := range []int{0, 1, 31, 72, 4124} {
		pkt := make([]byte, n)
		for i := range pkt {
			pkt[i] = byte(i*7 + 3)
		}
		flow := uint32(0x12345 + n)
		got := AppendFrame([]byte{0xee}, pkt, flow, smac, dmac, src, dst)[1:]

		eth := &layers.Ethernet{SrcMAC: smac, DstMAC: dmac, EthernetType: layers.EthernetTypeIPv6}
		ip := &layers.IPv6{Version: 6, FlowLabel: flow & 0xfffff, NextHeader: layers.IPProtocolUDP, HopLimit: 255,
			SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		udp := &layers.UDP{SrcPort: layers.UDPPort(0xc000 | flow&0x3fff), DstPort: FalconUDPPort}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			eth, ip, udp, gopacket.Payload(pkt)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("payload %d bytes: frame differs\n got %x\nwant %x", n, got[:frameHdr], buf.Bytes()[:frameHdr])
		}
	}
}

func TestCaptureRealClockStampsWallTime(t *testing.T) {
	var file bytes.Buffer
	c, err := NewCapture(&file, nil, CaptureConfig{})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	c.Send(wire.AppendBACK(nil, &wire.AckFields{}), 0)
	after := time.Now()
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewNgReader(&file, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	_, ci, err := r.ReadPacketData()
	if err != nil {
		t.Fatal(err)
	}
	// Monotonic and wall readings may differ slightly; allow a second.
	if ci.Timestamp.Before(before.Add(-time.Second)) || ci.Timestamp.After(after.Add(time.Second)) {
		t.Errorf("timestamp %v not between %v and %v", ci.Timestamp, before, after)
	}
}

func TestCaptureWithoutNextLinkAndWriteErrors(t *testing.T) {
	c, err := NewCapture(io.Discard, nil, CaptureConfig{Clock: clock.NewManual(0)})
	if err != nil {
		t.Fatal(err)
	}
	c.Send(wire.AppendBACK(nil, &wire.AckFields{}), 0)
	if c.Flush() != nil || c.Captured.Load() != 1 {
		t.Error("record-only capture")
	}
	fw := &failWriter{}
	c, err = NewCapture(fw, Discard, CaptureConfig{Clock: clock.NewManual(0)})
	if err != nil {
		t.Fatal(err)
	}
	fw.fail = true
	big := make([]byte, 8000)
	for i := 0; i < 3; i++ {
		c.Send(big, 0) // fills the writer's buffer and forces writes
	}
	if c.Flush() == nil || c.Err() == nil || c.WriteErrors.Load() == 0 {
		t.Error("write errors not reported")
	}
}

type failWriter struct{ fail bool }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.fail {
		return 0, io.ErrClosedPipe
	}
	return len(p), nil
}

func TestFalconLayerRejectsGarbage(t *testing.T) {
	var f Falcon
	for _, b := range [][]byte{nil, {1, 2, 3}, make([]byte, 40)} {
		if err := f.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err == nil {
			t.Errorf("decoded garbage %x", b)
		}
	}
}

// FuzzFalconLayer decodes arbitrary UDP-port-1000 payloads through gopacket.
func FuzzFalconLayer(f *testing.F) {
	f.Add([]byte(wire.AppendPullRequest(nil, &wire.TxnFields{PSN: 1})))
	f.Add(wire.SealICV(wire.AppendPushData(nil, &wire.TxnFields{PSN: 1}, []byte("abc"))))
	f.Add(wire.SealICV(wire.AppendEACK(nil, &wire.AckFields{})))
	f.Add([]byte(wire.AppendNACK(nil, &wire.NackFields{Code: wire.NackCIE})))
	f.Add([]byte{0x10})
	f.Add(wire.SealICV(binary.BigEndian.AppendUint32(wire.AppendBACK(nil, &wire.AckFields{}), 7)))
	f.Fuzz(func(t *testing.T, b []byte) {
		frame := AppendFrame(nil, b, 1, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2},
			netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"))
		pkt := gopacket.NewPacket(frame, layers.LinkTypeEthernet, gopacket.Default)
		fl, ok := pkt.Layer(LayerTypeFalcon).(*Falcon)
		want := parses(b)
		if body, icv := wire.OpenICV(b); icv {
			want = want || parses(body) || len(body) >= ivLen && parses(body[:len(body)-ivLen])
		}
		if ok != want {
			t.Fatalf("layer decoded %v, want %v", ok, want)
		}
		if ok && fl.Type != fl.Packet.Type() {
			t.Fatal("inconsistent layer")
		}
	})
}

// TestAppendUDPFrameIPv4MatchesGopacket: the IPv4 framing a capture of the
// UDP fabric uses is what gopacket serialises, checksums included.
func TestAppendUDPFrameIPv4MatchesGopacket(t *testing.T) {
	src, dst := netip.MustParseAddrPort("192.0.2.1:7471"), netip.MustParseAddrPort("192.0.2.2:7472")
	smac, dmac := net.HardwareAddr{2, 1, 2, 3, 4, 5}, net.HardwareAddr{2, 6, 7, 8, 9, 10}
	for _, n := range []int{0, 1, 31, 72, 4124} {
		pkt := make([]byte, n)
		for i := range pkt {
			pkt[i] = byte(i*5 + 1)
		}
		got := AppendUDPFrame(nil, pkt, 7, smac, dmac, src, dst)
		eth := &layers.Ethernet{SrcMAC: smac, DstMAC: dmac, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			eth, ip, udp, gopacket.Payload(pkt)); err != nil {
			t.Fatal(err)
		}
		want := buf.Bytes()[:min(len(got), len(buf.Bytes()))] // gopacket pads short Ethernet frames to 60 bytes
		if !bytes.Equal(got, want) {
			t.Errorf("payload %d bytes: frame differs\n got %x\nwant %x", n, got[:42], want[:42])
		}
	}
}
