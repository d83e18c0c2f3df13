package rdmauapi

import (
	"bytes"
	"testing"
)

// rxeFields ties each accessor of rxe.go to a field of the C ABI: the test
// writes a pattern where gcc says the field is and reads it back through the
// Go view.
var rxeFields = []struct {
	c, field string
	size     int
	get      func(b []byte) uint64
}{
	{"rxe_send_wqe", "wr.wr_id", 8, func(b []byte) uint64 { return SendWQE(b).WRID() }},
	{"rxe_send_wqe", "wr.opcode", 4, func(b []byte) uint64 { return uint64(SendWQE(b).WROpcode()) }},
	{"rxe_send_wqe", "wr.send_flags", 4, func(b []byte) uint64 { return uint64(SendWQE(b).SendFlags()) }},
	{"rxe_send_wqe", "wr.ex.imm_data", 4, func(b []byte) uint64 { return uint64(le.Uint32(SendWQE(b).Imm())) }},
	{"rxe_send_wqe", "wr.wr.rdma.remote_addr", 8, func(b []byte) uint64 { return SendWQE(b).RemoteAddr() }},
	{"rxe_send_wqe", "wr.wr.rdma.rkey", 4, func(b []byte) uint64 { return uint64(SendWQE(b).RDMARKey()) }},
	{"rxe_send_wqe", "wr.wr.atomic.remote_addr", 8, func(b []byte) uint64 { return SendWQE(b).RemoteAddr() }},
	{"rxe_send_wqe", "wr.wr.atomic.compare_add", 8, func(b []byte) uint64 { return SendWQE(b).CompareAdd() }},
	{"rxe_send_wqe", "wr.wr.atomic.swap", 8, func(b []byte) uint64 { return SendWQE(b).Swap() }},
	{"rxe_send_wqe", "wr.wr.atomic.rkey", 4, func(b []byte) uint64 { return uint64(SendWQE(b).AtomicRKey()) }},
	{"rxe_send_wqe", "wr.wr.ud.remote_qpn", 4, func(b []byte) uint64 { return uint64(SendWQE(b).RemoteQPN()) }},
	{"rxe_send_wqe", "wr.wr.ud.remote_qkey", 4, func(b []byte) uint64 { return uint64(SendWQE(b).RemoteQKey()) }},
	{"rxe_send_wqe", "wr.wr.ud.pkey_index", 2, func(b []byte) uint64 { return uint64(SendWQE(b).PKeyIndex()) }},
	{"rxe_send_wqe", "wr.wr.ud.ah_num", 4, func(b []byte) uint64 { return uint64(SendWQE(b).AHNum()) }},
	{"rxe_send_wqe", "wr.wr.ud.av.port_num", 1, func(b []byte) uint64 { return uint64(SendWQE(b).UDAV().PortNum()) }},
	{"rxe_send_wqe", "wr.wr.ud.av.grh.flow_label", 4, func(b []byte) uint64 { return uint64(SendWQE(b).UDAV().FlowLabel()) }},
	{"rxe_send_wqe", "iova", 8, func(b []byte) uint64 { return SendWQE(b).IOVA() }},
	{"rxe_send_wqe", "dma.length", 4, func(b []byte) uint64 { return uint64(SendWQE(b).DMA().Length()) }},
	{"rxe_send_wqe", "dma.num_sge", 4, func(b []byte) uint64 { return uint64(SendWQE(b).DMA().NumSGE()) }},
	{"rxe_send_wqe", "dma.sge[1].addr", 8, func(b []byte) uint64 { return SendWQE(b).DMA().SGE(1).Addr() }},
	{"rxe_send_wqe", "dma.sge[1].length", 4, func(b []byte) uint64 { return uint64(SendWQE(b).DMA().SGE(1).Length()) }},
	{"rxe_send_wqe", "dma.sge[1].lkey", 4, func(b []byte) uint64 { return uint64(SendWQE(b).DMA().SGE(1).LKey()) }},
	{"rxe_send_wqe", "dma.inline_data[3]", 1, func(b []byte) uint64 { return uint64(SendWQE(b).DMA().Inline()[3]) }},
	{"rxe_recv_wqe", "wr_id", 8, func(b []byte) uint64 { return RecvWQE(b).WRID() }},
	{"rxe_recv_wqe", "dma.resid", 4, func(b []byte) uint64 { return uint64(RecvWQE(b).DMA().Resid()) }},
	{"rxe_recv_wqe", "dma.cur_sge", 4, func(b []byte) uint64 { return uint64(RecvWQE(b).DMA().CurSGE()) }},
	{"rxe_recv_wqe", "dma.sge_offset", 4, func(b []byte) uint64 { return uint64(RecvWQE(b).DMA().SGEOffset()) }},
	{"rxe_recv_wqe", "dma.sge[0].addr", 8, func(b []byte) uint64 { return RecvWQE(b).DMA().SGE(0).Addr() }},
	{"rxe_av", "network_type", 1, func(b []byte) uint64 { return uint64(RxeAV(b).NetworkType()) }},
	{"rxe_av", "dmac[5]", 1, func(b []byte) uint64 { return uint64(RxeAV(b).DMAC()[5]) }},
	{"rxe_av", "grh.dgid.raw[15]", 1, func(b []byte) uint64 { return uint64(RxeAV(b).DGID()[15]) }},
	{"rxe_av", "grh.sgid_index", 1, func(b []byte) uint64 { return uint64(RxeAV(b).SGIDIndex()) }},
	{"rxe_av", "grh.hop_limit", 1, func(b []byte) uint64 { return uint64(RxeAV(b).HopLimit()) }},
	{"rxe_av", "grh.traffic_class", 1, func(b []byte) uint64 { return uint64(RxeAV(b).TrafficClass()) }},
	{"rxe_av", "sgid_addr._sockaddr_in.sin_family", 2, func(b []byte) uint64 { return uint64(le.Uint16(RxeAV(b).SGIDAddr())) }},
	{"rxe_av", "sgid_addr._sockaddr_in.sin_addr", 4, func(b []byte) uint64 { return uint64(le.Uint32(RxeAV(b).SGIDAddr()[4:])) }},
	{"rxe_av", "sgid_addr._sockaddr_in6.sin6_addr.s6_addr[15]", 1, func(b []byte) uint64 { return uint64(RxeAV(b).SGIDAddr()[8+15]) }},
	{"ib_uverbs_wc", "wr_id", 8, func(b []byte) uint64 { return CQE(b).WRID() }},
	{"ib_uverbs_wc", "status", 4, func(b []byte) uint64 { return uint64(CQE(b).Status()) }},
	{"ib_uverbs_wc", "opcode", 4, func(b []byte) uint64 { return uint64(CQE(b).Opcode()) }},
	{"ib_uverbs_wc", "byte_len", 4, func(b []byte) uint64 { return uint64(CQE(b).ByteLen()) }},
	{"ib_uverbs_wc", "qp_num", 4, func(b []byte) uint64 { return uint64(CQE(b).QPNum()) }},
}

// rxeConsts are ABI numbers mirrored in rxe.go.
var rxeConsts = []struct {
	c   string
	val int
}{
	{"sizeof(struct rxe_av)", RxeAVSize},
	{"sizeof(struct rxe_dma_info)", DMAInfoSize},
	{"IB_UVERBS_WR_RDMA_WRITE", WRRDMAWrite},
	{"IB_UVERBS_WR_RDMA_WRITE_WITH_IMM", WRRDMAWriteWithImm},
	{"IB_UVERBS_WR_SEND", WRSend},
	{"IB_UVERBS_WR_SEND_WITH_IMM", WRSendWithImm},
	{"IB_UVERBS_WR_RDMA_READ", WRRDMARead},
	{"IB_UVERBS_WR_ATOMIC_CMP_AND_SWP", WRAtomicCmpAndSwp},
	{"IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD", WRAtomicFetchAdd},
	{"IB_UVERBS_WR_LOCAL_INV", WRLocalInv},
	{"IB_UVERBS_WR_BIND_MW", WRBindMW},
	{"IB_UVERBS_WR_SEND_WITH_INV", WRSendWithInv},
	{"IB_UVERBS_WC_SEND", WCSend},
	{"IB_UVERBS_WC_RDMA_WRITE", WCRDMAWrite},
	{"IB_UVERBS_WC_RDMA_READ", WCRDMARead},
	{"IB_UVERBS_WC_COMP_SWAP", WCCompSwap},
	{"IB_UVERBS_WC_FETCH_ADD", WCFetchAdd},
	{"IB_UVERBS_WC_BIND_MW", WCBindMW},
	{"IB_UVERBS_WC_LOCAL_INV", WCLocalInv},
	{"RXE_NETWORK_TYPE_IPV4", NetworkIPv4},
	{"RXE_NETWORK_TYPE_IPV6", NetworkIPv6},
}

func TestRxeViewsMatchGCC(t *testing.T) {
	facts := cFacts(t)
	for _, r := range rxeFields {
		name := r.c + "." + r.field
		off, ok := facts[name]
		if !ok {
			t.Errorf("%s: no C fact", name)
			continue
		}
		if got := facts[name+".size"]; got != r.size {
			t.Errorf("%s: %d bytes in C, %d in the table", name, got, r.size)
		}
		b := make([]byte, off+r.size+SendWQESize) // views may slice whole structs
		pattern := bytes.Repeat([]byte{0xA5}, r.size)
		copy(b[off:], pattern)
		want := uint64(0)
		for i := 0; i < r.size; i++ {
			want |= 0xA5 << (8 * i)
		}
		if got := r.get(b); got != want {
			t.Errorf("%s at C offset %d: Go view reads %#x, want %#x", name, off, got, want)
		}
	}
	for _, x := range rxeConsts {
		if got, ok := facts[x.c]; !ok || got != x.val {
			t.Errorf("%s = %d in C, %d in Go", x.c, got, x.val)
		}
	}
}

func TestCQESettersRoundTrip(t *testing.T) {
	b := make([]byte, CQESize)
	c := CQE(b)
	c.SetWRID(0x1122334455667788)
	c.SetStatus(WCRemAccessErr)
	c.SetOpcode(WCRecv)
	c.SetByteLen(4096)
	c.SetQPNum(17)
	if c.WRID() != 0x1122334455667788 || c.Status() != WCRemAccessErr || c.Opcode() != WCRecv ||
		c.ByteLen() != 4096 || c.QPNum() != 17 {
		t.Errorf("CQE round trip: % x", b)
	}
}

func TestSlotOffsetMasksIndex(t *testing.T) {
	if got := SlotOffset(5, 4, 6); got != RingHdrSize+1*64 {
		t.Errorf("slot 5 of 4: offset %d, want %d", got, RingHdrSize+64)
	}
	if got := SlotOffset(0xffffffff, 512, 8); got != RingHdrSize+511*256 {
		t.Errorf("free-running index: offset %d", got)
	}
}

func TestDMAInfoSGEBounds(t *testing.T) {
	d := DMAInfo(make([]byte, DMAInfoSize+2*SGESize))
	if d.SGE(1) == nil || d.SGE(2) != nil || d.SGE(-1) != nil {
		t.Error("SGE must return nil beyond the view")
	}
}
