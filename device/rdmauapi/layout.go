package rdmauapi

// FieldLayout is one field of a C struct of the uapi header.
type FieldLayout struct {
	C      string // field name in C
	Go     string // accessor name (empty for reserved fields)
	Offset int
	Size   int
	Kind   FieldKind
}

// FieldKind says how a field is accessed.
type FieldKind uint8

// Field kinds.
const (
	KindScalar   FieldKind = iota // little-endian integer
	KindBytes                     // byte string (MAC, GID)
	KindStruct                    // embedded struct view
	KindReserved                  // reserved, no accessor
)

// StructLayout is one C struct of the uapi header.
type StructLayout struct {
	C      string // struct tag in C
	Go     string // view type
	Size   int
	Fields []FieldLayout
}

// Layouts lists every struct of the uapi header with its fields, in header order.
var Layouts = []StructLayout{
	{C: "falconnic_hdr", Go: "Hdr", Size: HdrSize, Fields: []FieldLayout{
		{C: "magic", Go: "Magic", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "version", Go: "Version", Offset: 4, Size: 2, Kind: KindScalar},
		{C: "opcode", Go: "Opcode", Offset: 6, Size: 2, Kind: KindScalar},
		{C: "instance", Go: "Instance", Offset: 8, Size: 8, Kind: KindScalar},
		{C: "req_id", Go: "ReqID", Offset: 16, Size: 4, Kind: KindScalar},
		{C: "flags", Go: "Flags", Offset: 20, Size: 2, Kind: KindScalar},
		{C: "length", Go: "Length", Offset: 22, Size: 2, Kind: KindScalar},
		{C: "status", Go: "Status", Offset: 24, Size: 4, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 28, Size: 4, Kind: KindReserved},
	}},
	{C: "falconnic_handle_req", Go: "HandleReq", Size: HandleReqSize, Fields: []FieldLayout{
		{C: "handle", Go: "Handle", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 4, Size: 4, Kind: KindReserved},
	}},
	{C: "falconnic_probe_req", Go: "ProbeReq", Size: ProbeReqSize, Fields: []FieldLayout{
		{C: "driver_version", Go: "DriverVersion", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "max_body", Go: "MaxBody", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 8, Size: 8, Kind: KindReserved},
	}},
	{C: "falconnic_open_req", Go: "OpenReq", Size: OpenReqSize, Fields: []FieldLayout{
		{C: "driver_version", Go: "DriverVersion", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 4, Size: 4, Kind: KindReserved},
	}},
	{C: "falconnic_device_attr", Go: "DeviceAttr", Size: DeviceAttrSize, Fields: []FieldLayout{
		{C: "fw_ver", Go: "FWVer", Offset: 0, Size: 8, Kind: KindScalar},
		{C: "max_mr_size", Go: "MaxMRSize", Offset: 8, Size: 8, Kind: KindScalar},
		{C: "page_size_cap", Go: "PageSizeCap", Offset: 16, Size: 8, Kind: KindScalar},
		{C: "mac", Go: "MAC", Offset: 24, Size: 6, Kind: KindBytes},
		{C: "nports", Go: "Nports", Offset: 30, Size: 2, Kind: KindScalar},
		{C: "vendor_id", Go: "VendorID", Offset: 32, Size: 4, Kind: KindScalar},
		{C: "vendor_part_id", Go: "VendorPartID", Offset: 36, Size: 4, Kind: KindScalar},
		{C: "hw_ver", Go: "HWVer", Offset: 40, Size: 4, Kind: KindScalar},
		{C: "max_qp", Go: "MaxQP", Offset: 44, Size: 4, Kind: KindScalar},
		{C: "max_qp_wr", Go: "MaxQPWR", Offset: 48, Size: 4, Kind: KindScalar},
		{C: "max_send_sge", Go: "MaxSendSGE", Offset: 52, Size: 4, Kind: KindScalar},
		{C: "max_recv_sge", Go: "MaxRecvSGE", Offset: 56, Size: 4, Kind: KindScalar},
		{C: "max_sge_rd", Go: "MaxSGERd", Offset: 60, Size: 4, Kind: KindScalar},
		{C: "max_cq", Go: "MaxCQ", Offset: 64, Size: 4, Kind: KindScalar},
		{C: "max_cqe", Go: "MaxCQE", Offset: 68, Size: 4, Kind: KindScalar},
		{C: "max_mr", Go: "MaxMR", Offset: 72, Size: 4, Kind: KindScalar},
		{C: "max_pd", Go: "MaxPD", Offset: 76, Size: 4, Kind: KindScalar},
		{C: "max_qp_rd_atom", Go: "MaxQPRdAtom", Offset: 80, Size: 4, Kind: KindScalar},
		{C: "max_qp_init_rd_atom", Go: "MaxQPInitRdAtom", Offset: 84, Size: 4, Kind: KindScalar},
		{C: "max_srq", Go: "MaxSRQ", Offset: 88, Size: 4, Kind: KindScalar},
		{C: "max_srq_wr", Go: "MaxSRQWR", Offset: 92, Size: 4, Kind: KindScalar},
		{C: "max_srq_sge", Go: "MaxSRQSGE", Offset: 96, Size: 4, Kind: KindScalar},
		{C: "max_ah", Go: "MaxAH", Offset: 100, Size: 4, Kind: KindScalar},
		{C: "max_inline_data", Go: "MaxInlineData", Offset: 104, Size: 4, Kind: KindScalar},
		{C: "cap_flags", Go: "CapFlags", Offset: 108, Size: 4, Kind: KindScalar},
		{C: "max_fast_reg_pages", Go: "MaxFastRegPages", Offset: 112, Size: 4, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 116, Size: 4, Kind: KindReserved},
	}},
	{C: "falconnic_port_attr", Go: "PortAttr", Size: PortAttrSize, Fields: []FieldLayout{
		{C: "state", Go: "State", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "max_mtu", Go: "MaxMTU", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "active_mtu", Go: "ActiveMTU", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "max_msg_sz", Go: "MaxMsgSz", Offset: 12, Size: 4, Kind: KindScalar},
		{C: "active_speed", Go: "ActiveSpeed", Offset: 16, Size: 1, Kind: KindScalar},
		{C: "active_width", Go: "ActiveWidth", Offset: 17, Size: 1, Kind: KindScalar},
		{C: "phys_state", Go: "PhysState", Offset: 18, Size: 1, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 19, Size: 5, Kind: KindReserved},
	}},
	{C: "falconnic_pbl", Go: "PBL", Size: PBLSize, Fields: []FieldLayout{
		{C: "root", Go: "Root", Offset: 0, Size: 8, Kind: KindScalar},
		{C: "npages", Go: "Npages", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "levels", Go: "Levels", Offset: 12, Size: 1, Kind: KindScalar},
		{C: "page_shift", Go: "PageShift", Offset: 13, Size: 1, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 14, Size: 2, Kind: KindReserved},
	}},
	{C: "falconnic_reg_mr", Go: "RegMR", Size: RegMRSize, Fields: []FieldLayout{
		{C: "mr", Go: "MR", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "pd", Go: "PD", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "lkey", Go: "LKey", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "rkey", Go: "RKey", Offset: 12, Size: 4, Kind: KindScalar},
		{C: "iova", Go: "IOVA", Offset: 16, Size: 8, Kind: KindScalar},
		{C: "length", Go: "Length", Offset: 24, Size: 8, Kind: KindScalar},
		{C: "access", Go: "Access", Offset: 32, Size: 4, Kind: KindScalar},
		{C: "first_offset", Go: "FirstOffset", Offset: 36, Size: 4, Kind: KindScalar},
		{C: "pbl", Go: "PBL", Offset: 40, Size: 16, Kind: KindStruct},
	}},
	{C: "falconnic_alloc_mr", Go: "AllocMR", Size: AllocMRSize, Fields: []FieldLayout{
		{C: "mr", Go: "MR", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "pd", Go: "PD", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "key", Go: "Key", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 12, Size: 4, Kind: KindReserved},
		{C: "pbl", Go: "PBL", Offset: 16, Size: 16, Kind: KindStruct},
	}},
	{C: "falconnic_reg_wr", Go: "RegWR", Size: RegWRSize, Fields: []FieldLayout{
		{C: "mr", Go: "MR", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "key", Go: "Key", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "access", Go: "Access", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "npages", Go: "Npages", Offset: 12, Size: 4, Kind: KindScalar},
		{C: "iova", Go: "IOVA", Offset: 16, Size: 8, Kind: KindScalar},
		{C: "length", Go: "Length", Offset: 24, Size: 8, Kind: KindScalar},
	}},
	{C: "falconnic_ring", Go: "Ring", Size: RingSize, Fields: []FieldLayout{
		{C: "pbl", Go: "PBL", Offset: 0, Size: 16, Kind: KindStruct},
		{C: "slots", Go: "Slots", Offset: 16, Size: 4, Kind: KindScalar},
		{C: "log2_elem_size", Go: "Log2ElemSize", Offset: 20, Size: 4, Kind: KindScalar},
		{C: "max_sge", Go: "MaxSGE", Offset: 24, Size: 4, Kind: KindScalar},
		{C: "max_inline", Go: "MaxInline", Offset: 28, Size: 4, Kind: KindScalar},
	}},
	{C: "falconnic_create_cq", Go: "CreateCQ", Size: CreateCQSize, Fields: []FieldLayout{
		{C: "cq", Go: "CQ", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "cqe", Go: "CQE", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "ring", Go: "Ring", Offset: 8, Size: 32, Kind: KindStruct},
	}},
	{C: "falconnic_arm_cq", Go: "ArmCQ", Size: ArmCQSize, Fields: []FieldLayout{
		{C: "cq", Go: "CQ", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "flags", Go: "Flags", Offset: 4, Size: 4, Kind: KindScalar},
	}},
	{C: "falconnic_create_qp", Go: "CreateQP", Size: CreateQPSize, Fields: []FieldLayout{
		{C: "qp", Go: "QP", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "pd", Go: "PD", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "send_cq", Go: "SendCQ", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "recv_cq", Go: "RecvCQ", Offset: 12, Size: 4, Kind: KindScalar},
		{C: "srq", Go: "SRQ", Offset: 16, Size: 4, Kind: KindScalar},
		{C: "type", Go: "Type", Offset: 20, Size: 1, Kind: KindScalar},
		{C: "sq_sig_all", Go: "SQSigAll", Offset: 21, Size: 1, Kind: KindScalar},
		{C: "flags", Go: "Flags", Offset: 22, Size: 1, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 23, Size: 1, Kind: KindReserved},
		{C: "sq", Go: "SQ", Offset: 24, Size: 32, Kind: KindStruct},
		{C: "rq", Go: "RQ", Offset: 56, Size: 32, Kind: KindStruct},
	}},
	{C: "falconnic_av", Go: "AV", Size: AVSize, Fields: []FieldLayout{
		{C: "port_num", Go: "PortNum", Offset: 0, Size: 1, Kind: KindScalar},
		{C: "network_type", Go: "NetworkType", Offset: 1, Size: 1, Kind: KindScalar},
		{C: "dmac", Go: "DMAC", Offset: 2, Size: 6, Kind: KindBytes},
		{C: "flow_label", Go: "FlowLabel", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "sgid_index", Go: "SGIDIndex", Offset: 12, Size: 1, Kind: KindScalar},
		{C: "hop_limit", Go: "HopLimit", Offset: 13, Size: 1, Kind: KindScalar},
		{C: "traffic_class", Go: "TrafficClass", Offset: 14, Size: 1, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 15, Size: 1, Kind: KindReserved},
		{C: "sgid", Go: "SGID", Offset: 16, Size: 16, Kind: KindBytes},
		{C: "dgid", Go: "DGID", Offset: 32, Size: 16, Kind: KindBytes},
	}},
	{C: "falconnic_qp_attr", Go: "QPAttr", Size: QPAttrSize, Fields: []FieldLayout{
		{C: "qp", Go: "QP", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "attr_mask", Go: "AttrMask", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "qp_state", Go: "QPState", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "cur_qp_state", Go: "CurQPState", Offset: 12, Size: 4, Kind: KindScalar},
		{C: "path_mtu", Go: "PathMTU", Offset: 16, Size: 4, Kind: KindScalar},
		{C: "qkey", Go: "QKey", Offset: 20, Size: 4, Kind: KindScalar},
		{C: "rq_psn", Go: "RQPSN", Offset: 24, Size: 4, Kind: KindScalar},
		{C: "sq_psn", Go: "SQPSN", Offset: 28, Size: 4, Kind: KindScalar},
		{C: "dest_qp_num", Go: "DestQPNum", Offset: 32, Size: 4, Kind: KindScalar},
		{C: "access_flags", Go: "AccessFlags", Offset: 36, Size: 4, Kind: KindScalar},
		{C: "pkey_index", Go: "PkeyIndex", Offset: 40, Size: 2, Kind: KindScalar},
		{C: "port_num", Go: "PortNum", Offset: 42, Size: 1, Kind: KindScalar},
		{C: "max_rd_atomic", Go: "MaxRdAtomic", Offset: 43, Size: 1, Kind: KindScalar},
		{C: "max_dest_rd_atomic", Go: "MaxDestRdAtomic", Offset: 44, Size: 1, Kind: KindScalar},
		{C: "min_rnr_timer", Go: "MinRNRTimer", Offset: 45, Size: 1, Kind: KindScalar},
		{C: "timeout", Go: "Timeout", Offset: 46, Size: 1, Kind: KindScalar},
		{C: "retry_cnt", Go: "RetryCnt", Offset: 47, Size: 1, Kind: KindScalar},
		{C: "rnr_retry", Go: "RNRRetry", Offset: 48, Size: 1, Kind: KindScalar},
		{C: "sq_draining", Go: "SQDraining", Offset: 49, Size: 1, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 50, Size: 6, Kind: KindReserved},
		{C: "av", Go: "AV", Offset: 56, Size: 48, Kind: KindStruct},
	}},
	{C: "falconnic_create_srq", Go: "CreateSRQ", Size: CreateSRQSize, Fields: []FieldLayout{
		{C: "srq", Go: "SRQ", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "pd", Go: "PD", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "srq_limit", Go: "SRQLimit", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 12, Size: 4, Kind: KindReserved},
		{C: "ring", Go: "Ring", Offset: 16, Size: 32, Kind: KindStruct},
	}},
	{C: "falconnic_srq_attr", Go: "SRQAttr", Size: SRQAttrSize, Fields: []FieldLayout{
		{C: "srq", Go: "SRQ", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "attr_mask", Go: "AttrMask", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "max_wr", Go: "MaxWR", Offset: 8, Size: 4, Kind: KindScalar},
		{C: "max_sge", Go: "MaxSGE", Offset: 12, Size: 4, Kind: KindScalar},
		{C: "srq_limit", Go: "SRQLimit", Offset: 16, Size: 4, Kind: KindScalar},
		{C: "reserved", Go: "", Offset: 20, Size: 4, Kind: KindReserved},
	}},
	{C: "falconnic_create_ah", Go: "CreateAH", Size: CreateAHSize, Fields: []FieldLayout{
		{C: "ah", Go: "AH", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "pd", Go: "PD", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "av", Go: "AV", Offset: 8, Size: 48, Kind: KindStruct},
	}},
	{C: "falconnic_doorbell", Go: "Doorbell", Size: DoorbellSize, Fields: []FieldLayout{
		{C: "handle", Go: "Handle", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "producer", Go: "Producer", Offset: 4, Size: 4, Kind: KindScalar},
	}},
	{C: "falconnic_event", Go: "Event", Size: EventSize, Fields: []FieldLayout{
		{C: "handle", Go: "Handle", Offset: 0, Size: 4, Kind: KindScalar},
		{C: "code", Go: "Code", Offset: 4, Size: 4, Kind: KindScalar},
		{C: "info", Go: "Info", Offset: 8, Size: 8, Kind: KindScalar},
	}},
}
