package verbs

import "encoding/binary"

var le = binary.LittleEndian

// The Soft-RoCE user ABI (<rdma/rdma_user_rxe.h>, <rdma/ib_user_verbs.h>)
// that stock librxe writes into the shared rings. Offsets were checked with
// gcc's offsetof against Debian 12's linux-libc-dev headers.

// Sizes of the ring elements' fixed parts.
const (
	SendWQESize = 208 // struct rxe_send_wqe (SGEs or inline data follow)
	RecvWQESize = 40  // struct rxe_recv_wqe (SGEs follow)
	SGESize     = 16  // struct rxe_sge
	WCSize      = 48  // struct ib_uverbs_wc
	RingHdrSize = 384 // struct rxe_queue_buf
	avSize      = 88  // struct rxe_av
)

// struct rxe_queue_buf field offsets.
const (
	ringProducerOff = 128
	ringConsumerOff = 256
)

// Send work request opcodes (IB_UVERBS_WR_*).
const (
	WRWrite    = 0
	WRWriteImm = 1
	WRSend     = 2
	WRSendImm  = 3
	WRRead     = 4
	WRCmpSwap  = 5
	WRFetchAdd = 6
	WRLocalInv = 7
	WRBindMW   = 8
	WRSendInv  = 9
	// WRRegMR is IB_WR_REG_MR, a kernel-only opcode (fast registration of
	// an MR allocated with AllocMR; see frwr.go).
	WRRegMR        = 0x20
	numWROpcodes   = WRRegMR + 1
	sendFlagFence  = 1 << 0
	sendFlagSignal = 1 << 1
	sendFlagSolic  = 1 << 2
	sendFlagInline = 1 << 3
)

// Work completion opcodes (IB_UVERBS_WC_*, receive ones from ib_wc_opcode).
const (
	WCSend        = 0
	WCWrite       = 1
	WCRead        = 2
	WCCmpSwap     = 3
	WCFetchAdd    = 4
	WCLocalInv    = 6 // IB_WC_LOCAL_INV
	WCRegMR       = 8 // IB_WC_REG_MR (kernel CQs only)
	WCRecv        = 128
	WCRecvRDMAImm = 129
)

// Work completion flags.
const (
	WCFlagGRH     = 1 << 0
	WCFlagWithImm = 1 << 1
	WCFlagWithInv = 1 << 2 // IB_WC_WITH_INVALIDATE: ex holds the invalidated rkey
)

// WCStatus is a completion status, the IBV_WC_* values.
type WCStatus uint32

// Completion statuses.
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocProtErr     WCStatus = 4
	WCFlushErr       WCStatus = 5
	WCMWBindErr      WCStatus = 6
	WCBadRespErr     WCStatus = 7
	WCLocAccessErr   WCStatus = 8
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
	WCFatalErr       WCStatus = 19
	WCGeneralErr     WCStatus = 21
)

var wcStatusNames = map[WCStatus]string{
	WCSuccess: "success", WCLocLenErr: "local-length", WCLocQPOpErr: "local-qp-op", WCLocProtErr: "local-protection",
	WCFlushErr: "flush", WCMWBindErr: "mw-bind", WCBadRespErr: "bad-response", WCLocAccessErr: "local-access", WCRemInvReqErr: "remote-invalid-request",
	WCRemAccessErr: "remote-access", WCRemOpErr: "remote-op", WCRetryExcErr: "retry-exceeded",
	WCRNRRetryExcErr: "rnr-retry-exceeded", WCFatalErr: "fatal", WCGeneralErr: "general",
}

// String names the status.
func (s WCStatus) String() string {
	if n, ok := wcStatusNames[s]; ok {
		return n
	}
	return "WCStatus(" + itoa(int(s)) + ")"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// SendWQE is a view of struct rxe_send_wqe followed by its SGEs or inline
// data.
type SendWQE []byte

// WRID returns wr.wr_id.
func (w SendWQE) WRID() uint64 { return le.Uint64(w[0:]) }

// SetWRID sets wr.wr_id.
func (w SendWQE) SetWRID(v uint64) { le.PutUint64(w[0:], v) }

// Opcode returns wr.opcode (IB_UVERBS_WR_*).
func (w SendWQE) Opcode() uint32 { return le.Uint32(w[12:]) }

// SetOpcode sets wr.opcode.
func (w SendWQE) SetOpcode(v uint32) { le.PutUint32(w[12:], v) }

// Flags returns wr.send_flags (IB_SEND_*).
func (w SendWQE) Flags() uint32 { return le.Uint32(w[16:]) }

// SetFlags sets wr.send_flags.
func (w SendWQE) SetFlags(v uint32) { le.PutUint32(w[16:], v) }

// Imm returns wr.ex.imm_data as the host integer of its network-order bytes.
func (w SendWQE) Imm() uint32 { return binary.BigEndian.Uint32(w[20:]) }

// SetImm sets wr.ex.imm_data.
func (w SendWQE) SetImm(v uint32) { binary.BigEndian.PutUint32(w[20:], v) }

// InvRKey returns wr.ex.invalidate_rkey (LOCAL_INV, SEND_WITH_INV).
func (w SendWQE) InvRKey() uint32 { return le.Uint32(w[20:]) }

// SetInvRKey sets wr.ex.invalidate_rkey.
func (w SendWQE) SetInvRKey(v uint32) { le.PutUint32(w[20:], v) }

// RemoteAddr returns wr.wr.rdma.remote_addr (= atomic.remote_addr).
func (w SendWQE) RemoteAddr() uint64 { return le.Uint64(w[24:]) }

// SetRemoteAddr sets the remote address.
func (w SendWQE) SetRemoteAddr(v uint64) { le.PutUint64(w[24:], v) }

// RKey returns wr.wr.rdma.rkey.
func (w SendWQE) RKey() uint32 { return le.Uint32(w[32:]) }

// SetRKey sets wr.wr.rdma.rkey.
func (w SendWQE) SetRKey(v uint32) { le.PutUint32(w[32:], v) }

// CompareAdd returns wr.wr.atomic.compare_add.
func (w SendWQE) CompareAdd() uint64 { return le.Uint64(w[32:]) }

// SetCompareAdd sets wr.wr.atomic.compare_add.
func (w SendWQE) SetCompareAdd(v uint64) { le.PutUint64(w[32:], v) }

// Swap returns wr.wr.atomic.swap.
func (w SendWQE) Swap() uint64 { return le.Uint64(w[40:]) }

// SetSwap sets wr.wr.atomic.swap.
func (w SendWQE) SetSwap(v uint64) { le.PutUint64(w[40:], v) }

// AtomicRKey returns wr.wr.atomic.rkey.
func (w SendWQE) AtomicRKey() uint32 { return le.Uint32(w[48:]) }

// SetAtomicRKey sets wr.wr.atomic.rkey.
func (w SendWQE) SetAtomicRKey(v uint32) { le.PutUint32(w[48:], v) }

// RemoteQPN returns wr.wr.ud.remote_qpn.
func (w SendWQE) RemoteQPN() uint32 { return le.Uint32(w[24:]) }

// SetRemoteQPN sets wr.wr.ud.remote_qpn.
func (w SendWQE) SetRemoteQPN(v uint32) { le.PutUint32(w[24:], v) }

// RemoteQKey returns wr.wr.ud.remote_qkey.
func (w SendWQE) RemoteQKey() uint32 { return le.Uint32(w[28:]) }

// SetRemoteQKey sets wr.wr.ud.remote_qkey.
func (w SendWQE) SetRemoteQKey(v uint32) { le.PutUint32(w[28:], v) }

// AHNum returns wr.wr.ud.ah_num.
func (w SendWQE) AHNum() uint32 { return le.Uint32(w[36:]) }

// SetAHNum sets wr.wr.ud.ah_num.
func (w SendWQE) SetAHNum(v uint32) { le.PutUint32(w[36:], v) }

// SetAV sets wr.wr.ud.av as a kernel QP's driver writes it (struct
// rxe_av): network type, dmac, dgid, flow label, hop limit, traffic class,
// and the source GID as a sockaddr_in (IPv4) or sockaddr_in6.
func (w SendWQE) SetAV(av *AV) {
	r := w[sendWQEAVOff : sendWQEAVOff+avSize]
	clear(r)
	r[0], r[1] = 1, av.Net
	copy(r[2:8], av.DMAC[:])
	copy(r[8:24], av.DGID[:])
	le.PutUint32(r[24:], av.Flow)
	r[29], r[30] = av.HopLimit, av.TClass
	if av.Net == NetIPv4 {
		le.PutUint16(r[32:], afInet)
		copy(r[36:40], av.SGID[12:])
	} else {
		le.PutUint16(r[32:], afInet6)
		copy(r[40:56], av.SGID[:])
	}
}

// AVDMAC returns wr.wr.ud.av.dmac.
func (w SendWQE) AVDMAC() (m [6]byte) { copy(m[:], w[56+2:56+8]); return }

// Length returns dma.length (total bytes of the SGEs or inline data).
func (w SendWQE) Length() uint32 { return le.Uint32(w[184:]) }

// SetLength sets dma.length.
func (w SendWQE) SetLength(v uint32) { le.PutUint32(w[184:], v) }

// NumSGE returns dma.num_sge.
func (w SendWQE) NumSGE() uint32 { return le.Uint32(w[196:]) }

// SetNumSGE sets dma.num_sge.
func (w SendWQE) SetNumSGE(v uint32) { le.PutUint32(w[196:], v) }

// SGE returns SGE i (after the fixed part).
func (w SendWQE) SGE(i int) SGE { o := SendWQESize + i*SGESize; return SGE(w[o : o+SGESize]) }

// Inline returns the inline data area.
func (w SendWQE) Inline() []byte { return w[SendWQESize:] }

// RecvWQE is a view of struct rxe_recv_wqe followed by its SGEs.
type RecvWQE []byte

// WRID returns wr_id.
func (w RecvWQE) WRID() uint64 { return le.Uint64(w[0:]) }

// SetWRID sets wr_id.
func (w RecvWQE) SetWRID(v uint64) { le.PutUint64(w[0:], v) }

// Length returns dma.length.
func (w RecvWQE) Length() uint32 { return le.Uint32(w[16:]) }

// SetLength sets dma.length.
func (w RecvWQE) SetLength(v uint32) { le.PutUint32(w[16:], v) }

// NumSGE returns dma.num_sge.
func (w RecvWQE) NumSGE() uint32 { return le.Uint32(w[28:]) }

// SetNumSGE sets dma.num_sge.
func (w RecvWQE) SetNumSGE(v uint32) { le.PutUint32(w[28:], v) }

// SGE returns SGE i.
func (w RecvWQE) SGE(i int) SGE { o := RecvWQESize + i*SGESize; return SGE(w[o : o+SGESize]) }

// SGE is a view of struct rxe_sge.
type SGE []byte

// Addr returns the SGE's virtual address.
func (s SGE) Addr() uint64 { return le.Uint64(s[0:]) }

// Len returns the SGE's length.
func (s SGE) Len() uint32 { return le.Uint32(s[8:]) }

// LKey returns the SGE's local key.
func (s SGE) LKey() uint32 { return le.Uint32(s[12:]) }

// Set sets all three fields.
func (s SGE) Set(addr uint64, n, lkey uint32) {
	le.PutUint64(s[0:], addr)
	le.PutUint32(s[8:], n)
	le.PutUint32(s[12:], lkey)
}

// WC is a view of struct ib_uverbs_wc.
type WC []byte

// WRID returns wr_id.
func (w WC) WRID() uint64 { return le.Uint64(w[0:]) }

// Status returns status.
func (w WC) Status() WCStatus { return WCStatus(le.Uint32(w[8:])) }

// Opcode returns opcode.
func (w WC) Opcode() uint32 { return le.Uint32(w[12:]) }

// ByteLen returns byte_len.
func (w WC) ByteLen() uint32 { return le.Uint32(w[20:]) }

// InvRKey returns ex.invalidate_rkey (with WCFlagWithInv).
func (w WC) InvRKey() uint32 { return le.Uint32(w[24:]) }

// Imm returns ex.imm_data as the integer of its network-order bytes.
func (w WC) Imm() uint32 { return binary.BigEndian.Uint32(w[24:]) }

// QPNum returns qp_num.
func (w WC) QPNum() uint32 { return le.Uint32(w[28:]) }

// SrcQP returns src_qp.
func (w WC) SrcQP() uint32 { return le.Uint32(w[32:]) }

// Flags returns wc_flags.
func (w WC) Flags() uint32 { return le.Uint32(w[36:]) }

// NetType returns the network header type of a UD receive
// (ib_uverbs_wc.reserved, FALCONNIC_WC_NET_TYPE_OFF): NetIPv4, NetIPv6 or
// NetNone.
func (w WC) NetType() uint8 { return w[wcNetTypeOff] }

// wcNetTypeOff is FALCONNIC_WC_NET_TYPE_OFF.
const wcNetTypeOff = 47

// Completion is one CQE to write.
type Completion struct {
	WRID    uint64
	Status  WCStatus
	Opcode  uint32
	ByteLen uint32
	Imm     uint32
	QPN     uint32
	SrcQP   uint32
	Flags   uint32
	InvRKey uint32 // with WCFlagWithInv: the rkey the SEND_WITH_INV invalidated
	NetType uint8  // UD receives: the GRH area's network header type
}

func (c *Completion) put(w WC) {
	clear(w)
	le.PutUint64(w[0:], c.WRID)
	le.PutUint32(w[8:], uint32(c.Status))
	le.PutUint32(w[12:], c.Opcode)
	le.PutUint32(w[20:], c.ByteLen)
	if c.Flags&WCFlagWithInv != 0 {
		le.PutUint32(w[24:], c.InvRKey) // ex.invalidate_rkey, host order
	} else {
		binary.BigEndian.PutUint32(w[24:], c.Imm)
	}
	le.PutUint32(w[28:], c.QPN)
	le.PutUint32(w[32:], c.SrcQP)
	le.PutUint32(w[36:], c.Flags)
	w[46] = 1 // port_num
	w[wcNetTypeOff] = c.NetType
}
