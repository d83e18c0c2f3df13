package rdmauapi

// Views of the Soft-RoCE user ABI (<rdma/rdma_user_rxe.h>,
// <rdma/ib_user_verbs.h>): the ring elements librxe writes (send and receive
// WQEs) and the NIC writes (CQEs). The NIC reads these from guest memory at
// the ring addresses of CREATE_QP/CREATE_SRQ/CREATE_CQ. All fields are
// host-endian (little-endian on x86) except the immediate data, which is in
// network order and copied as is. layout_test.go checks the offsets against gcc.

// SendWQE is a view of struct rxe_send_wqe (SendWQESize bytes) followed by
// its SGEs (DMA().SGE(i)) or inline data (DMA().Inline()).
type SendWQE []byte

// WRID returns wr.wr_id.
func (v SendWQE) WRID() uint64 { return le.Uint64(v[0:]) }

// WROpcode returns wr.opcode (IB_UVERBS_WR_*).
func (v SendWQE) WROpcode() uint32 { return le.Uint32(v[12:]) }

// SendFlags returns wr.send_flags (SendFlag*).
func (v SendWQE) SendFlags() uint32 { return le.Uint32(v[16:]) }

// Imm returns wr.ex.imm_data (network order) or invalidate_rkey, 4 bytes.
func (v SendWQE) Imm() []byte { return v[20:24:24] }

// RemoteAddr returns wr.wr.rdma.remote_addr (also atomic.remote_addr).
func (v SendWQE) RemoteAddr() uint64 { return le.Uint64(v[24:]) }

// RDMARKey returns wr.wr.rdma.rkey.
func (v SendWQE) RDMARKey() uint32 { return le.Uint32(v[32:]) }

// CompareAdd returns wr.wr.atomic.compare_add.
func (v SendWQE) CompareAdd() uint64 { return le.Uint64(v[32:]) }

// Swap returns wr.wr.atomic.swap.
func (v SendWQE) Swap() uint64 { return le.Uint64(v[40:]) }

// AtomicRKey returns wr.wr.atomic.rkey.
func (v SendWQE) AtomicRKey() uint32 { return le.Uint32(v[48:]) }

// RemoteQPN returns wr.wr.ud.remote_qpn.
func (v SendWQE) RemoteQPN() uint32 { return le.Uint32(v[24:]) }

// RemoteQKey returns wr.wr.ud.remote_qkey.
func (v SendWQE) RemoteQKey() uint32 { return le.Uint32(v[28:]) }

// PKeyIndex returns wr.wr.ud.pkey_index.
func (v SendWQE) PKeyIndex() uint16 { return le.Uint16(v[32:]) }

// AHNum returns wr.wr.ud.ah_num: the AH handle of CREATE_AH (0: use UDAV).
func (v SendWQE) AHNum() uint32 { return le.Uint32(v[36:]) }

// UDAV returns wr.wr.ud.av, the address vector librxe may copy in.
func (v SendWQE) UDAV() RxeAV { return RxeAV(v[56 : 56+RxeAVSize]) }

// IOVA returns iova.
func (v SendWQE) IOVA() uint64 { return le.Uint64(v[152:]) }

// DMA returns the dma info and everything after it.
func (v SendWQE) DMA() DMAInfo { return DMAInfo(v[184:]) }

// RecvWQE is a view of struct rxe_recv_wqe (RecvWQESize bytes) and its SGEs.
type RecvWQE []byte

// WRID returns wr_id.
func (v RecvWQE) WRID() uint64 { return le.Uint64(v[0:]) }

// DMA returns the dma info and everything after it.
func (v RecvWQE) DMA() DMAInfo { return DMAInfo(v[16:]) }

// DMAInfoSize is sizeof(struct rxe_dma_info) without the flexible array.
const DMAInfoSize = 24

// DMAInfo is a view of struct rxe_dma_info followed by SGEs or inline data.
type DMAInfo []byte

// Length returns length (total bytes of the WQE).
func (v DMAInfo) Length() uint32 { return le.Uint32(v[0:]) }

// Resid returns resid.
func (v DMAInfo) Resid() uint32 { return le.Uint32(v[4:]) }

// CurSGE returns cur_sge.
func (v DMAInfo) CurSGE() uint32 { return le.Uint32(v[8:]) }

// NumSGE returns num_sge.
func (v DMAInfo) NumSGE() uint32 { return le.Uint32(v[12:]) }

// SGEOffset returns sge_offset.
func (v DMAInfo) SGEOffset() uint32 { return le.Uint32(v[16:]) }

// SGE returns SGE i, or nil when it lies beyond the view.
func (v DMAInfo) SGE(i int) SGE {
	o := DMAInfoSize + i*SGESize
	if i < 0 || o+SGESize > len(v) {
		return nil
	}
	return SGE(v[o : o+SGESize : o+SGESize])
}

// Inline returns the inline data area (up to the end of the view).
func (v DMAInfo) Inline() []byte { return v[DMAInfoSize:] }

// SGE is a view of struct rxe_sge.
type SGE []byte

// Addr returns addr.
func (v SGE) Addr() uint64 { return le.Uint64(v[0:]) }

// Length returns length.
func (v SGE) Length() uint32 { return le.Uint32(v[8:]) }

// LKey returns lkey.
func (v SGE) LKey() uint32 { return le.Uint32(v[12:]) }

// RxeAVSize is sizeof(struct rxe_av).
const RxeAVSize = 88

// RxeAV is a view of struct rxe_av.
type RxeAV []byte

// PortNum returns port_num.
func (v RxeAV) PortNum() uint8 { return v[0] }

// NetworkType returns network_type (NetworkIPv4 or NetworkIPv6).
func (v RxeAV) NetworkType() uint8 { return v[1] }

// DMAC returns dmac.
func (v RxeAV) DMAC() []byte { return v[2:8:8] }

// DGID returns grh.dgid.
func (v RxeAV) DGID() []byte { return v[8:24:24] }

// FlowLabel returns grh.flow_label.
func (v RxeAV) FlowLabel() uint32 { return le.Uint32(v[24:]) }

// SGIDIndex returns grh.sgid_index.
func (v RxeAV) SGIDIndex() uint8 { return v[28] }

// HopLimit returns grh.hop_limit.
func (v RxeAV) HopLimit() uint8 { return v[29] }

// TrafficClass returns grh.traffic_class.
func (v RxeAV) TrafficClass() uint8 { return v[30] }

// SGIDAddr returns sgid_addr, a struct sockaddr_in (family AF_INET, address
// at byte 4) or sockaddr_in6 (AF_INET6, address at byte 8): where a kernel
// QP's inline AV carries the source GID.
func (v RxeAV) SGIDAddr() []byte { return v[32:60:60] }

// CQE is a view of struct ib_uverbs_wc, the element of a CQ ring.
type CQE []byte

// SetWRID sets wr_id.
func (v CQE) SetWRID(x uint64) { le.PutUint64(v[0:], x) }

// SetStatus sets status (WCStatus*).
func (v CQE) SetStatus(x uint32) { le.PutUint32(v[8:], x) }

// SetOpcode sets opcode (WCOpcode*).
func (v CQE) SetOpcode(x uint32) { le.PutUint32(v[12:], x) }

// SetVendorErr sets vendor_err.
func (v CQE) SetVendorErr(x uint32) { le.PutUint32(v[16:], x) }

// SetByteLen sets byte_len.
func (v CQE) SetByteLen(x uint32) { le.PutUint32(v[20:], x) }

// SetImm copies 4 bytes of immediate data (network order) or the
// invalidated rkey.
func (v CQE) SetImm(b []byte) { copy(v[24:28], b) }

// SetQPNum sets qp_num.
func (v CQE) SetQPNum(x uint32) { le.PutUint32(v[28:], x) }

// SetSrcQP sets src_qp.
func (v CQE) SetSrcQP(x uint32) { le.PutUint32(v[32:], x) }

// SetWCFlags sets wc_flags (WCFlag*).
func (v CQE) SetWCFlags(x uint32) { le.PutUint32(v[36:], x) }

// SetPKeyIndex sets pkey_index.
func (v CQE) SetPKeyIndex(x uint16) { le.PutUint16(v[40:], x) }

// SetPortNum sets port_num.
func (v CQE) SetPortNum(x uint8) { v[46] = x }

// WRID returns wr_id.
func (v CQE) WRID() uint64 { return le.Uint64(v[0:]) }

// Status returns status.
func (v CQE) Status() uint32 { return le.Uint32(v[8:]) }

// Opcode returns opcode.
func (v CQE) Opcode() uint32 { return le.Uint32(v[12:]) }

// ByteLen returns byte_len.
func (v CQE) ByteLen() uint32 { return le.Uint32(v[20:]) }

// QPNum returns qp_num.
func (v CQE) QPNum() uint32 { return le.Uint32(v[28:]) }

// Work request opcodes (enum ib_uverbs_wr_opcode).
const (
	WRRDMAWrite        = 0
	WRRDMAWriteWithImm = 1
	WRSend             = 2
	WRSendWithImm      = 3
	WRRDMARead         = 4
	WRAtomicCmpAndSwp  = 5
	WRAtomicFetchAdd   = 6
	WRLocalInv         = 7
	WRBindMW           = 8
	WRSendWithInv      = 9
)

// Send flags (enum ibv_send_flags / IB_SEND_*).
const (
	SendFlagFence     = 1 << 0
	SendFlagSignaled  = 1 << 1
	SendFlagSolicited = 1 << 2
	SendFlagInline    = 1 << 3
)

// Completion opcodes (enum ib_uverbs_wc_opcode; receive ones from the
// kernel's enum ib_wc_opcode, IB_WC_RECV = 1 << 7).
const (
	WCSend            = 0
	WCRDMAWrite       = 1
	WCRDMARead        = 2
	WCCompSwap        = 3
	WCFetchAdd        = 4
	WCBindMW          = 5
	WCLocalInv        = 6
	WCRecv            = 128
	WCRecvRDMAWithImm = 129
)

// Completion statuses (enum ib_wc_status).
const (
	WCSuccess        = 0
	WCLocLenErr      = 1
	WCLocQPOpErr     = 2
	WCLocProtErr     = 4
	WCWRFlushErr     = 5
	WCBadRespErr     = 7
	WCLocAccessErr   = 8
	WCRemInvReqErr   = 9
	WCRemAccessErr   = 10
	WCRemOpErr       = 11
	WCRetryExcErr    = 12
	WCRNRRetryExcErr = 13
	WCFatalErr       = 19
	WCRespTimeoutErr = 20
	WCGeneralErr     = 21
)

// Completion flags (enum ib_wc_flags).
const (
	WCFlagGRH     = 1 << 0
	WCFlagWithImm = 1 << 1
	WCFlagWithInv = 1 << 2
)

// RingHeader is a view of the 384-byte struct rxe_queue_buf header.
type RingHeader []byte

// Producer returns producer_index.
func (v RingHeader) Producer() uint32 { return le.Uint32(v[RingProducerOff:]) }

// SetProducer sets producer_index.
func (v RingHeader) SetProducer(x uint32) { le.PutUint32(v[RingProducerOff:], x) }

// Consumer returns consumer_index.
func (v RingHeader) Consumer() uint32 { return le.Uint32(v[RingConsumerOff:]) }

// SetConsumer sets consumer_index.
func (v RingHeader) SetConsumer(x uint32) { le.PutUint32(v[RingConsumerOff:], x) }

// SlotOffset returns the byte offset of slot i in a ring of slots elements
// of 1<<log2 bytes (the index is masked, as the uapi requires).
func SlotOffset(i, slots, log2 uint32) uint64 {
	return RingHdrSize + uint64(i&(slots-1))<<log2
}
