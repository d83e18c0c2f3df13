package rdmauapi

// Byte views of the control-channel structs of guest-driver/include/uapi/falconnic.h.
// layout_test.go checks every size and offset here against gcc.

import "encoding/binary"

var le = binary.LittleEndian

// HdrSize is sizeof(struct falconnic_hdr).
const HdrSize = 32

// Hdr is a view of struct falconnic_hdr; it must be at least HdrSize bytes.
type Hdr []byte

// Magic returns magic.
func (v Hdr) Magic() uint32 { return le.Uint32(v[0:]) }

// SetMagic sets magic.
func (v Hdr) SetMagic(x uint32) { le.PutUint32(v[0:], x) }

// Version returns version.
func (v Hdr) Version() uint16 { return le.Uint16(v[4:]) }

// SetVersion sets version.
func (v Hdr) SetVersion(x uint16) { le.PutUint16(v[4:], x) }

// Opcode returns opcode.
func (v Hdr) Opcode() Opcode { return Opcode(le.Uint16(v[6:])) }

// SetOpcode sets opcode.
func (v Hdr) SetOpcode(x Opcode) { le.PutUint16(v[6:], uint16(x)) }

// Instance returns instance.
func (v Hdr) Instance() uint64 { return le.Uint64(v[8:]) }

// SetInstance sets instance.
func (v Hdr) SetInstance(x uint64) { le.PutUint64(v[8:], x) }

// ReqID returns req_id.
func (v Hdr) ReqID() uint32 { return le.Uint32(v[16:]) }

// SetReqID sets req_id.
func (v Hdr) SetReqID(x uint32) { le.PutUint32(v[16:], x) }

// Flags returns flags.
func (v Hdr) Flags() Flags { return Flags(le.Uint16(v[20:])) }

// SetFlags sets flags.
func (v Hdr) SetFlags(x Flags) { le.PutUint16(v[20:], uint16(x)) }

// Length returns length.
func (v Hdr) Length() uint16 { return le.Uint16(v[22:]) }

// SetLength sets length.
func (v Hdr) SetLength(x uint16) { le.PutUint16(v[22:], x) }

// Status returns status.
func (v Hdr) Status() Status { return Status(le.Uint32(v[24:])) }

// SetStatus sets status.
func (v Hdr) SetStatus(x Status) { le.PutUint32(v[24:], uint32(x)) }

// HandleReqSize is sizeof(struct falconnic_handle_req).
const HandleReqSize = 8

// HandleReq is a view of struct falconnic_handle_req; it must be at least HandleReqSize bytes.
type HandleReq []byte

// Handle returns handle.
func (v HandleReq) Handle() uint32 { return le.Uint32(v[0:]) }

// SetHandle sets handle.
func (v HandleReq) SetHandle(x uint32) { le.PutUint32(v[0:], x) }

// ProbeReqSize is sizeof(struct falconnic_probe_req).
const ProbeReqSize = 16

// ProbeReq is a view of struct falconnic_probe_req; it must be at least ProbeReqSize bytes.
type ProbeReq []byte

// DriverVersion returns driver_version.
func (v ProbeReq) DriverVersion() uint32 { return le.Uint32(v[0:]) }

// SetDriverVersion sets driver_version.
func (v ProbeReq) SetDriverVersion(x uint32) { le.PutUint32(v[0:], x) }

// MaxBody returns max_body.
func (v ProbeReq) MaxBody() uint32 { return le.Uint32(v[4:]) }

// SetMaxBody sets max_body.
func (v ProbeReq) SetMaxBody(x uint32) { le.PutUint32(v[4:], x) }

// OpenReqSize is sizeof(struct falconnic_open_req).
const OpenReqSize = 8

// OpenReq is a view of struct falconnic_open_req; it must be at least OpenReqSize bytes.
type OpenReq []byte

// DriverVersion returns driver_version.
func (v OpenReq) DriverVersion() uint32 { return le.Uint32(v[0:]) }

// SetDriverVersion sets driver_version.
func (v OpenReq) SetDriverVersion(x uint32) { le.PutUint32(v[0:], x) }

// DeviceAttrSize is sizeof(struct falconnic_device_attr).
const DeviceAttrSize = 120

// DeviceAttr is a view of struct falconnic_device_attr; it must be at least DeviceAttrSize bytes.
type DeviceAttr []byte

// FWVer returns fw_ver.
func (v DeviceAttr) FWVer() uint64 { return le.Uint64(v[0:]) }

// SetFWVer sets fw_ver.
func (v DeviceAttr) SetFWVer(x uint64) { le.PutUint64(v[0:], x) }

// MaxMRSize returns max_mr_size.
func (v DeviceAttr) MaxMRSize() uint64 { return le.Uint64(v[8:]) }

// SetMaxMRSize sets max_mr_size.
func (v DeviceAttr) SetMaxMRSize(x uint64) { le.PutUint64(v[8:], x) }

// PageSizeCap returns page_size_cap.
func (v DeviceAttr) PageSizeCap() uint64 { return le.Uint64(v[16:]) }

// SetPageSizeCap sets page_size_cap.
func (v DeviceAttr) SetPageSizeCap(x uint64) { le.PutUint64(v[16:], x) }

// MAC returns the 6-byte mac field (aliases v).
func (v DeviceAttr) MAC() []byte { return v[24:30:30] }

// SetMAC copies b (up to 6 bytes) into mac.
func (v DeviceAttr) SetMAC(b []byte) { copy(v[24:30], b) }

// Nports returns nports.
func (v DeviceAttr) Nports() uint16 { return le.Uint16(v[30:]) }

// SetNports sets nports.
func (v DeviceAttr) SetNports(x uint16) { le.PutUint16(v[30:], x) }

// VendorID returns vendor_id.
func (v DeviceAttr) VendorID() uint32 { return le.Uint32(v[32:]) }

// SetVendorID sets vendor_id.
func (v DeviceAttr) SetVendorID(x uint32) { le.PutUint32(v[32:], x) }

// VendorPartID returns vendor_part_id.
func (v DeviceAttr) VendorPartID() uint32 { return le.Uint32(v[36:]) }

// SetVendorPartID sets vendor_part_id.
func (v DeviceAttr) SetVendorPartID(x uint32) { le.PutUint32(v[36:], x) }

// HWVer returns hw_ver.
func (v DeviceAttr) HWVer() uint32 { return le.Uint32(v[40:]) }

// SetHWVer sets hw_ver.
func (v DeviceAttr) SetHWVer(x uint32) { le.PutUint32(v[40:], x) }

// MaxQP returns max_qp.
func (v DeviceAttr) MaxQP() uint32 { return le.Uint32(v[44:]) }

// SetMaxQP sets max_qp.
func (v DeviceAttr) SetMaxQP(x uint32) { le.PutUint32(v[44:], x) }

// MaxQPWR returns max_qp_wr.
func (v DeviceAttr) MaxQPWR() uint32 { return le.Uint32(v[48:]) }

// SetMaxQPWR sets max_qp_wr.
func (v DeviceAttr) SetMaxQPWR(x uint32) { le.PutUint32(v[48:], x) }

// MaxSendSGE returns max_send_sge.
func (v DeviceAttr) MaxSendSGE() uint32 { return le.Uint32(v[52:]) }

// SetMaxSendSGE sets max_send_sge.
func (v DeviceAttr) SetMaxSendSGE(x uint32) { le.PutUint32(v[52:], x) }

// MaxRecvSGE returns max_recv_sge.
func (v DeviceAttr) MaxRecvSGE() uint32 { return le.Uint32(v[56:]) }

// SetMaxRecvSGE sets max_recv_sge.
func (v DeviceAttr) SetMaxRecvSGE(x uint32) { le.PutUint32(v[56:], x) }

// MaxSGERd returns max_sge_rd.
func (v DeviceAttr) MaxSGERd() uint32 { return le.Uint32(v[60:]) }

// SetMaxSGERd sets max_sge_rd.
func (v DeviceAttr) SetMaxSGERd(x uint32) { le.PutUint32(v[60:], x) }

// MaxCQ returns max_cq.
func (v DeviceAttr) MaxCQ() uint32 { return le.Uint32(v[64:]) }

// SetMaxCQ sets max_cq.
func (v DeviceAttr) SetMaxCQ(x uint32) { le.PutUint32(v[64:], x) }

// MaxCQE returns max_cqe.
func (v DeviceAttr) MaxCQE() uint32 { return le.Uint32(v[68:]) }

// SetMaxCQE sets max_cqe.
func (v DeviceAttr) SetMaxCQE(x uint32) { le.PutUint32(v[68:], x) }

// MaxMR returns max_mr.
func (v DeviceAttr) MaxMR() uint32 { return le.Uint32(v[72:]) }

// SetMaxMR sets max_mr.
func (v DeviceAttr) SetMaxMR(x uint32) { le.PutUint32(v[72:], x) }

// MaxPD returns max_pd.
func (v DeviceAttr) MaxPD() uint32 { return le.Uint32(v[76:]) }

// SetMaxPD sets max_pd.
func (v DeviceAttr) SetMaxPD(x uint32) { le.PutUint32(v[76:], x) }

// MaxQPRdAtom returns max_qp_rd_atom.
func (v DeviceAttr) MaxQPRdAtom() uint32 { return le.Uint32(v[80:]) }

// SetMaxQPRdAtom sets max_qp_rd_atom.
func (v DeviceAttr) SetMaxQPRdAtom(x uint32) { le.PutUint32(v[80:], x) }

// MaxQPInitRdAtom returns max_qp_init_rd_atom.
func (v DeviceAttr) MaxQPInitRdAtom() uint32 { return le.Uint32(v[84:]) }

// SetMaxQPInitRdAtom sets max_qp_init_rd_atom.
func (v DeviceAttr) SetMaxQPInitRdAtom(x uint32) { le.PutUint32(v[84:], x) }

// MaxSRQ returns max_srq.
func (v DeviceAttr) MaxSRQ() uint32 { return le.Uint32(v[88:]) }

// SetMaxSRQ sets max_srq.
func (v DeviceAttr) SetMaxSRQ(x uint32) { le.PutUint32(v[88:], x) }

// MaxSRQWR returns max_srq_wr.
func (v DeviceAttr) MaxSRQWR() uint32 { return le.Uint32(v[92:]) }

// SetMaxSRQWR sets max_srq_wr.
func (v DeviceAttr) SetMaxSRQWR(x uint32) { le.PutUint32(v[92:], x) }

// MaxSRQSGE returns max_srq_sge.
func (v DeviceAttr) MaxSRQSGE() uint32 { return le.Uint32(v[96:]) }

// SetMaxSRQSGE sets max_srq_sge.
func (v DeviceAttr) SetMaxSRQSGE(x uint32) { le.PutUint32(v[96:], x) }

// MaxAH returns max_ah.
func (v DeviceAttr) MaxAH() uint32 { return le.Uint32(v[100:]) }

// SetMaxAH sets max_ah.
func (v DeviceAttr) SetMaxAH(x uint32) { le.PutUint32(v[100:], x) }

// MaxInlineData returns max_inline_data.
func (v DeviceAttr) MaxInlineData() uint32 { return le.Uint32(v[104:]) }

// SetMaxInlineData sets max_inline_data.
func (v DeviceAttr) SetMaxInlineData(x uint32) { le.PutUint32(v[104:], x) }

// CapFlags returns cap_flags.
func (v DeviceAttr) CapFlags() uint32 { return le.Uint32(v[108:]) }

// SetCapFlags sets cap_flags.
func (v DeviceAttr) SetCapFlags(x uint32) { le.PutUint32(v[108:], x) }

// MaxFastRegPages returns max_fast_reg_pages.
func (v DeviceAttr) MaxFastRegPages() uint32 { return le.Uint32(v[112:]) }

// SetMaxFastRegPages sets max_fast_reg_pages.
func (v DeviceAttr) SetMaxFastRegPages(x uint32) { le.PutUint32(v[112:], x) }

// PortAttrSize is sizeof(struct falconnic_port_attr).
const PortAttrSize = 24

// PortAttr is a view of struct falconnic_port_attr; it must be at least PortAttrSize bytes.
type PortAttr []byte

// State returns state.
func (v PortAttr) State() uint32 { return le.Uint32(v[0:]) }

// SetState sets state.
func (v PortAttr) SetState(x uint32) { le.PutUint32(v[0:], x) }

// MaxMTU returns max_mtu.
func (v PortAttr) MaxMTU() uint32 { return le.Uint32(v[4:]) }

// SetMaxMTU sets max_mtu.
func (v PortAttr) SetMaxMTU(x uint32) { le.PutUint32(v[4:], x) }

// ActiveMTU returns active_mtu.
func (v PortAttr) ActiveMTU() uint32 { return le.Uint32(v[8:]) }

// SetActiveMTU sets active_mtu.
func (v PortAttr) SetActiveMTU(x uint32) { le.PutUint32(v[8:], x) }

// MaxMsgSz returns max_msg_sz.
func (v PortAttr) MaxMsgSz() uint32 { return le.Uint32(v[12:]) }

// SetMaxMsgSz sets max_msg_sz.
func (v PortAttr) SetMaxMsgSz(x uint32) { le.PutUint32(v[12:], x) }

// ActiveSpeed returns active_speed.
func (v PortAttr) ActiveSpeed() uint8 { return v[16] }

// SetActiveSpeed sets active_speed.
func (v PortAttr) SetActiveSpeed(x uint8) { v[16] = x }

// ActiveWidth returns active_width.
func (v PortAttr) ActiveWidth() uint8 { return v[17] }

// SetActiveWidth sets active_width.
func (v PortAttr) SetActiveWidth(x uint8) { v[17] = x }

// PhysState returns phys_state.
func (v PortAttr) PhysState() uint8 { return v[18] }

// SetPhysState sets phys_state.
func (v PortAttr) SetPhysState(x uint8) { v[18] = x }

// PBLSize is sizeof(struct falconnic_pbl).
const PBLSize = 16

// PBL is a view of struct falconnic_pbl; it must be at least PBLSize bytes.
type PBL []byte

// Root returns root.
func (v PBL) Root() uint64 { return le.Uint64(v[0:]) }

// SetRoot sets root.
func (v PBL) SetRoot(x uint64) { le.PutUint64(v[0:], x) }

// Npages returns npages.
func (v PBL) Npages() uint32 { return le.Uint32(v[8:]) }

// SetNpages sets npages.
func (v PBL) SetNpages(x uint32) { le.PutUint32(v[8:], x) }

// Levels returns levels.
func (v PBL) Levels() uint8 { return v[12] }

// SetLevels sets levels.
func (v PBL) SetLevels(x uint8) { v[12] = x }

// PageShift returns page_shift.
func (v PBL) PageShift() uint8 { return v[13] }

// SetPageShift sets page_shift.
func (v PBL) SetPageShift(x uint8) { v[13] = x }

// RegMRSize is sizeof(struct falconnic_reg_mr).
const RegMRSize = 56

// RegMR is a view of struct falconnic_reg_mr; it must be at least RegMRSize bytes.
type RegMR []byte

// MR returns mr.
func (v RegMR) MR() uint32 { return le.Uint32(v[0:]) }

// SetMR sets mr.
func (v RegMR) SetMR(x uint32) { le.PutUint32(v[0:], x) }

// PD returns pd.
func (v RegMR) PD() uint32 { return le.Uint32(v[4:]) }

// SetPD sets pd.
func (v RegMR) SetPD(x uint32) { le.PutUint32(v[4:], x) }

// LKey returns lkey.
func (v RegMR) LKey() uint32 { return le.Uint32(v[8:]) }

// SetLKey sets lkey.
func (v RegMR) SetLKey(x uint32) { le.PutUint32(v[8:], x) }

// RKey returns rkey.
func (v RegMR) RKey() uint32 { return le.Uint32(v[12:]) }

// SetRKey sets rkey.
func (v RegMR) SetRKey(x uint32) { le.PutUint32(v[12:], x) }

// IOVA returns iova.
func (v RegMR) IOVA() uint64 { return le.Uint64(v[16:]) }

// SetIOVA sets iova.
func (v RegMR) SetIOVA(x uint64) { le.PutUint64(v[16:], x) }

// Length returns length.
func (v RegMR) Length() uint64 { return le.Uint64(v[24:]) }

// SetLength sets length.
func (v RegMR) SetLength(x uint64) { le.PutUint64(v[24:], x) }

// Access returns access.
func (v RegMR) Access() uint32 { return le.Uint32(v[32:]) }

// SetAccess sets access.
func (v RegMR) SetAccess(x uint32) { le.PutUint32(v[32:], x) }

// FirstOffset returns first_offset.
func (v RegMR) FirstOffset() uint32 { return le.Uint32(v[36:]) }

// SetFirstOffset sets first_offset.
func (v RegMR) SetFirstOffset(x uint32) { le.PutUint32(v[36:], x) }

// PBL returns the embedded PBL.
func (v RegMR) PBL() PBL { return PBL(v[40:56]) }

// AllocMRSize is sizeof(struct falconnic_alloc_mr).
const AllocMRSize = 32

// AllocMR is a view of struct falconnic_alloc_mr; it must be at least AllocMRSize bytes.
type AllocMR []byte

// MR returns mr.
func (v AllocMR) MR() uint32 { return le.Uint32(v[0:]) }

// SetMR sets mr.
func (v AllocMR) SetMR(x uint32) { le.PutUint32(v[0:], x) }

// PD returns pd.
func (v AllocMR) PD() uint32 { return le.Uint32(v[4:]) }

// SetPD sets pd.
func (v AllocMR) SetPD(x uint32) { le.PutUint32(v[4:], x) }

// Key returns key.
func (v AllocMR) Key() uint32 { return le.Uint32(v[8:]) }

// SetKey sets key.
func (v AllocMR) SetKey(x uint32) { le.PutUint32(v[8:], x) }

// PBL returns a view of pbl.
func (v AllocMR) PBL() PBL { return PBL(v[16:32]) }

// RegWRSize is sizeof(struct falconnic_reg_wr).
const RegWRSize = 32

// RegWR is a view of struct falconnic_reg_wr (in a kernel QP's REG_MR send
// WQE at WQERegOff); it must be at least RegWRSize bytes.
type RegWR []byte

// MR returns mr.
func (v RegWR) MR() uint32 { return le.Uint32(v[0:]) }

// SetMR sets mr.
func (v RegWR) SetMR(x uint32) { le.PutUint32(v[0:], x) }

// Key returns key.
func (v RegWR) Key() uint32 { return le.Uint32(v[4:]) }

// SetKey sets key.
func (v RegWR) SetKey(x uint32) { le.PutUint32(v[4:], x) }

// Access returns access.
func (v RegWR) Access() uint32 { return le.Uint32(v[8:]) }

// SetAccess sets access.
func (v RegWR) SetAccess(x uint32) { le.PutUint32(v[8:], x) }

// Npages returns npages.
func (v RegWR) Npages() uint32 { return le.Uint32(v[12:]) }

// SetNpages sets npages.
func (v RegWR) SetNpages(x uint32) { le.PutUint32(v[12:], x) }

// IOVA returns iova.
func (v RegWR) IOVA() uint64 { return le.Uint64(v[16:]) }

// SetIOVA sets iova.
func (v RegWR) SetIOVA(x uint64) { le.PutUint64(v[16:], x) }

// Length returns length.
func (v RegWR) Length() uint64 { return le.Uint64(v[24:]) }

// SetLength sets length.
func (v RegWR) SetLength(x uint64) { le.PutUint64(v[24:], x) }

// RingSize is sizeof(struct falconnic_ring).
const RingSize = 32

// Ring is a view of struct falconnic_ring; it must be at least RingSize bytes.
type Ring []byte

// PBL returns the embedded PBL.
func (v Ring) PBL() PBL { return PBL(v[0:16]) }

// Slots returns slots.
func (v Ring) Slots() uint32 { return le.Uint32(v[16:]) }

// SetSlots sets slots.
func (v Ring) SetSlots(x uint32) { le.PutUint32(v[16:], x) }

// Log2ElemSize returns log2_elem_size.
func (v Ring) Log2ElemSize() uint32 { return le.Uint32(v[20:]) }

// SetLog2ElemSize sets log2_elem_size.
func (v Ring) SetLog2ElemSize(x uint32) { le.PutUint32(v[20:], x) }

// MaxSGE returns max_sge.
func (v Ring) MaxSGE() uint32 { return le.Uint32(v[24:]) }

// SetMaxSGE sets max_sge.
func (v Ring) SetMaxSGE(x uint32) { le.PutUint32(v[24:], x) }

// MaxInline returns max_inline.
func (v Ring) MaxInline() uint32 { return le.Uint32(v[28:]) }

// SetMaxInline sets max_inline.
func (v Ring) SetMaxInline(x uint32) { le.PutUint32(v[28:], x) }

// CreateCQSize is sizeof(struct falconnic_create_cq).
const CreateCQSize = 40

// CreateCQ is a view of struct falconnic_create_cq; it must be at least CreateCQSize bytes.
type CreateCQ []byte

// CQ returns cq.
func (v CreateCQ) CQ() uint32 { return le.Uint32(v[0:]) }

// SetCQ sets cq.
func (v CreateCQ) SetCQ(x uint32) { le.PutUint32(v[0:], x) }

// CQE returns cqe.
func (v CreateCQ) CQE() uint32 { return le.Uint32(v[4:]) }

// SetCQE sets cqe.
func (v CreateCQ) SetCQE(x uint32) { le.PutUint32(v[4:], x) }

// Ring returns the embedded Ring.
func (v CreateCQ) Ring() Ring { return Ring(v[8:40]) }

// ArmCQSize is sizeof(struct falconnic_arm_cq).
const ArmCQSize = 8

// ArmCQ is a view of struct falconnic_arm_cq; it must be at least ArmCQSize bytes.
type ArmCQ []byte

// CQ returns cq.
func (v ArmCQ) CQ() uint32 { return le.Uint32(v[0:]) }

// SetCQ sets cq.
func (v ArmCQ) SetCQ(x uint32) { le.PutUint32(v[0:], x) }

// Flags returns flags.
func (v ArmCQ) Flags() uint32 { return le.Uint32(v[4:]) }

// SetFlags sets flags.
func (v ArmCQ) SetFlags(x uint32) { le.PutUint32(v[4:], x) }

// CreateQPSize is sizeof(struct falconnic_create_qp).
const CreateQPSize = 88

// CreateQP is a view of struct falconnic_create_qp; it must be at least CreateQPSize bytes.
type CreateQP []byte

// QP returns qp.
func (v CreateQP) QP() uint32 { return le.Uint32(v[0:]) }

// SetQP sets qp.
func (v CreateQP) SetQP(x uint32) { le.PutUint32(v[0:], x) }

// PD returns pd.
func (v CreateQP) PD() uint32 { return le.Uint32(v[4:]) }

// SetPD sets pd.
func (v CreateQP) SetPD(x uint32) { le.PutUint32(v[4:], x) }

// SendCQ returns send_cq.
func (v CreateQP) SendCQ() uint32 { return le.Uint32(v[8:]) }

// SetSendCQ sets send_cq.
func (v CreateQP) SetSendCQ(x uint32) { le.PutUint32(v[8:], x) }

// RecvCQ returns recv_cq.
func (v CreateQP) RecvCQ() uint32 { return le.Uint32(v[12:]) }

// SetRecvCQ sets recv_cq.
func (v CreateQP) SetRecvCQ(x uint32) { le.PutUint32(v[12:], x) }

// SRQ returns srq.
func (v CreateQP) SRQ() uint32 { return le.Uint32(v[16:]) }

// SetSRQ sets srq.
func (v CreateQP) SetSRQ(x uint32) { le.PutUint32(v[16:], x) }

// Type returns type.
func (v CreateQP) Type() uint8 { return v[20] }

// SetType sets type.
func (v CreateQP) SetType(x uint8) { v[20] = x }

// SQSigAll returns sq_sig_all.
func (v CreateQP) SQSigAll() uint8 { return v[21] }

// SetSQSigAll sets sq_sig_all.
func (v CreateQP) SetSQSigAll(x uint8) { v[21] = x }

// Flags returns flags (QPFlag*).
func (v CreateQP) Flags() uint8 { return v[22] }

// SetFlags sets flags.
func (v CreateQP) SetFlags(x uint8) { v[22] = x }

// SQ returns the embedded Ring.
func (v CreateQP) SQ() Ring { return Ring(v[24:56]) }

// RQ returns the embedded Ring.
func (v CreateQP) RQ() Ring { return Ring(v[56:88]) }

// AVSize is sizeof(struct falconnic_av).
const AVSize = 48

// AV is a view of struct falconnic_av; it must be at least AVSize bytes.
type AV []byte

// PortNum returns port_num.
func (v AV) PortNum() uint8 { return v[0] }

// SetPortNum sets port_num.
func (v AV) SetPortNum(x uint8) { v[0] = x }

// NetworkType returns network_type.
func (v AV) NetworkType() uint8 { return v[1] }

// SetNetworkType sets network_type.
func (v AV) SetNetworkType(x uint8) { v[1] = x }

// DMAC returns the 6-byte dmac field (aliases v).
func (v AV) DMAC() []byte { return v[2:8:8] }

// SetDMAC copies b (up to 6 bytes) into dmac.
func (v AV) SetDMAC(b []byte) { copy(v[2:8], b) }

// FlowLabel returns flow_label.
func (v AV) FlowLabel() uint32 { return le.Uint32(v[8:]) }

// SetFlowLabel sets flow_label.
func (v AV) SetFlowLabel(x uint32) { le.PutUint32(v[8:], x) }

// SGIDIndex returns sgid_index.
func (v AV) SGIDIndex() uint8 { return v[12] }

// SetSGIDIndex sets sgid_index.
func (v AV) SetSGIDIndex(x uint8) { v[12] = x }

// HopLimit returns hop_limit.
func (v AV) HopLimit() uint8 { return v[13] }

// SetHopLimit sets hop_limit.
func (v AV) SetHopLimit(x uint8) { v[13] = x }

// TrafficClass returns traffic_class.
func (v AV) TrafficClass() uint8 { return v[14] }

// SetTrafficClass sets traffic_class.
func (v AV) SetTrafficClass(x uint8) { v[14] = x }

// SGID returns the 16-byte sgid field (aliases v).
func (v AV) SGID() []byte { return v[16:32:32] }

// SetSGID copies b (up to 16 bytes) into sgid.
func (v AV) SetSGID(b []byte) { copy(v[16:32], b) }

// DGID returns the 16-byte dgid field (aliases v).
func (v AV) DGID() []byte { return v[32:48:48] }

// SetDGID copies b (up to 16 bytes) into dgid.
func (v AV) SetDGID(b []byte) { copy(v[32:48], b) }

// QPAttrSize is sizeof(struct falconnic_qp_attr).
const QPAttrSize = 104

// QPAttr is a view of struct falconnic_qp_attr; it must be at least QPAttrSize bytes.
type QPAttr []byte

// QP returns qp.
func (v QPAttr) QP() uint32 { return le.Uint32(v[0:]) }

// SetQP sets qp.
func (v QPAttr) SetQP(x uint32) { le.PutUint32(v[0:], x) }

// AttrMask returns attr_mask.
func (v QPAttr) AttrMask() uint32 { return le.Uint32(v[4:]) }

// SetAttrMask sets attr_mask.
func (v QPAttr) SetAttrMask(x uint32) { le.PutUint32(v[4:], x) }

// QPState returns qp_state.
func (v QPAttr) QPState() uint32 { return le.Uint32(v[8:]) }

// SetQPState sets qp_state.
func (v QPAttr) SetQPState(x uint32) { le.PutUint32(v[8:], x) }

// CurQPState returns cur_qp_state.
func (v QPAttr) CurQPState() uint32 { return le.Uint32(v[12:]) }

// SetCurQPState sets cur_qp_state.
func (v QPAttr) SetCurQPState(x uint32) { le.PutUint32(v[12:], x) }

// PathMTU returns path_mtu.
func (v QPAttr) PathMTU() uint32 { return le.Uint32(v[16:]) }

// SetPathMTU sets path_mtu.
func (v QPAttr) SetPathMTU(x uint32) { le.PutUint32(v[16:], x) }

// QKey returns qkey.
func (v QPAttr) QKey() uint32 { return le.Uint32(v[20:]) }

// SetQKey sets qkey.
func (v QPAttr) SetQKey(x uint32) { le.PutUint32(v[20:], x) }

// RQPSN returns rq_psn.
func (v QPAttr) RQPSN() uint32 { return le.Uint32(v[24:]) }

// SetRQPSN sets rq_psn.
func (v QPAttr) SetRQPSN(x uint32) { le.PutUint32(v[24:], x) }

// SQPSN returns sq_psn.
func (v QPAttr) SQPSN() uint32 { return le.Uint32(v[28:]) }

// SetSQPSN sets sq_psn.
func (v QPAttr) SetSQPSN(x uint32) { le.PutUint32(v[28:], x) }

// DestQPNum returns dest_qp_num.
func (v QPAttr) DestQPNum() uint32 { return le.Uint32(v[32:]) }

// SetDestQPNum sets dest_qp_num.
func (v QPAttr) SetDestQPNum(x uint32) { le.PutUint32(v[32:], x) }

// AccessFlags returns access_flags.
func (v QPAttr) AccessFlags() uint32 { return le.Uint32(v[36:]) }

// SetAccessFlags sets access_flags.
func (v QPAttr) SetAccessFlags(x uint32) { le.PutUint32(v[36:], x) }

// PkeyIndex returns pkey_index.
func (v QPAttr) PkeyIndex() uint16 { return le.Uint16(v[40:]) }

// SetPkeyIndex sets pkey_index.
func (v QPAttr) SetPkeyIndex(x uint16) { le.PutUint16(v[40:], x) }

// PortNum returns port_num.
func (v QPAttr) PortNum() uint8 { return v[42] }

// SetPortNum sets port_num.
func (v QPAttr) SetPortNum(x uint8) { v[42] = x }

// MaxRdAtomic returns max_rd_atomic.
func (v QPAttr) MaxRdAtomic() uint8 { return v[43] }

// SetMaxRdAtomic sets max_rd_atomic.
func (v QPAttr) SetMaxRdAtomic(x uint8) { v[43] = x }

// MaxDestRdAtomic returns max_dest_rd_atomic.
func (v QPAttr) MaxDestRdAtomic() uint8 { return v[44] }

// SetMaxDestRdAtomic sets max_dest_rd_atomic.
func (v QPAttr) SetMaxDestRdAtomic(x uint8) { v[44] = x }

// MinRNRTimer returns min_rnr_timer.
func (v QPAttr) MinRNRTimer() uint8 { return v[45] }

// SetMinRNRTimer sets min_rnr_timer.
func (v QPAttr) SetMinRNRTimer(x uint8) { v[45] = x }

// Timeout returns timeout.
func (v QPAttr) Timeout() uint8 { return v[46] }

// SetTimeout sets timeout.
func (v QPAttr) SetTimeout(x uint8) { v[46] = x }

// RetryCnt returns retry_cnt.
func (v QPAttr) RetryCnt() uint8 { return v[47] }

// SetRetryCnt sets retry_cnt.
func (v QPAttr) SetRetryCnt(x uint8) { v[47] = x }

// RNRRetry returns rnr_retry.
func (v QPAttr) RNRRetry() uint8 { return v[48] }

// SetRNRRetry sets rnr_retry.
func (v QPAttr) SetRNRRetry(x uint8) { v[48] = x }

// SQDraining returns sq_draining.
func (v QPAttr) SQDraining() uint8 { return v[49] }

// SetSQDraining sets sq_draining.
func (v QPAttr) SetSQDraining(x uint8) { v[49] = x }

// AV returns the embedded AV.
func (v QPAttr) AV() AV { return AV(v[56:104]) }

// CreateSRQSize is sizeof(struct falconnic_create_srq).
const CreateSRQSize = 48

// CreateSRQ is a view of struct falconnic_create_srq; it must be at least CreateSRQSize bytes.
type CreateSRQ []byte

// SRQ returns srq.
func (v CreateSRQ) SRQ() uint32 { return le.Uint32(v[0:]) }

// SetSRQ sets srq.
func (v CreateSRQ) SetSRQ(x uint32) { le.PutUint32(v[0:], x) }

// PD returns pd.
func (v CreateSRQ) PD() uint32 { return le.Uint32(v[4:]) }

// SetPD sets pd.
func (v CreateSRQ) SetPD(x uint32) { le.PutUint32(v[4:], x) }

// SRQLimit returns srq_limit.
func (v CreateSRQ) SRQLimit() uint32 { return le.Uint32(v[8:]) }

// SetSRQLimit sets srq_limit.
func (v CreateSRQ) SetSRQLimit(x uint32) { le.PutUint32(v[8:], x) }

// Ring returns the embedded Ring.
func (v CreateSRQ) Ring() Ring { return Ring(v[16:48]) }

// SRQAttrSize is sizeof(struct falconnic_srq_attr).
const SRQAttrSize = 24

// SRQAttr is a view of struct falconnic_srq_attr; it must be at least SRQAttrSize bytes.
type SRQAttr []byte

// SRQ returns srq.
func (v SRQAttr) SRQ() uint32 { return le.Uint32(v[0:]) }

// SetSRQ sets srq.
func (v SRQAttr) SetSRQ(x uint32) { le.PutUint32(v[0:], x) }

// AttrMask returns attr_mask.
func (v SRQAttr) AttrMask() uint32 { return le.Uint32(v[4:]) }

// SetAttrMask sets attr_mask.
func (v SRQAttr) SetAttrMask(x uint32) { le.PutUint32(v[4:], x) }

// MaxWR returns max_wr.
func (v SRQAttr) MaxWR() uint32 { return le.Uint32(v[8:]) }

// SetMaxWR sets max_wr.
func (v SRQAttr) SetMaxWR(x uint32) { le.PutUint32(v[8:], x) }

// MaxSGE returns max_sge.
func (v SRQAttr) MaxSGE() uint32 { return le.Uint32(v[12:]) }

// SetMaxSGE sets max_sge.
func (v SRQAttr) SetMaxSGE(x uint32) { le.PutUint32(v[12:], x) }

// SRQLimit returns srq_limit.
func (v SRQAttr) SRQLimit() uint32 { return le.Uint32(v[16:]) }

// SetSRQLimit sets srq_limit.
func (v SRQAttr) SetSRQLimit(x uint32) { le.PutUint32(v[16:], x) }

// CreateAHSize is sizeof(struct falconnic_create_ah).
const CreateAHSize = 56

// CreateAH is a view of struct falconnic_create_ah; it must be at least CreateAHSize bytes.
type CreateAH []byte

// AH returns ah.
func (v CreateAH) AH() uint32 { return le.Uint32(v[0:]) }

// SetAH sets ah.
func (v CreateAH) SetAH(x uint32) { le.PutUint32(v[0:], x) }

// PD returns pd.
func (v CreateAH) PD() uint32 { return le.Uint32(v[4:]) }

// SetPD sets pd.
func (v CreateAH) SetPD(x uint32) { le.PutUint32(v[4:], x) }

// AV returns the embedded AV.
func (v CreateAH) AV() AV { return AV(v[8:56]) }

// DoorbellSize is sizeof(struct falconnic_doorbell).
const DoorbellSize = 8

// Doorbell is a view of struct falconnic_doorbell; it must be at least DoorbellSize bytes.
type Doorbell []byte

// Handle returns handle.
func (v Doorbell) Handle() uint32 { return le.Uint32(v[0:]) }

// SetHandle sets handle.
func (v Doorbell) SetHandle(x uint32) { le.PutUint32(v[0:], x) }

// Producer returns producer.
func (v Doorbell) Producer() uint32 { return le.Uint32(v[4:]) }

// SetProducer sets producer.
func (v Doorbell) SetProducer(x uint32) { le.PutUint32(v[4:], x) }

// EventSize is sizeof(struct falconnic_event).
const EventSize = 16

// Event is a view of struct falconnic_event; it must be at least EventSize bytes.
type Event []byte

// Handle returns handle.
func (v Event) Handle() uint32 { return le.Uint32(v[0:]) }

// SetHandle sets handle.
func (v Event) SetHandle(x uint32) { le.PutUint32(v[0:], x) }

// Code returns code.
func (v Event) Code() uint32 { return le.Uint32(v[4:]) }

// SetCode sets code.
func (v Event) SetCode(x uint32) { le.PutUint32(v[4:], x) }

// Info returns info.
func (v Event) Info() uint64 { return le.Uint64(v[8:]) }

// SetInfo sets info.
func (v Event) SetInfo(x uint64) { le.PutUint64(v[8:], x) }
