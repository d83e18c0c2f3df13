package rdmauapi

import "testing"

// FuzzDecode feeds arbitrary payloads to both decoders and to the body
// checks of whatever they accept: nothing may panic, and an accepted
// message's body must have exactly the size its opcode's row says.
func FuzzDecode(f *testing.F) {
	seed := func(op Opcode, flags Flags, id uint32, n int) {
		f.Add(request(op, flags, id, make([]byte, n)))
	}
	for op, r := range Table {
		switch r.Kind {
		case KindRequest:
			seed(op, 0, 1, r.ReqSize)
		case KindDoorbell:
			seed(op, FlagNoReply, 0, r.ReqSize)
		}
	}
	f.Add(request(OpQueryQP, FlagReply, 3, make([]byte, QPAttrSize)))
	p, _ := ControlPayload(AppendEvent(nil, testMAC, 1, OpEvPort, 1, 4, 0))
	f.Add(p)
	for _, b := range driverRequests(f) {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, HdrSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := DecodeRequest(b); err == nil {
			if len(m.Body) != m.Info.ReqSize {
				t.Fatalf("%v: body %d bytes, row says %d", m.Hdr.Opcode(), len(m.Body), m.Info.ReqSize)
			}
			checkBody(m)
		} else {
			ReplyStatus(m, err)
		}
		if m, err := DecodeFromNIC(b); err == nil {
			if m.Hdr.Flags() == FlagEvent && len(m.Body) != EventSize {
				t.Fatalf("event body %d bytes", len(m.Body))
			}
		}
	})
}

// checkBody runs the structural check of a request body, as the NIC would.
func checkBody(m Msg) {
	switch m.Hdr.Opcode() {
	case OpRegMR:
		RegMR(m.Body).Check()
	case OpAllocMR:
		AllocMR(m.Body).Check()
	case OpArmCQ:
		ArmCQ(m.Body).Check()
	case OpCreateCQ:
		CreateCQ(m.Body).Check()
	case OpCreateQP:
		CreateQP(m.Body).Check()
	case OpCreateSRQ:
		CreateSRQ(m.Body).Check()
	case OpModifyQP:
		QPAttr(m.Body).Check()
	case OpCreateAH:
		CreateAH(m.Body).AV().Check()
	}
}
