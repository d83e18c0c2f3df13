package rdmauapi

import "fmt"

// Constants of the control channel (uapi falconnic.h).
const (
	EtherType   = 0x88B5     // FALCONNIC_ETHERTYPE
	Magic       = 0x43494E46 // FALCONNIC_MAGIC, "FNIC" in memory order
	Version     = 1          // FALCONNIC_VERSION
	MaxBody     = 1468       // FALCONNIC_MAX_BODY
	PageShift   = 12         // FALCONNIC_PAGE_SHIFT
	PageSize    = 1 << PageShift
	PBLEntries  = 512        // FALCONNIC_PBL_ENTRIES, __le64 per PBL page
	FirstQPN    = 16         // FALCONNIC_FIRST_QPN
	RingHdrSize = 384        // FALCONNIC_RING_HDR_SIZE, sizeof(struct rxe_queue_buf)
	GSIQPN      = 1          // FALCONNIC_GSI_QPN, the GSI QP (QP1)
	GSIQKey     = 0x80010000 // FALCONNIC_GSI_QKEY (IB_QP1_QKEY)

	// DMALKey is FALCONNIC_DMA_LKEY: on a kernel QP an SGE with this lkey
	// names guest-physical memory directly (bounds checked against guest
	// RAM); never an rkey, never valid on a user QP.
	DMALKey = 0

	// WCNetTypeOff is FALCONNIC_WC_NET_TYPE_OFF: the byte of a UD receive
	// CQE (ib_uverbs_wc.reserved) holding NetIPv4/NetIPv6, or 0.
	WCNetTypeOff = 47
	NetIPv4      = 1 // FALCONNIC_NET_IPV4 (RXE_NETWORK_TYPE_IPV4)
	NetIPv6      = 2 // FALCONNIC_NET_IPV6 (RXE_NETWORK_TYPE_IPV6)

	// Offsets inside a ring's struct rxe_queue_buf header.
	RingLog2ElemSizeOff = 0
	RingIndexMaskOff    = 4
	RingProducerOff     = 128
	RingConsumerOff     = 256

	// RingNICPollingOff is the SQ's "NIC still draining" flag (__le32,
	// FALCONNIC_RING_NIC_POLLING_OFF): while it is non-zero the driver
	// sends no DB_SQ. Set it before draining; when the SQ is found empty,
	// store 0, then (full barrier) re-read the producer index and resume if
	// it moved. A NIC that never sets it gets every doorbell.
	RingNICPollingOff = 64

	// RingCQArmOff is FALCONNIC_RING_CQ_ARM_OFF: a CQ's arm word (__le32)
	// once ARM_CQ with ArmWord switched the CQ to it.
	RingCQArmOff = 64

	// WQERegOff is FALCONNIC_WQE_REG_OFF: where a kernel QP's REG_MR send
	// WQE carries its RegWR (rxe_send_wqe.wr.wr).
	WQERegOff = 24
)

// Flags are the header flag bits (enum falconnic_flags).
type Flags uint16

// Header flags.
const (
	FlagReply   Flags = 1 << 0 // NIC → driver, answers req_id
	FlagEvent   Flags = 1 << 1 // NIC → driver, unsolicited
	FlagNoReply Flags = 1 << 2 // driver → NIC, do not answer
)

// Opcode is a message type (enum falconnic_opcode).
type Opcode uint16

// Opcodes.
const (
	OpProbe         Opcode = 0x01
	OpOpen          Opcode = 0x02
	OpClose         Opcode = 0x03
	OpQueryPort     Opcode = 0x04
	OpCreatePD      Opcode = 0x10
	OpDestroyPD     Opcode = 0x11
	OpRegMR         Opcode = 0x18
	OpDeregMR       Opcode = 0x19
	OpAllocMR       Opcode = 0x1a
	OpCreateCQ      Opcode = 0x20
	OpDestroyCQ     Opcode = 0x21
	OpArmCQ         Opcode = 0x22
	OpCreateQP      Opcode = 0x28
	OpModifyQP      Opcode = 0x29
	OpQueryQP       Opcode = 0x2a
	OpDestroyQP     Opcode = 0x2b
	OpCreateSRQ     Opcode = 0x30
	OpModifySRQ     Opcode = 0x31
	OpQuerySRQ      Opcode = 0x32
	OpDestroySRQ    Opcode = 0x33
	OpCreateAH      Opcode = 0x38
	OpDestroyAH     Opcode = 0x39
	OpDBSQ          Opcode = 0x40
	OpDBRQ          Opcode = 0x41
	OpDBSRQ         Opcode = 0x42
	OpEvCQComp      Opcode = 0x80
	OpEvCQErr       Opcode = 0x81
	OpEvQPFatal     Opcode = 0x82
	OpEvQPReqErr    Opcode = 0x83
	OpEvQPAccessErr Opcode = 0x84
	OpEvQPLastWQE   Opcode = 0x85
	OpEvSRQLimit    Opcode = 0x86
	OpEvSRQErr      Opcode = 0x87
	OpEvPort        Opcode = 0x88
)

// Kind says who sends a message type and whether it is answered.
type Kind uint8

// Message kinds.
const (
	KindRequest  Kind = iota + 1 // driver → NIC, answered by a reply
	KindDoorbell                 // driver → NIC, FlagNoReply, never answered
	KindEvent                    // NIC → driver, FlagEvent
)

// OpInfo is one row of Table.
type OpInfo struct {
	Name      string // the C name without FALCONNIC_OP_
	Kind      Kind
	ReqSize   int // body size of the request (or doorbell, or event)
	ReplySize int // body size of an OK reply (requests only)
}

// Table maps every opcode to its row: the single description of message
// sizes used by Decode and by the tests (uapi comment on enum falconnic_opcode).
var Table = map[Opcode]OpInfo{
	OpProbe:         {"PROBE", KindRequest, ProbeReqSize, DeviceAttrSize},
	OpOpen:          {"OPEN", KindRequest, OpenReqSize, 0},
	OpClose:         {"CLOSE", KindRequest, 0, 0},
	OpQueryPort:     {"QUERY_PORT", KindRequest, HandleReqSize, PortAttrSize},
	OpCreatePD:      {"CREATE_PD", KindRequest, HandleReqSize, 0},
	OpDestroyPD:     {"DESTROY_PD", KindRequest, HandleReqSize, 0},
	OpRegMR:         {"REG_MR", KindRequest, RegMRSize, 0},
	OpDeregMR:       {"DEREG_MR", KindRequest, HandleReqSize, 0},
	OpAllocMR:       {"ALLOC_MR", KindRequest, AllocMRSize, 0},
	OpCreateCQ:      {"CREATE_CQ", KindRequest, CreateCQSize, 0},
	OpDestroyCQ:     {"DESTROY_CQ", KindRequest, HandleReqSize, 0},
	OpArmCQ:         {"ARM_CQ", KindRequest, ArmCQSize, 0},
	OpCreateQP:      {"CREATE_QP", KindRequest, CreateQPSize, 0},
	OpModifyQP:      {"MODIFY_QP", KindRequest, QPAttrSize, 0},
	OpQueryQP:       {"QUERY_QP", KindRequest, HandleReqSize, QPAttrSize},
	OpDestroyQP:     {"DESTROY_QP", KindRequest, HandleReqSize, 0},
	OpCreateSRQ:     {"CREATE_SRQ", KindRequest, CreateSRQSize, 0},
	OpModifySRQ:     {"MODIFY_SRQ", KindRequest, SRQAttrSize, 0},
	OpQuerySRQ:      {"QUERY_SRQ", KindRequest, HandleReqSize, SRQAttrSize},
	OpDestroySRQ:    {"DESTROY_SRQ", KindRequest, HandleReqSize, 0},
	OpCreateAH:      {"CREATE_AH", KindRequest, CreateAHSize, 0},
	OpDestroyAH:     {"DESTROY_AH", KindRequest, HandleReqSize, 0},
	OpDBSQ:          {"DB_SQ", KindDoorbell, DoorbellSize, 0},
	OpDBRQ:          {"DB_RQ", KindDoorbell, DoorbellSize, 0},
	OpDBSRQ:         {"DB_SRQ", KindDoorbell, DoorbellSize, 0},
	OpEvCQComp:      {"EV_CQ_COMP", KindEvent, EventSize, 0},
	OpEvCQErr:       {"EV_CQ_ERR", KindEvent, EventSize, 0},
	OpEvQPFatal:     {"EV_QP_FATAL", KindEvent, EventSize, 0},
	OpEvQPReqErr:    {"EV_QP_REQ_ERR", KindEvent, EventSize, 0},
	OpEvQPAccessErr: {"EV_QP_ACCESS_ERR", KindEvent, EventSize, 0},
	OpEvQPLastWQE:   {"EV_QP_LAST_WQE", KindEvent, EventSize, 0},
	OpEvSRQLimit:    {"EV_SRQ_LIMIT", KindEvent, EventSize, 0},
	OpEvSRQErr:      {"EV_SRQ_ERR", KindEvent, EventSize, 0},
	OpEvPort:        {"EV_PORT", KindEvent, EventSize, 0},
}

// byOpcode is Table as an array, for the decoder's hot path.
var byOpcode = func() (a [256]OpInfo) {
	for op, r := range Table {
		a[op] = r
	}
	return a
}()

// Lookup returns the row of op; ok is false for an unknown opcode.
func Lookup(op Opcode) (OpInfo, bool) {
	if op >= Opcode(len(byOpcode)) || byOpcode[op].Kind == 0 {
		return OpInfo{}, false
	}
	return byOpcode[op], true
}

// String returns the C name of the opcode.
func (o Opcode) String() string {
	if r, ok := Table[o]; ok {
		return r.Name
	}
	return fmt.Sprintf("Opcode(%#x)", uint16(o))
}

// Status is the result of a request (enum falconnic_status).
type Status uint32

// Statuses.
const (
	StatusOK           Status = 0
	StatusBadVersion   Status = 1
	StatusBadOpcode    Status = 2
	StatusBadLength    Status = 3
	StatusBadInstance  Status = 4
	StatusBadHandle    Status = 5
	StatusHandleInUse  Status = 6
	StatusBadParam     Status = 7
	StatusBadGPA       Status = 8
	StatusNoResources  Status = 9
	StatusBadState     Status = 10
	StatusBusy         Status = 11
	StatusNotSupported Status = 12
	StatusBadAccess    Status = 13
	StatusInternal     Status = 14
)

var statusNames = [...]string{
	StatusOK:           "OK",
	StatusBadVersion:   "BAD_VERSION",
	StatusBadOpcode:    "BAD_OPCODE",
	StatusBadLength:    "BAD_LENGTH",
	StatusBadInstance:  "BAD_INSTANCE",
	StatusBadHandle:    "BAD_HANDLE",
	StatusHandleInUse:  "HANDLE_IN_USE",
	StatusBadParam:     "BAD_PARAM",
	StatusBadGPA:       "BAD_GPA",
	StatusNoResources:  "NO_RESOURCES",
	StatusBadState:     "BAD_STATE",
	StatusBusy:         "BUSY",
	StatusNotSupported: "NOT_SUPPORTED",
	StatusBadAccess:    "BAD_ACCESS",
	StatusInternal:     "INTERNAL",
}

// String returns the C name of the status.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint32(s))
}

// QP types (enum falconnic_qp_type, the IB_QPT_* values).
const (
	QPTypeGSI = 1
	QPTypeRC  = 2
	QPTypeUC  = 3
	QPTypeUD  = 4
)

// QPFlagKernel is FALCONNIC_QP_F_KERNEL (enum falconnic_qp_flags): a
// kernel consumer's QP, whose SGEs may use DMALKey and whose UD WQEs carry
// the address vector inline.
const QPFlagKernel = 1 << 0

// QP states (enum falconnic_qp_state, the IB_QPS_* values).
const (
	QPSReset = 0
	QPSInit  = 1
	QPSRTR   = 2
	QPSRTS   = 3
	QPSSQD   = 4
	QPSSQE   = 5
	QPSErr   = 6
)

// QP attribute mask bits (enum falconnic_qp_attr_mask, the IB_QP_* values).
const (
	QPAttrState           = 1 << 0
	QPAttrCurState        = 1 << 1
	QPAttrAccessFlags     = 1 << 3
	QPAttrPKeyIndex       = 1 << 4
	QPAttrPort            = 1 << 5
	QPAttrQKey            = 1 << 6
	QPAttrAV              = 1 << 7
	QPAttrPathMTU         = 1 << 8
	QPAttrTimeout         = 1 << 9
	QPAttrRetryCnt        = 1 << 10
	QPAttrRNRRetry        = 1 << 11
	QPAttrRQPSN           = 1 << 12
	QPAttrMaxQPRdAtomic   = 1 << 13
	QPAttrMinRNRTimer     = 1 << 15
	QPAttrSQPSN           = 1 << 16
	QPAttrMaxDestRdAtomic = 1 << 17
	QPAttrDestQPN         = 1 << 20

	// QPAttrAll is every bit above: MODIFY_QP with any other bit fails
	// with StatusBadParam.
	QPAttrAll = QPAttrState | QPAttrCurState | QPAttrAccessFlags |
		QPAttrPKeyIndex | QPAttrPort | QPAttrQKey | QPAttrAV |
		QPAttrPathMTU | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry |
		QPAttrRQPSN | QPAttrMaxQPRdAtomic | QPAttrMinRNRTimer |
		QPAttrSQPSN | QPAttrMaxDestRdAtomic | QPAttrDestQPN
)

// Access flags (enum falconnic_access, the IB_ACCESS_* values).
const (
	AccessLocalWrite   = 1 << 0
	AccessRemoteWrite  = 1 << 1
	AccessRemoteRead   = 1 << 2
	AccessRemoteAtomic = 1 << 3
	AccessMWBind       = 1 << 4
	AccessAll          = 0x1f
)

// SRQ attribute mask bits, CQ arm flags, device capability bits, network
// types of an AV.
const (
	SRQAttrMaxWR = 1 << 0
	SRQAttrLimit = 1 << 1

	ArmSolicited = 1 << 0
	ArmNext      = 1 << 1
	ArmWord      = 1 << 2

	CapRC      = 1 << 0
	CapUC      = 1 << 1
	CapUD      = 1 << 2
	CapSRQ     = 1 << 3
	CapAtomic  = 1 << 4
	CapImm     = 1 << 5
	CapInline  = 1 << 6
	CapMemMgt  = 1 << 7 // kernel RC/UC QPs, ALLOC_MR, REG_MR/LOCAL_INV WQEs, SEND_WITH_INV
	CapArmWord = 1 << 8 // ARM_CQ's ArmWord

	NetworkIPv4 = 1 // RXE_NETWORK_TYPE_IPV4
	NetworkIPv6 = 2 // RXE_NETWORK_TYPE_IPV6
)
