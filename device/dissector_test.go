package device

import (
	"bytes"
	"encoding/binary"
	"falconnic/psp"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"falconnic/device/capture"
	"falconnic/device/fabric"
	"falconnic/device/storage"
	"falconnic/falcon/wire"
)

// The Wireshark dissector (tools/wireshark/falcon.lua) is tested against
// what the Go encoders wrote: tshark decodes a capture and every packet's
// fields must match the wire package's reading of the same bytes.

const dissector = "../tools/wireshark/falcon.lua"

// every Falcon packet type, every RDMA opcode and NACK code, from the wire
// builders, as frames between two ports of a daemon.
func builtRecords() []capture.Record {
	var recs []capture.Record
	src := netip.AddrPortFrom(portLinkAddr([6]byte{0x52, 0x54, 0, 0, 0, 1}), 0xc001)
	dst := netip.AddrPortFrom(portLinkAddr([6]byte{0x52, 0x54, 0, 0, 0, 2}), capture.FalconUDPPort)
	add := func(pkt []byte) {
		frame := binary.BigEndian.AppendUint32(pkt, 0x1234) // IV timestamp
		frame = binary.BigEndian.AppendUint32(frame, 0)     // ICV (in-process: zero)
		recs = append(recs, capture.Record{Time: int64(len(recs)) * 1000, Iface: capture.PortLink, Dir: capture.Out,
			Src: src, Dst: dst, Flow: 1, Len: len(frame), Data: frame})
	}
	psn := wire.PSN(4000000000)
	for i, op := range wire.RDMAOpcodes {
		info, _ := op.Info()
		f := wire.TxnFields{CID: 0x10000 + uint32(i), Protocol: wire.ProtoRDMA, PSN: psn + wire.PSN(i), RSN: wire.RSN(i), DataBase: 7, ReqBase: 8}
		ulp := wire.AppendRDMA(nil, &wire.RDMAFields{Op: op, DestQP: 0x11, SN: uint32(100 + i), VA: 0x1000, RKey: 5, DMALength: 64})
		switch info.Falcon {
		case wire.TypePullRequest:
			f.RequestLength = 64
			add(wire.AppendTxn(nil, wire.TypePullRequest, &f, ulp))
		case wire.TypePullData:
			add(wire.AppendPullData(nil, &f, append(ulp, make([]byte, 64)...)))
		default:
			add(wire.AppendPushData(nil, &f, append(ulp, make([]byte, 32)...)))
		}
	}
	for i, t := range wire.NVMePacketTypes {
		info, _ := t.Info()
		ulp, _ := wire.AppendNVMe(nil, &wire.NVMeFields{Type: t, InitiatorTag: uint32(i + 1), Status: 0})
		f := wire.TxnFields{CID: 0x20000 + uint32(i), Protocol: wire.ProtoNVMe, PSN: wire.PSN(i), RSN: wire.RSN(i)}
		switch info.Falcon {
		case wire.TypePullRequest:
			add(wire.AppendTxn(nil, wire.TypePullRequest, &f, ulp))
		case wire.TypePullData:
			add(wire.AppendPullData(nil, &f, append(ulp, make([]byte, 16)...)))
		default:
			add(wire.AppendPushData(nil, &f, ulp))
		}
	}
	add(wire.AppendResync(nil, &wire.TxnFields{CID: 0x30000, PSN: 9, RSN: 3, ResyncCode: wire.ResyncTargetCIE, ResyncPacketType: wire.TypePushData}))
	add(wire.AppendBACK(nil, &wire.AckFields{CID: 0x30001, DataBase: 10, ReqBase: 20}))
	e := wire.AckFields{CID: 0x30002, DataBase: 4294967290, ReqBase: 30, OWNData: true,
		DataAck: wire.NewBitmap(wire.DataBitmapBits), DataRx: wire.NewBitmap(wire.DataBitmapBits), Req: wire.NewBitmap(wire.ReqBitmapBits)}
	e.DataAck.Set(0)
	e.DataAck.Set(9)
	e.DataRx.Set(127)
	e.Req.Set(63)
	add(wire.AppendEACK(nil, &e))
	for i, c := range wire.NackCodes {
		add(wire.AppendNACK(nil, &wire.NackFields{CID: 0x40000 + uint32(i), NackPSN: wire.PSN(50 + i), Code: c, RequestWindow: i%2 == 0}))
	}
	// A retransmission: the first packet again.
	r := recs[0]
	r.Time = int64(len(recs)) * 1000
	recs = append(recs, r)
	return recs
}

// expected is one packet as the wire package reads it, in tshark's field
// order: falcon.type, falcon.cid, falcon.psn, falcon.rsn, RDMA opcode,
// NVMe type, NACK code, CM type, fabric kind.
func expected(t *testing.T, r capture.Record) string {
	t.Helper()
	kind := ""
	b := r.Data
	if r.Iface == capture.Fabric {
		h, payload, ok := fabric.Decode(b)
		if !ok {
			t.Fatalf("captured datagram does not decode")
		}
		kind, b = strconv.Itoa(int(h.Kind())), payload
		switch h.Kind() {
		case fabric.KindCM:
			return fmt.Sprintf(",,,,,,,%d,%s", b[5], kind)
		case fabric.KindEthernet:
			return ",,,,,,,," + kind
		}
	}
	s := decodeSent(t, b[:len(b)-8])
	p := wire.Packet(b[:len(b)-8])
	row := fmt.Sprintf("%d,%d,", s.typ, s.cid)
	if s.hasTxn {
		row += fmt.Sprintf("%d,%d", s.psn, s.rsn)
	} else {
		row += ","
	}
	op, nv, nack := "", "", ""
	if s.hasTxn && s.typ != wire.TypeResync {
		switch p.Txn().Protocol() {
		case wire.ProtoRDMA:
			u, err := wire.ParseRDMA(p.Payload(), s.typ)
			if err != nil {
				t.Fatalf("RDMA payload: %v", err)
			}
			op = fmt.Sprintf("0x%02x", uint8(u.Op))
		case wire.ProtoNVMe:
			u, err := wire.ParseNVMe(p.Payload(), s.typ)
			if err != nil {
				t.Fatalf("NVMe payload: %v", err)
			}
			nv = strconv.Itoa(int(u.Type))
		}
	}
	if s.typ == wire.TypeNACK {
		nack = strconv.Itoa(int(p.Nack().Code()))
	}
	return fmt.Sprintf("%s,%s,%s,%s,,%s", row, op, nv, nack, kind)
}

// TestDissectorDecodesWhatWasSent: tshark with the Lua dissector decodes
// a capture of the daemons' NVMe exchange over a lossy UDP fabric (with
// the CM set-up and retransmissions) and frames of every Falcon packet
// type, RDMA opcode and NACK code; each packet's type, CID, PSN, RSN and
// ULP type or opcode match the Go encoders', nothing is malformed, and
// the expert info names retransmissions and NACKs.
func TestDissectorDecodesWhatWasSent(t *testing.T) {
	tshark := needTool(t, "tshark")
	la, lb := freeUDPPort(t), freeUDPPort(t)
	impair := `, "loss_percent": 2, "reorder_percent": 5, "seed": 5`
	startDaemon(t, plainFabric(storeConfig(lb, la, storage.NamespaceMemory, impair)))
	host, s := startDaemonWithCapture(t, plainFabric(hostConfig(la, lb, impair)))
	r := remoteDisk(t, host)
	for round := 0; round < 2; round++ {
		r.writeRead(uint64(round)*64*8, 16, byte(round+1))
	}
	recs, _ := drain(s)
	recs = append(recs, builtRecords()...)
	path := filepath.Join(t.TempDir(), "falcon.pcapng")
	writePcap(t, path, recs)

	fields := []string{"falcon.type", "falcon.cid", "falcon.psn", "falcon.rsn", "falcon_rdma.opcode", "falcon_nvme.type",
		"falcon.nack_code", "falcon_cm.type", "falconfab.kind", "_ws.malformed", "_ws.expert.message"}
	lines := tsharkFields(t, tshark, path, fields, len(recs))
	retx, nacks := 0, 0
	for i, line := range lines {
		col := strings.Split(line, "|")
		if len(col) != len(fields) {
			t.Fatalf("packet %d: %q", i+1, line)
		}
		if col[9] != "" || strings.Contains(line, "Lua Error") {
			t.Errorf("packet %d malformed: %q", i+1, line)
		}
		got := strings.Join(col[:9], ",")
		if want := expected(t, recs[i]); got != want {
			t.Errorf("packet %d: tshark %s, sent %s", i+1, got, want)
		}
		switch {
		case strings.HasPrefix(col[10], "Retransmission of frame"):
			retx++
		case strings.HasPrefix(col[10], "NACK "):
			nacks++
		}
	}
	if retx == 0 || nacks < len(wire.NackCodes) {
		t.Errorf("expert info: %d retransmissions, %d NACKs (want > 0 and ≥ %d)", retx, nacks, len(wire.NackCodes))
	}
	// The tree view decodes too (bitmaps, extension headers, commands).
	v, err := exec.Command(tshark, "-n", "-r", path, "-X", "lua_script:"+dissector, "-V").CombinedOutput()
	if err != nil || bytes.Contains(v, []byte("Lua Error")) || bytes.Contains(v, []byte("Malformed")) {
		t.Fatalf("tshark -V: %v\n%s", err, lastLines(v, 40))
	}
	for _, want := range []string{"PSNs set: 4294967290,3", "RETH", "STETH", "AtomicETH", "Command", "Source NIC"} {
		if !bytes.Contains(v, []byte(want)) {
			t.Errorf("tshark -V lacks %q", want)
		}
	}
}

// tsharkFields runs tshark with the dissector over the capture at path
// and returns one line per packet, fields separated by "|" (first
// occurrence each); it fails the test on a Lua error or when tshark does
// not print want packets.
func tsharkFields(t *testing.T, tshark, path string, fields []string, want int) []string {
	t.Helper()
	args := []string{"-n", "-r", path, "-X", "lua_script:" + dissector, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.Contains(stderr.String(), "Lua") {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != want {
		t.Fatalf("tshark printed %d packets, the capture has %d", len(lines), want)
	}
	return lines
}

func lastLines(b []byte, n int) string {
	l := strings.Split(string(b), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// TestDissectorSurvivesCutAndFlippedPackets: every built packet cut at
// every length up to its headers, and with bytes flipped, decodes in
// tshark without a Lua error (short packets get the dissector's own
// expert error, not an exception).
func TestDissectorSurvivesCutAndFlippedPackets(t *testing.T) {
	tshark := needTool(t, "tshark")
	var recs []capture.Record
	for i, r := range builtRecords() {
		for n := 0; n < len(r.Data) && n <= 120; n += 3 {
			c := r
			c.Data, c.Len = r.Data[:n], n
			recs = append(recs, c)
		}
		for j := 0; j < len(r.Data) && j < 100; j += 7 {
			c := r
			c.Data = append([]byte(nil), r.Data...)
			c.Data[j] ^= byte(0x5a + i)
			recs = append(recs, c)
		}
	}
	path := filepath.Join(t.TempDir(), "cut.pcapng")
	writePcap(t, path, recs)
	out, err := exec.Command(tshark, "-n", "-r", path, "-X", "lua_script:"+dissector, "-V").CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("Lua Error")) {
		t.Fatalf("tshark: %v\n%s", err, lastLines(out, 40))
	}
	if n := bytes.Count(out, []byte("Falcon Transport")); n < len(recs)/2 {
		t.Errorf("only %d of %d packets reached the Falcon dissector", n, len(recs))
	}
}

// TestDissectorDecodesASealedFabric: on a secure fabric (the default) the
// dissector shows what a tap sees: every Falcon datagram as PSP (SPI, IV,
// the clear first word's CID, the encrypted rest, the ICV) and every CM
// message as its authenticated envelope (sender ID), none malformed.
func TestDissectorDecodesASealedFabric(t *testing.T) {
	tshark := needTool(t, "tshark")
	la, lb := freeUDPPort(t), freeUDPPort(t)
	startDaemon(t, storeConfig(lb, la, storage.NamespaceMemory, ""))
	host, s := startDaemonWithCapture(t, hostConfig(la, lb, ""))
	r := remoteDisk(t, host)
	r.writeRead(0, 16, 7)
	recs, _ := drain(s)
	path := filepath.Join(t.TempDir(), "sealed.pcapng")
	writePcap(t, path, recs)
	fields := []string{"falconfab.kind", "falcon_psp.spi", "falcon.cid", "falcon_cmauth.sender", "_ws.malformed"}
	lines := tsharkFields(t, tshark, path, fields, len(recs))
	psps, cms := 0, 0
	for i, line := range lines {
		col := strings.Split(line, "|")
		if len(col) != len(fields) || col[4] != "" {
			t.Fatalf("packet %d malformed: %q", i+1, line)
		}
		h, p, _ := fabric.Decode(recs[i].Data)
		switch h.Kind() {
		case fabric.KindFalcon:
			spi, _ := psp.PeekSPI(p)
			clear, _ := psp.PeekClear(p)
			want := fmt.Sprintf("2|0x%08x|%d||", uint32(spi), wire.Packet(clear).CID())
			if line != want {
				t.Errorf("packet %d: tshark %q, sent %q", i+1, line, want)
			}
			psps++
		case fabric.KindCM:
			if col[0] != "3" || col[3] == "" {
				t.Errorf("packet %d: a sealed CM message without its sender: %q", i+1, line)
			}
			cms++
		}
	}
	if psps == 0 || cms == 0 {
		t.Errorf("PSP datagrams %d, sealed CM messages %d", psps, cms)
	}
}
