package rdmauapi

import "testing"

// BenchmarkDecodeDoorbell measures the NIC's per-doorbell decode cost.
func BenchmarkDecodeDoorbell(b *testing.B) {
	db := make([]byte, DoorbellSize)
	Doorbell(db).SetHandle(FirstQPN)
	p := request(OpDBSQ, FlagNoReply, 0, db)
	b.ReportAllocs()
	for b.Loop() {
		m, err := DecodeRequest(p)
		if err != nil || Doorbell(m.Body).Handle() != FirstQPN {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeCheckCreateQP measures decoding and checking a recorded
// CREATE_QP from the driver.
func BenchmarkDecodeCheckCreateQP(b *testing.B) {
	var p []byte
	for _, r := range driverRequests(b) {
		if Hdr(r).Opcode() == OpCreateQP {
			p = r
			break
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		m, err := DecodeRequest(p)
		if err != nil || CreateQP(m.Body).Check() != StatusOK {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendReply measures building a reply frame into a reused buffer.
func BenchmarkAppendReply(b *testing.B) {
	req := request(OpQueryQP, 0, 9, make([]byte, HandleReqSize))
	body := make([]byte, QPAttrSize)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendReply(buf[:0], testMAC, Hdr(req), StatusOK, body)
	}
}
