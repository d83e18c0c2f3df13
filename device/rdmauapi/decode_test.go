package rdmauapi

import (
	"errors"
	"testing"
)

var testMAC = [6]byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}

// request builds a driver→NIC frame payload (without Ethernet header).
func request(op Opcode, flags Flags, reqID uint32, body []byte) []byte {
	f := AppendFrame(nil, testMAC, HdrFields{Opcode: op, Flags: flags, Instance: 0xfeedface, ReqID: reqID}, body)
	p, _ := ControlPayload(f)
	return p
}

func TestAppendFrameLayout(t *testing.T) {
	f := AppendFrame(nil, testMAC, HdrFields{Opcode: OpClose, Instance: 7, ReqID: 9}, nil)
	if len(f) != 60 {
		t.Fatalf("frame of %d bytes, want padded to 60", len(f))
	}
	if string(f[0:6]) != string(testMAC[:]) || string(f[6:12]) != string(testMAC[:]) {
		t.Errorf("destination and source must both be the NIC's MAC: % x", f[:12])
	}
	if f[12] != 0x88 || f[13] != 0xB5 {
		t.Errorf("EtherType % x, want 88 b5", f[12:14])
	}
	if string(f[14:18]) != "FNIC" {
		t.Errorf("magic bytes %q, want \"FNIC\"", f[14:18])
	}
	m, err := DecodeRequest(f[EthHdrLen:])
	if err != nil {
		t.Fatal(err)
	}
	if m.Hdr.Opcode() != OpClose || m.Hdr.Instance() != 7 || m.Hdr.ReqID() != 9 || len(m.Body) != 0 {
		t.Errorf("decoded %v inst %d req %d body %d", m.Hdr.Opcode(), m.Hdr.Instance(), m.Hdr.ReqID(), len(m.Body))
	}
}

func TestControlPayloadRejectsOtherEtherTypes(t *testing.T) {
	f := AppendFrame(nil, testMAC, HdrFields{Opcode: OpClose, ReqID: 1}, nil)
	f[12], f[13] = 0x08, 0x00
	if _, ok := ControlPayload(f); ok {
		t.Error("IPv4 frame taken as a control frame")
	}
	if _, ok := ControlPayload(f[:10]); ok {
		t.Error("runt frame taken as a control frame")
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	good := func() []byte {
		b := make([]byte, HandleReqSize)
		HandleReq(b).SetHandle(3)
		return request(OpDestroyPD, 0, 5, b)
	}
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		want   error
		status Status
		reply  bool
	}{
		{"short", func(p []byte) []byte { return p[:HdrSize-1] }, ErrShort, 0, false},
		{"magic", func(p []byte) []byte { p[0] ^= 1; return p }, ErrBadMagic, 0, false},
		{"version", func(p []byte) []byte { Hdr(p).SetVersion(2); return p }, ErrBadVersion, StatusBadVersion, true},
		{"length beyond frame", func(p []byte) []byte { Hdr(p).SetLength(200); return p }, ErrBadLength, StatusBadLength, true},
		{"length beyond max", func(p []byte) []byte { Hdr(p).SetLength(MaxBody + 1); return p }, ErrBadLength, StatusBadLength, true},
		{"unknown opcode", func(p []byte) []byte { Hdr(p).SetOpcode(0x7e); return p }, ErrBadOpcode, StatusBadOpcode, true},
		{"event towards NIC", func(p []byte) []byte { Hdr(p).SetOpcode(OpEvCQComp); return p }, ErrBadOpcode, StatusBadOpcode, true},
		{"reply flag", func(p []byte) []byte { Hdr(p).SetFlags(FlagReply); return p }, ErrBadFlags, 0, false},
		{"zero req_id", func(p []byte) []byte { Hdr(p).SetReqID(0); return p }, ErrBadReqID, 0, false},
		{"status set", func(p []byte) []byte { Hdr(p).SetStatus(StatusBusy); return p }, ErrBadFlags, StatusBadParam, true},
		{"body too short", func(p []byte) []byte { Hdr(p).SetLength(HandleReqSize - 1); return p }, ErrBadBody, StatusBadLength, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeRequest(tc.mutate(good()))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			s, ok := ReplyStatus(m, err)
			if ok != tc.reply || (ok && s != tc.status) {
				t.Errorf("ReplyStatus = %v, %v; want %v, %v", s, ok, tc.status, tc.reply)
			}
		})
	}
}

func TestDecodeRequestIgnoresPadding(t *testing.T) {
	b := make([]byte, HandleReqSize)
	p := request(OpDestroyPD, 0, 5, b)
	if len(p) != 46 {
		t.Fatalf("payload %d bytes, want 46 (60-byte frame)", len(p))
	}
	if _, err := DecodeRequest(append(p, 0, 0, 0)); err != nil {
		t.Errorf("trailing padding rejected: %v", err)
	}
}

func TestDoorbellsNeedNoReplyFlag(t *testing.T) {
	db := make([]byte, DoorbellSize)
	Doorbell(db).SetHandle(FirstQPN)
	Doorbell(db).SetProducer(42)
	m, err := DecodeRequest(request(OpDBSQ, FlagNoReply, 0, db))
	if err != nil {
		t.Fatal(err)
	}
	if Doorbell(m.Body).Handle() != FirstQPN || Doorbell(m.Body).Producer() != 42 {
		t.Errorf("doorbell body %x", m.Body)
	}
	if _, ok := ReplyStatus(m, nil); ok {
		t.Error("a doorbell must never be answered")
	}
	if _, err := DecodeRequest(request(OpDBSQ, 0, 3, db)); !errors.Is(err, ErrBadFlags) {
		t.Errorf("doorbell without FlagNoReply: %v", err)
	}
	if _, err := DecodeRequest(request(OpCreatePD, FlagNoReply, 3, make([]byte, HandleReqSize))); !errors.Is(err, ErrBadFlags) {
		t.Errorf("request with FlagNoReply: %v", err)
	}
}

func TestReplyRoundTrip(t *testing.T) {
	req := request(OpQueryQP, 0, 77, make([]byte, HandleReqSize))
	body := make([]byte, QPAttrSize)
	QPAttr(body).SetQPState(QPSRTS)
	f := AppendReply(nil, testMAC, Hdr(req), StatusOK, body)
	p, _ := ControlPayload(f)
	m, err := DecodeFromNIC(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Hdr.ReqID() != 77 || m.Hdr.Instance() != 0xfeedface || m.Hdr.Flags() != FlagReply {
		t.Errorf("reply header does not answer the request")
	}
	if QPAttr(m.Body).QPState() != QPSRTS {
		t.Errorf("reply body state %d", QPAttr(m.Body).QPState())
	}
	// An error reply carries no body, whatever the caller passed.
	f = AppendReply(nil, testMAC, Hdr(req), StatusBadHandle, body)
	p, _ = ControlPayload(f)
	if m, err = DecodeFromNIC(p); err != nil || len(m.Body) != 0 || m.Hdr.Status() != StatusBadHandle {
		t.Errorf("error reply: %v, body %d, status %v", err, len(m.Body), m.Hdr.Status())
	}
}

func TestEventRoundTrip(t *testing.T) {
	f := AppendEvent(nil, testMAC, 5, OpEvCQComp, 9, 0, 0)
	p, _ := ControlPayload(f)
	m, err := DecodeFromNIC(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Hdr.Opcode() != OpEvCQComp || Event(m.Body).Handle() != 9 || m.Hdr.ReqID() != 0 {
		t.Errorf("event decoded as %v handle %d", m.Hdr.Opcode(), Event(m.Body).Handle())
	}
	bad := AppendFrame(nil, testMAC, HdrFields{Opcode: OpCreatePD, Flags: FlagEvent}, make([]byte, EventSize))
	p, _ = ControlPayload(bad)
	if _, err := DecodeFromNIC(p); !errors.Is(err, ErrBadFlags) {
		t.Errorf("request opcode as event: %v", err)
	}
}

func pbl(levels uint8, npages uint32, root uint64) []byte {
	b := make([]byte, PBLSize)
	p := PBL(b)
	p.SetLevels(levels)
	p.SetNpages(npages)
	p.SetRoot(root)
	p.SetPageShift(PageShift)
	return b
}

func TestPBLCheck(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want Status
	}{
		{"one leaf", pbl(1, 512, 0x1000), StatusOK},
		{"one leaf too many", pbl(1, 513, 0x1000), StatusBadParam},
		{"two levels", pbl(2, 513, 0x2000), StatusOK},
		{"two levels max", pbl(2, MaxPBLPages, 0x2000), StatusOK},
		{"two levels too many", pbl(2, MaxPBLPages+1, 0x2000), StatusBadParam},
		{"empty", pbl(1, 0, 0x1000), StatusBadParam},
		{"three levels", pbl(3, 4, 0x1000), StatusBadParam},
		{"unaligned root", pbl(1, 4, 0x1008), StatusBadGPA},
	}
	for _, tc := range tests {
		if got := PBL(tc.b).Check(); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	b := pbl(1, 1, 0x1000)
	PBL(b).SetPageShift(21)
	if PBL(b).Check() != StatusBadParam {
		t.Error("page shift other than 12 accepted")
	}
}

func ring(slots, log2 uint32, npages uint32) Ring {
	b := make([]byte, RingSize)
	r := Ring(b)
	copy(r.PBL(), pbl(1, npages, 0x4000))
	r.SetSlots(slots)
	r.SetLog2ElemSize(log2)
	return r
}

func TestRingCheck(t *testing.T) {
	// 256 CQEs of 64 bytes + 384 header = 16768 bytes = 5 pages.
	if got := ring(256, 6, 5).Check(CQESize); got != StatusOK {
		t.Errorf("good ring: %v", got)
	}
	if got := ring(256, 6, 4).Check(CQESize); got != StatusBadParam {
		t.Errorf("ring larger than its pages: %v", got)
	}
	if got := ring(255, 6, 5).Check(CQESize); got != StatusBadParam {
		t.Errorf("slots not a power of two: %v", got)
	}
	if got := ring(256, 5, 5).Check(CQESize); got != StatusBadParam {
		t.Errorf("32-byte slots for 48-byte CQEs: %v", got)
	}
	if got := ring(1, 6, 1).Check(CQESize); got != StatusBadParam {
		t.Errorf("single-slot ring: %v", got)
	}
}

func TestRegMRCheck(t *testing.T) {
	b := make([]byte, RegMRSize)
	m := RegMR(b)
	m.SetMR(1)
	m.SetPD(1)
	m.SetLKey(0x100)
	m.SetRKey(0x100)
	m.SetIOVA(0x7f0000001010)
	m.SetLength(8192)
	m.SetFirstOffset(0x10)
	m.SetAccess(AccessLocalWrite | AccessRemoteWrite)
	copy(m.PBL(), pbl(1, 3, 0x8000))
	if got := m.Check(); got != StatusOK {
		t.Fatalf("good MR: %v", got)
	}
	m.SetLength(3*PageSize - 0x10 + 1)
	if got := m.Check(); got != StatusBadParam {
		t.Errorf("MR beyond its pages: %v", got)
	}
	m.SetLength(8192)
	m.SetAccess(0x20)
	if got := m.Check(); got != StatusBadAccess {
		t.Errorf("unknown access bit: %v", got)
	}
	m.SetAccess(AccessLocalWrite)
	m.SetIOVA(^uint64(0) - 10)
	if got := m.Check(); got != StatusBadParam {
		t.Errorf("iova wrap: %v", got)
	}
}

func TestCreateQPCheck(t *testing.T) {
	b := make([]byte, CreateQPSize)
	c := CreateQP(b)
	c.SetQP(FirstQPN)
	c.SetPD(1)
	c.SetSendCQ(1)
	c.SetRecvCQ(2)
	c.SetType(QPTypeRC)
	copy(c.SQ(), ring(128, 8, 9)) // 208-byte WQE + 3 SGEs fits 256
	c.SQ().SetMaxSGE(3)
	copy(c.RQ(), ring(128, 6, 3)) // 40-byte WQE + 1 SGE fits 64
	c.RQ().SetMaxSGE(1)
	if got := c.Check(); got != StatusOK {
		t.Fatalf("good QP: %v", got)
	}
	c.SQ().SetMaxSGE(4)
	if got := c.Check(); got != StatusBadParam {
		t.Errorf("SGEs overflow the SQ slot: %v", got)
	}
	c.SQ().SetMaxSGE(3)
	c.SetSRQ(1)
	if got := c.Check(); got != StatusBadParam {
		t.Errorf("SRQ with an RQ ring: %v", got)
	}
	clear(c.RQ())
	if got := c.Check(); got != StatusOK {
		t.Errorf("SRQ without RQ: %v", got)
	}
	c.SetType(1)
	if got := c.Check(); got != StatusBadParam {
		t.Errorf("QP type 1: %v", got)
	}
	c.SetType(QPTypeUD)
	c.SetQP(FirstQPN - 1)
	if got := c.Check(); got != StatusBadHandle {
		t.Errorf("QPN below FirstQPN: %v", got)
	}
	// GSI is QP1, and only a kernel QP.
	c.SetType(QPTypeGSI)
	c.SetQP(GSIQPN)
	if got := c.Check(); got != StatusBadParam {
		t.Errorf("user GSI QP: %v", got)
	}
	c.SetFlags(QPFlagKernel)
	if got := c.Check(); got != StatusOK {
		t.Errorf("kernel GSI QP: %v", got)
	}
	c.SetQP(FirstQPN)
	if got := c.Check(); got != StatusBadParam {
		t.Errorf("GSI QP not numbered 1: %v", got)
	}
	c.SetType(QPTypeUD)
	c.SetQP(GSIQPN)
	if got := c.Check(); got != StatusBadHandle {
		t.Errorf("UD QP numbered 1: %v", got)
	}
	c.SetQP(FirstQPN)
	c.SetFlags(2)
	if got := c.Check(); got != StatusBadParam {
		t.Errorf("unknown QP flag: %v", got)
	}
}

func TestQPAttrCheck(t *testing.T) {
	b := make([]byte, QPAttrSize)
	q := QPAttr(b)
	q.SetQP(FirstQPN)
	q.SetAttrMask(QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN)
	q.SetQPState(QPSRTR)
	q.SetPathMTU(3)
	q.SetDestQPNum(0x11)
	q.SetRQPSN(0xabcdef)
	q.AV().SetPortNum(1)
	q.AV().SetNetworkType(NetworkIPv4)
	if got := q.Check(); got != StatusOK {
		t.Fatalf("good modify: %v", got)
	}
	q.SetRQPSN(1 << 24)
	if got := q.Check(); got != StatusBadParam {
		t.Errorf("25-bit PSN: %v", got)
	}
	q.SetRQPSN(0)
	q.AV().SetNetworkType(0)
	if got := q.Check(); got != StatusBadParam {
		t.Errorf("AV without network type: %v", got)
	}
	q.SetAttrMask(1 << 14) // ALT_PATH: not supported
	if got := q.Check(); got != StatusBadParam {
		t.Errorf("unsupported mask bit: %v", got)
	}
}
