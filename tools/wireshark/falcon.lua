-- falcon.lua: a Wireshark dissector for falconnic's wire formats.
--
--   tshark -X lua_script:tools/wireshark/falcon.lua -r capture.pcapng
--   wireshark -X lua_script:tools/wireshark/falcon.lua capture.pcapng
--   (or copy it to ~/.local/lib/wireshark/plugins/)
--
-- It decodes, as the Go encoders write them:
--   * the UDP fabric between daemons (device/fabric_wire.go): a 12-byte
--     header (magic 0xFA1C, version 1, kind, flow label, length), then an
--     Ethernet frame, a Falcon packet or a connection-manager message. Found
--     by a heuristic on any UDP port (magic, version, kind, length), and on
--     the port set in the preferences;
--   * Falcon packets (falcon/wire, OCP Falcon Rev 0.9 §7): the base header
--     of Pull Request, Pull Data, Push Data and Resync; BACK, EACK (with its
--     three bitmaps) and NACK; followed by the PSP stand-in envelope
--     (IV timestamp, ICV: falcon/envelope.go). Falcon frames without the
--     fabric header (between two ports of a daemon, and falcon/link's
--     captures of in-memory links) are on UDP port 1000;
--   * the ULP headers by the base header's protocol: RDMA's RBTH and the
--     extension headers its opcode requires (falcon/wire/rdma.go), NVMe's
--     NBTH with its command or status word (falcon/wire/nvme.go);
--   * connection-manager messages (device/cm/wire.go);
--   * on a secure fabric (the default), what a tap on the wire sees: each
--     Falcon packet in a PSP datagram (psp/header.go: next header 252,
--     SPI, IV = timestamp | sequence, the Falcon packet's first word in the
--     clear — version and destination CID —, the rest encrypted, a 16-byte
--     ICV), and each CM message in an authenticated envelope
--     (psp/cmauth/msg.go: magic "FNCA", the sender's time, nonce and
--     daemon ID in the clear, the SA offer and message sealed). The
--     encrypted parts are shown as such, unless a key log is set;
--   * with a key log (`falconnic capture --keylog FILE`, format in
--     device/capture/keylog.go; preference falcon.keylog, e.g.
--     `tshark -o falcon.keylog:FILE`), the sealed datagrams decrypted: the
--     AES-GCM tag checked with each key logged for the datagram's SPI (or
--     the fabric's CM key), the plaintext dissected as a plain capture's
--     packets are, and a tag that verifies under no key marked with
--     expert info. AES-GCM is falcon_gcm.lua (Wireshark 4.0's Lua has no
--     cipher), loaded from this file's directory. Key-log lines that do
--     not parse are reported (expert info on the first sealed packet, and
--     a message) and skipped.
-- Expert info marks NACKs (with their code) and retransmissions: a Falcon
-- transaction packet whose (addresses, CID, window, PSN) was seen earlier
-- in the capture.
--
-- Bytes on the wire are not trusted: every field is read only when the
-- packet is long enough for it; a short or inconsistent packet gets an
-- expert error, never a Lua error.

local fabric = Proto("falconfab", "falconnic Fabric")
local falcon = Proto("falcon", "Falcon Transport")
local rdma = Proto("falcon_rdma", "RDMA over Falcon")
local nvme = Proto("falcon_nvme", "NVMe over Falcon")
local cmp = Proto("falcon_cm", "falconnic Connection Manager")
local pspp = Proto("falcon_psp", "PSP (falconnic fabric encryption)")
local cmauthp = Proto("falcon_cmauth", "falconnic CM envelope (authenticated, sealed)")

-- Tables: one row per value (the Go tables they mirror are named).

local fabric_kinds = { [1] = "Ethernet", [2] = "Falcon", [3] = "CM" } -- fabricKinds

-- falcon/wire typeTable: name, header length, window ("req", "data" or nil)
local falcon_types = {
  [0] = { "PullRequest", 32, "req" },
  [3] = { "PullData", 24, "data" },
  [5] = { "PushData", 28, "data" },
  [6] = { "Resync", 32, nil },
  [8] = { "NACK", 40, nil },
  [9] = { "BACK", 32, nil },
  [10] = { "EACK", 72, nil },
}
local falcon_type_names = {}
for k, v in pairs(falcon_types) do falcon_type_names[k] = v[1] end

local proto_names = { [2] = "RDMA", [3] = "NVMe" }
local nack_codes = { -- wire.NackCode
  [1] = "InsufficientResources", [2] = "RNR", [4] = "XLR", [5] = "OutOfWindow",
  [6] = "CIE", [7] = "NRE", [8] = "InvalidCID",
}
local resync_codes = { [1] = "TargetCIE", [2] = "LocalXLR" }
local cm_types = { [1] = "REQ", [2] = "REP", [3] = "REJ" }

-- RDMA extension headers in wire order (wire.RDMAExt) and their lengths.
local EXT = { XRCETH = 1, DETH = 2, RETH = 3, SETH = 4, OETH = 5, STETH = 6, AtomicETH = 7, AtomicAckETH = 8, ImmDt = 9, IETH = 10 }
local ext_order = { "XRCETH", "DETH", "RETH", "SETH", "OETH", "STETH", "AtomicETH", "AtomicAckETH", "ImmDt", "IETH" }
local ext_len = { XRCETH = 4, DETH = 8, RETH = 16, SETH = 4, OETH = 4, STETH = 12, AtomicETH = 28, AtomicAckETH = 8, ImmDt = 4, IETH = 4 }

-- wire.rdmaOps: opcode -> name, extension headers
local rdma_ops = {
  [0x00] = { "SendFirst", { "SETH", "OETH" } },
  [0x01] = { "SendMiddle", { "SETH", "OETH" } },
  [0x02] = { "SendLast", { "SETH", "OETH" } },
  [0x03] = { "SendLastImm", { "SETH", "OETH", "ImmDt" } },
  [0x04] = { "SendOnly", { "SETH", "OETH" } },
  [0x05] = { "SendOnlyImm", { "SETH", "OETH", "ImmDt" } },
  [0x06] = { "WriteFirst", { "RETH" } },
  [0x07] = { "WriteMiddle", { "RETH" } },
  [0x08] = { "WriteLast", { "RETH" } },
  [0x09] = { "WriteLastImm", { "RETH", "SETH", "ImmDt" } },
  [0x0a] = { "WriteOnly", { "RETH" } },
  [0x0b] = { "WriteOnlyImm", { "RETH", "SETH", "ImmDt" } },
  [0x0c] = { "ReadRequest", { "RETH", "SETH", "STETH" } },
  [0x0d] = { "ReadResponseFirst", { "STETH" } },
  [0x0e] = { "ReadResponseMiddle", { "STETH" } },
  [0x0f] = { "ReadResponseLast", { "STETH" } },
  [0x10] = { "ReadResponseOnly", { "STETH" } },
  [0x12] = { "AtomicResponse", { "STETH", "AtomicAckETH" } },
  [0x13] = { "CompareSwap", { "SETH", "STETH", "AtomicETH" } },
  [0x14] = { "FetchAdd", { "SETH", "STETH", "AtomicETH" } },
  [0x16] = { "SendLastInv", { "SETH", "OETH", "IETH" } },
  [0x17] = { "SendOnlyInv", { "SETH", "OETH", "IETH" } },
  [0x64] = { "UDSendOnly", { "DETH" } },
  [0x65] = { "UDSendOnlyImm", { "DETH", "ImmDt" } },
}
local rdma_op_names = {}
for k, v in pairs(rdma_ops) do rdma_op_names[k] = v[1] end

-- wire.nvmeTypes: type -> name, bytes after the NBTH (command 32, status 4)
local nvme_types = {
  [0] = { "WriteRequest", 32 },
  [1] = { "WriteDataRequest", 0 },
  [2] = { "WriteDataResponse", 0 },
  [3] = { "WriteCompletion", 4 },
  [4] = { "ReadRequest", 32 },
  [5] = { "ReadResponse", 4 },
}
local nvme_type_names = {}
for k, v in pairs(nvme_types) do nvme_type_names[k] = v[1] end

-- Fields.

local ff = {
  magic = ProtoField.uint16("falconfab.magic", "Magic", base.HEX),
  version = ProtoField.uint8("falconfab.version", "Version"),
  kind = ProtoField.uint8("falconfab.kind", "Kind", base.DEC, fabric_kinds),
  flow = ProtoField.uint32("falconfab.flow", "Flow label", base.HEX),
  length = ProtoField.uint16("falconfab.length", "Payload length"),
  reserved = ProtoField.uint16("falconfab.reserved", "Reserved", base.HEX),
}
fabric.fields = { ff.magic, ff.version, ff.kind, ff.flow, ff.length, ff.reserved }

local f = {
  version = ProtoField.uint8("falcon.version", "Version", base.DEC, nil, 0xf0),
  cid = ProtoField.uint24("falcon.cid", "Destination CID"),
  dest_fn = ProtoField.uint24("falcon.dest_function", "Destination function", base.HEX),
  protocol = ProtoField.uint8("falcon.protocol", "Protocol", base.DEC, proto_names, 0xe0),
  type = ProtoField.uint8("falcon.type", "Packet type", base.DEC, falcon_type_names, 0x1e),
  ar = ProtoField.bool("falcon.ar", "Ack request", 8, nil, 0x01),
  data_base = ProtoField.uint32("falcon.data_base", "Receiver data window base PSN"),
  req_base = ProtoField.uint32("falcon.req_base", "Receiver request window base PSN"),
  psn = ProtoField.uint32("falcon.psn", "PSN"),
  rsn = ProtoField.uint32("falcon.rsn", "RSN"),
  req_len = ProtoField.uint16("falcon.request_length", "Request length"),
  resync_code = ProtoField.uint8("falcon.resync_code", "Resync code", base.DEC, resync_codes),
  resync_type = ProtoField.uint8("falcon.resync_orig_type", "Original packet type", base.DEC, falcon_type_names, 0xf0),
  vendor = ProtoField.uint32("falcon.vendor_defined", "Vendor defined", base.HEX),
  t1 = ProtoField.uint32("falcon.t1", "T1 (131.072 ns)"),
  t2 = ProtoField.uint32("falcon.t2", "T2 (131.072 ns)"),
  hops = ProtoField.uint8("falcon.hop_count", "Hop count"),
  rx_level = ProtoField.uint8("falcon.rx_buffer_level", "Rx buffer level"),
  ecn = ProtoField.uint16("falcon.ecn_count", "ECN count"),
  rue = ProtoField.uint32("falcon.rue_value", "RUE value", base.HEX),
  own_data = ProtoField.bool("falcon.own_data", "D-OWN (data window out of window)"),
  own_req = ProtoField.bool("falcon.own_req", "R-OWN (request window out of window)"),
  ack_bitmap = ProtoField.bytes("falcon.data_ack_bitmap", "Data-ack bitmap (128)"),
  rx_bitmap = ProtoField.bytes("falcon.data_rx_bitmap", "Data-rx bitmap (128)"),
  req_bitmap = ProtoField.bytes("falcon.req_bitmap", "Request bitmap (64)"),
  bitmap_psns = ProtoField.string("falcon.bitmap_psns", "PSNs set"),
  nack_psn = ProtoField.uint32("falcon.nack_psn", "NACK PSN"),
  nack_code = ProtoField.uint8("falcon.nack_code", "NACK code", base.DEC, nack_codes),
  rnr_to = ProtoField.uint8("falcon.rnr_timeout", "RNR timeout code", base.DEC, nil, 0x1f),
  nack_window = ProtoField.string("falcon.nack_window", "NACKed window"),
  ulp_code = ProtoField.uint8("falcon.ulp_nack_code", "ULP NACK code"),
  payload = ProtoField.bytes("falcon.payload", "Payload"),
  iv = ProtoField.uint32("falcon.iv", "IV timestamp (131.072 ns)"),
  icv = ProtoField.uint32("falcon.icv", "ICV", base.HEX),
  retx_of = ProtoField.framenum("falcon.retransmission_of", "Retransmission of"),
}
falcon.fields = {
  f.version, f.cid, f.dest_fn, f.protocol, f.type, f.ar, f.data_base, f.req_base, f.psn, f.rsn, f.req_len,
  f.resync_code, f.resync_type, f.vendor, f.t1, f.t2, f.hops, f.rx_level, f.ecn, f.rue, f.own_data, f.own_req,
  f.ack_bitmap, f.rx_bitmap, f.req_bitmap, f.bitmap_psns, f.nack_psn, f.nack_code, f.rnr_to, f.nack_window,
  f.ulp_code, f.payload, f.iv, f.icv, f.retx_of,
}

local ef = {
  retx = ProtoExpert.new("falcon.retransmission", "Retransmission", expert.group.SEQUENCE, expert.severity.NOTE),
  nack = ProtoExpert.new("falcon.nack.expert", "NACK", expert.group.SEQUENCE, expert.severity.WARN),
  short = ProtoExpert.new("falcon.short", "Packet shorter than its type's header", expert.group.MALFORMED, expert.severity.ERROR),
  bad_version = ProtoExpert.new("falcon.bad_version", "Unknown Falcon version", expert.group.MALFORMED, expert.severity.ERROR),
  bad_type = ProtoExpert.new("falcon.bad_type", "Reserved packet type", expert.group.MALFORMED, expert.severity.ERROR),
  own = ProtoExpert.new("falcon.own.expert", "Receiver dropped a packet beyond its window", expert.group.SEQUENCE, expert.severity.WARN),
}
falcon.experts = { ef.retx, ef.nack, ef.short, ef.bad_version, ef.bad_type, ef.own }

local rf = {
  version = ProtoField.uint8("falcon_rdma.version", "Version", base.DEC, nil, 0xf0),
  ce = ProtoField.bool("falcon_rdma.ce", "Complete in error", 8, nil, 0x10),
  pad = ProtoField.uint8("falcon_rdma.pad", "Pad count", base.DEC, nil, 0x0c),
  ackreq = ProtoField.bool("falcon_rdma.ackreq", "AckReq", 8, nil, 0x02),
  se = ProtoField.bool("falcon_rdma.se", "Solicited event", 8, nil, 0x01),
  opcode = ProtoField.uint8("falcon_rdma.opcode", "Opcode", base.HEX, rdma_op_names),
  dqp = ProtoField.uint24("falcon_rdma.dest_qp", "Destination QP", base.HEX),
  sn = ProtoField.uint32("falcon_rdma.sn", "Sequence number"),
  va = ProtoField.uint64("falcon_rdma.reth.va", "Virtual address", base.HEX),
  rkey = ProtoField.uint32("falcon_rdma.reth.rkey", "R_Key", base.HEX),
  dmalen = ProtoField.uint32("falcon_rdma.reth.dma_length", "DMA length"),
  rmsn = ProtoField.uint32("falcon_rdma.seth.rmsn", "RMSN"),
  offset = ProtoField.uint32("falcon_rdma.oeth.offset", "Message offset"),
  sink_va = ProtoField.uint64("falcon_rdma.steth.va", "Sink virtual address", base.HEX),
  lkey = ProtoField.uint32("falcon_rdma.steth.lkey", "L_Key", base.HEX),
  imm = ProtoField.uint32("falcon_rdma.immdt", "Immediate data", base.HEX),
  inv_rkey = ProtoField.uint32("falcon_rdma.ieth.rkey", "R_Key to invalidate", base.HEX),
  qkey = ProtoField.uint32("falcon_rdma.deth.qkey", "Q_Key", base.HEX),
  sqp = ProtoField.uint24("falcon_rdma.deth.src_qp", "Source QP", base.HEX),
  xrc = ProtoField.uint24("falcon_rdma.xrceth.srq", "XRC SRQ", base.HEX),
  atomic = ProtoField.bytes("falcon_rdma.atomiceth", "AtomicETH"),
  atomic_ack = ProtoField.uint64("falcon_rdma.atomicacketh.orig", "Original remote data", base.HEX),
  data = ProtoField.bytes("falcon_rdma.data", "Data"),
}
rdma.fields = { rf.version, rf.ce, rf.pad, rf.ackreq, rf.se, rf.opcode, rf.dqp, rf.sn, rf.va, rf.rkey, rf.dmalen, rf.rmsn,
  rf.offset, rf.sink_va, rf.lkey, rf.imm, rf.inv_rkey, rf.qkey, rf.sqp, rf.xrc, rf.atomic, rf.atomic_ack, rf.data }
local rdma_short = ProtoExpert.new("falcon_rdma.short", "RDMA headers cut short", expert.group.MALFORMED, expert.severity.ERROR)
local rdma_badop = ProtoExpert.new("falcon_rdma.bad_opcode", "Opcode not used over Falcon", expert.group.MALFORMED, expert.severity.ERROR)
rdma.experts = { rdma_short, rdma_badop }

local nf = {
  version = ProtoField.uint8("falcon_nvme.version", "Version", base.DEC, nil, 0xf0),
  type = ProtoField.uint8("falcon_nvme.type", "NVMe packet type", base.DEC, nvme_type_names, 0x0f),
  ini_fn = ProtoField.uint24("falcon_nvme.initiator_function", "Initiator function", base.HEX),
  inv = ProtoField.bool("falcon_nvme.inv", "Write data invalid", 8, nil, 0x20),
  split = ProtoField.bool("falcon_nvme.split", "Split", 8, nil, 0x10),
  ng = ProtoField.bool("falcon_nvme.ng", "nCMD group", 8, nil, 0x08),
  ttag = ProtoField.uint24("falcon_nvme.target_tag", "Target tag"),
  ncnt_total = ProtoField.uint8("falcon_nvme.ncnt_total", "NCNT total"),
  itag = ProtoField.uint24("falcon_nvme.initiator_tag", "Initiator tag"),
  ncnt_offset = ProtoField.uint8("falcon_nvme.ncnt_offset", "NCNT offset"),
  icmd = ProtoField.uint24("falcon_nvme.icmd", "iCMD identifier"),
  ins = ProtoField.uint16("falcon_nvme.cmd.initiator_nsid", "Initiator NSID"),
  tns = ProtoField.uint16("falcon_nvme.cmd.target_nsid", "Target NSID"),
  slba = ProtoField.uint64("falcon_nvme.cmd.slba", "Starting LBA"),
  nlb = ProtoField.uint16("falcon_nvme.cmd.nlb", "Number of LBAs (0-based)"),
  fua = ProtoField.bool("falcon_nvme.cmd.fua", "FUA", 8, nil, 0x02),
  sqid = ProtoField.uint8("falcon_nvme.cmd.target_sqid", "Target SQID"),
  status = ProtoField.uint16("falcon_nvme.status", "Status", base.HEX, nil, 0x7fff),
  data = ProtoField.bytes("falcon_nvme.data", "Data"),
}
nvme.fields = { nf.version, nf.type, nf.ini_fn, nf.inv, nf.split, nf.ng, nf.ttag, nf.ncnt_total, nf.itag, nf.ncnt_offset,
  nf.icmd, nf.ins, nf.tns, nf.slba, nf.nlb, nf.fua, nf.sqid, nf.status, nf.data }
local nvme_short = ProtoExpert.new("falcon_nvme.short", "NVMe headers cut short", expert.group.MALFORMED, expert.severity.ERROR)
local nvme_badtype = ProtoExpert.new("falcon_nvme.bad_type", "Reserved NVMe packet type", expert.group.MALFORMED, expert.severity.ERROR)
local nvme_err = ProtoExpert.new("falcon_nvme.error", "NVMe command failed", expert.group.RESPONSE_CODE, expert.severity.WARN)
nvme.experts = { nvme_short, nvme_badtype, nvme_err }

local cf = {
  magic = ProtoField.uint32("falcon_cm.magic", "Magic", base.HEX),
  version = ProtoField.uint8("falcon_cm.version", "Version"),
  type = ProtoField.uint8("falcon_cm.type", "Type", base.DEC, cm_types),
  ulp = ProtoField.uint8("falcon_cm.ulp", "ULP (0 = RDMA)"),
  src = ProtoField.ether("falcon_cm.src", "Source NIC"),
  dst = ProtoField.ether("falcon_cm.dst", "Destination NIC"),
  scid = ProtoField.uint32("falcon_cm.src_cid", "Sender's CID"),
  dcid = ProtoField.uint32("falcon_cm.dst_cid", "Receiver's CID"),
  req_psn = ProtoField.uint32("falcon_cm.req_psn", "Initial request-window PSN"),
  data_psn = ProtoField.uint32("falcon_cm.data_psn", "Initial data-window PSN"),
  rsn = ProtoField.uint32("falcon_cm.rsn", "Initial RSN"),
}
cmp.fields = { cf.magic, cf.version, cf.type, cf.ulp, cf.src, cf.dst, cf.scid, cf.dcid, cf.req_psn, cf.data_psn, cf.rsn }
local pf = {
  next_header = ProtoField.uint8("falcon_psp.next_header", "Next header"),
  ext_len = ProtoField.uint8("falcon_psp.hdr_ext_len", "Header ext length (8-octet units)"),
  crypt_off = ProtoField.uint8("falcon_psp.crypt_offset", "Crypt offset (4-octet units)", base.DEC, nil, 0x3f),
  version = ProtoField.uint8("falcon_psp.version", "Version", base.DEC, { [0] = "AES-GCM-128", [1] = "AES-GCM-256" }, 0x3c),
  spi = ProtoField.uint32("falcon_psp.spi", "SPI", base.HEX),
  key_slot = ProtoField.uint32("falcon_psp.key_slot", "Master key slot", base.DEC, nil, 0x80000000),
  iv_ts = ProtoField.uint32("falcon_psp.iv_timestamp", "IV timestamp (131.072 ns)"),
  iv_seq = ProtoField.uint32("falcon_psp.iv_sequence", "IV sequence number"),
  encrypted = ProtoField.bytes("falcon_psp.encrypted", "Encrypted Falcon packet (after its first word)"),
  icv = ProtoField.bytes("falcon_psp.icv", "ICV (AES-GCM tag)"),
  icv_ok = ProtoField.bool("falcon_psp.icv_ok", "ICV verified (key log)"),
  key_line = ProtoField.string("falcon_psp.key", "Key"),
}
pspp.fields = { pf.next_header, pf.ext_len, pf.crypt_off, pf.version, pf.spi, pf.key_slot, pf.iv_ts, pf.iv_seq, pf.encrypted, pf.icv,
  pf.icv_ok, pf.key_line }
local psp_short = ProtoExpert.new("falcon_psp.short", "PSP datagram shorter than its header, clear word and ICV", expert.group.MALFORMED, expert.severity.ERROR)
local psp_bad_icv = ProtoExpert.new("falcon_psp.icv_bad", "ICV does not verify under any key logged for this SPI", expert.group.DECRYPTION, expert.severity.ERROR)
local psp_no_key = ProtoExpert.new("falcon_psp.no_key", "No key for this SPI in the key log", expert.group.DECRYPTION, expert.severity.NOTE)
local keylog_bad = ProtoExpert.new("falcon_psp.keylog_error", "Key log lines ignored", expert.group.DECRYPTION, expert.severity.WARN)
pspp.experts = { psp_short, psp_bad_icv, psp_no_key, keylog_bad }
local af = {
  magic = ProtoField.string("falcon_cmauth.magic", "Magic"),
  version = ProtoField.uint8("falcon_cmauth.version", "Version"),
  id_len = ProtoField.uint8("falcon_cmauth.id_length", "Sender ID length"),
  time = ProtoField.uint64("falcon_cmauth.time", "Sender's time (Unix ns)"),
  nonce = ProtoField.bytes("falcon_cmauth.nonce", "Nonce"),
  id = ProtoField.string("falcon_cmauth.sender", "Sender daemon ID"),
  sealed = ProtoField.bytes("falcon_cmauth.sealed", "Sealed SA offer and CM message"),
  tag = ProtoField.bytes("falcon_cmauth.tag", "Tag"),
  tag_ok = ProtoField.bool("falcon_cmauth.tag_ok", "Tag verified (key log)"),
  sa_version = ProtoField.uint8("falcon_cmauth.sa.version", "SA PSP version", base.DEC, { [0] = "AES-GCM-128", [1] = "AES-GCM-256" }),
  sa_flags = ProtoField.uint8("falcon_cmauth.sa.offered", "SA offered", base.DEC, nil, 0x01),
  sa_spi = ProtoField.uint32("falcon_cmauth.sa.spi", "SA SPI", base.HEX),
  sa_key = ProtoField.bytes("falcon_cmauth.sa.key", "SA key"),
}
cmauthp.fields = { af.magic, af.version, af.id_len, af.time, af.nonce, af.id, af.sealed, af.tag, af.tag_ok, af.sa_version,
  af.sa_flags, af.sa_spi, af.sa_key }
local cmauth_short = ProtoExpert.new("falcon_cmauth.short", "CM envelope shorter than its header, ID and tag", expert.group.MALFORMED, expert.severity.ERROR)
local cmauth_bad_tag = ProtoExpert.new("falcon_cmauth.tag_bad", "Tag does not verify under the key log's CM keys", expert.group.DECRYPTION, expert.severity.ERROR)
cmauthp.experts = { cmauth_short, cmauth_bad_tag }
local cm_short = ProtoExpert.new("falcon_cm.short", "CM message shorter than 48 bytes", expert.group.MALFORMED, expert.severity.ERROR)
local cm_rej = ProtoExpert.new("falcon_cm.rej", "Connection rejected", expert.group.RESPONSE_CODE, expert.severity.WARN)
cmp.experts = { cm_short, cm_rej }

fabric.prefs.port = Pref.uint("UDP port", 7471, "A UDP port the fabric listens on (the heuristic finds the others)")
falcon.prefs.envelope = Pref.bool("Envelope", true,
  "Falcon frames end with the 8-byte envelope (IV timestamp, ICV) as the daemon sends them")
falcon.prefs.keylog = Pref.string("Key log", "",
  "Key log written by `falconnic capture --keylog` (a secret): decrypts PSP datagrams and CM envelopes")

-- The key log (device/capture/keylog.go): read at each dissection start.
local gcm
do
  local src = debug.getinfo(1, "S").source
  local dir = src:match("^@(.*[/\\])") or ""
  local ok, m = pcall(dofile, dir .. "falcon_gcm.lua")
  if ok then gcm = m else gcm = nil end
end

local MAX_KEYLOG_LINES = 100000
local keylog = { psp = {}, cm = {}, errors = {}, nerrors = 0, loaded = false }
local keylog_reported = nil -- the last problem report_failure showed

local function keylog_error(msg)
  keylog.nerrors = keylog.nerrors + 1
  if #keylog.errors < 5 then keylog.errors[#keylog.errors + 1] = msg end
end

-- keylog_add_psp adds a key for spi unless it is there already.
local function keylog_add_psp(spi, version, key, what)
  local list = keylog.psp[spi]
  if list == nil then
    list = {}
    keylog.psp[spi] = list
  end
  for _, k in ipairs(list) do
    if k.raw == key and k.version == version then return end
  end
  local ctx = gcm.new(key)
  if ctx then table.insert(list, 1, { raw = key, version = version, ctx = ctx, what = what }) end
end

local psp_algs = { ["aes-gcm-128"] = { 0, 16 }, ["aes-gcm-256"] = { 1, 32 } }

local function keylog_line(n, line)
  local w = {}
  for x in line:gmatch("%S+") do
    w[#w + 1] = x
    if #w > 8 then break end
  end
  if #w == 0 or w[1]:sub(1, 1) == "#" then return end
  local where = "line " .. n .. ": "
  if w[1] == "PSP" then
    if #w < 5 or #w > 6 then return keylog_error(where .. "PSP needs: PSP SPI DIR ALG KEY [NIC]") end
    if #w[2] ~= 8 or w[2]:find("[^0-9a-fA-F]") then return keylog_error(where .. "SPI is not 8 hex digits") end
    if w[3] ~= "rx" and w[3] ~= "tx" then return keylog_error(where .. "direction is not rx or tx") end
    local alg = psp_algs[w[4]]
    if alg == nil then return keylog_error(where .. "unknown algorithm " .. w[4]:sub(1, 20)) end
    local key = gcm.from_hex(w[5])
    if key == nil or #key ~= alg[2] then return keylog_error(where .. "key is not " .. alg[2] .. " bytes of hex") end
    local spi = tonumber(w[2], 16)
    if spi == 0 then return keylog_error(where .. "SPI 0 is not valid") end
    keylog_add_psp(spi, alg[1], key, "key log line " .. n .. " (" .. w[3] .. (w[6] and (", " .. w[6]) or "") .. ")")
  elseif w[1] == "CMAUTH" then
    if #w ~= 4 then return keylog_error(where .. "CMAUTH needs: CMAUTH FINGERPRINT aes-256-gcm KEY") end
    if w[3] ~= "aes-256-gcm" then return keylog_error(where .. "unknown algorithm " .. w[3]:sub(1, 20)) end
    local key = gcm.from_hex(w[4])
    if key == nil or #key ~= 32 then return keylog_error(where .. "key is not 32 bytes of hex") end
    for _, k in ipairs(keylog.cm) do
      if k.raw == key then return end
    end
    keylog.cm[#keylog.cm + 1] = { raw = key, ctx = gcm.new(key), what = "key log line " .. n .. " (fabric " .. w[2] .. ")" }
  else
    keylog_error(where .. "unknown record " .. w[1]:sub(1, 20))
  end
end

local function keylog_load()
  keylog = { psp = {}, cm = {}, errors = {}, nerrors = 0, loaded = false }
  local path = falcon.prefs.keylog
  if path == nil or path == "" then return end
  keylog.loaded = true
  if gcm == nil then
    keylog_error("falcon_gcm.lua (AES-GCM) did not load from the dissector's directory: nothing decrypts")
  else
    local f, err = io.open(path, "rb")
    if f == nil then
      keylog_error("cannot open " .. tostring(err))
    else
      local n = 0
      for line in f:lines() do
        n = n + 1
        if n > MAX_KEYLOG_LINES then
          keylog_error("more than " .. MAX_KEYLOG_LINES .. " lines: the rest ignored")
          break
        end
        local ok, e = pcall(keylog_line, n, line)
        if not ok then keylog_error("line " .. n .. ": " .. tostring(e)) end
      end
      f:close()
    end
  end
  if keylog.nerrors > 0 then
    local msg = "Falcon dissector: key log " .. path .. ": " .. keylog.nerrors .. " problem(s), those lines ignored: " ..
      table.concat(keylog.errors, "; ")
    keylog.message = msg
    if keylog_reported ~= msg then
      keylog_reported = msg
      report_failure(msg)
    end
  end
end

-- The first sealed frame carries the key log's problems as expert info.
local keylog_note_frame = nil
local function note_keylog(pinfo, t)
  if keylog.nerrors == 0 then return end
  if keylog_note_frame == nil and not pinfo.visited then keylog_note_frame = pinfo.number end
  if keylog_note_frame == pinfo.number then
    t:add_proto_expert_info(keylog_bad, keylog.message)
  end
end

-- Retransmission tracking: key -> first frame; frame -> first frame.
local first_seen, retx_of = {}, {}
local psp_key_of = {} -- frame -> the key that opened it, or false
function falcon.init()
  first_seen, retx_of = {}, {}
  psp_key_of, keylog_note_frame = {}, nil
  keylog_load()
end

local function add_set_psns(tree, tvb, base_psn, nbits)
  -- wire bitmap: one big-endian integer; bit n (n = 0 is the last byte's
  -- LSB) = base PSN + n
  local set, nbytes = {}, nbits / 8
  for i = 0, nbytes - 1 do
    local byte = tvb(nbytes - 1 - i, 1):uint()
    for b = 0, 7 do
      if bit.band(byte, bit.lshift(1, b)) ~= 0 then
        set[#set + 1] = tostring((base_psn + i * 8 + b) % 4294967296)
        if #set >= 32 then break end
      end
    end
  end
  if #set > 0 then tree:add(f.bitmap_psns, table.concat(set, ",")) end
end

local function dissect_rdma(tvb, pinfo, tree)
  local t = tree:add(rdma, tvb())
  if tvb:len() < 12 then
    t:add_proto_expert_info(rdma_short)
    return
  end
  t:add(rf.version, tvb(0, 1))
  t:add(rf.ce, tvb(2, 1))
  t:add(rf.pad, tvb(2, 1))
  t:add(rf.ackreq, tvb(2, 1))
  t:add(rf.se, tvb(2, 1))
  t:add(rf.opcode, tvb(3, 1))
  t:add(rf.dqp, tvb(4, 3))
  t:add(rf.sn, tvb(8, 4))
  local op = tvb(3, 1):uint()
  local info = rdma_ops[op]
  if info == nil then
    t:add_proto_expert_info(rdma_badop)
    return
  end
  pinfo.cols.info:append(" " .. info[1] .. " QP=" .. tvb(4, 3):uint() .. " SN=" .. tvb(8, 4):uint())
  local has = {}
  for _, e in ipairs(info[2]) do has[e] = true end
  local off = 12
  for _, e in ipairs(ext_order) do
    if has[e] then
      local n = ext_len[e]
      if tvb:len() < off + n then
        t:add_proto_expert_info(rdma_short)
        return
      end
      local r = tvb(off, n)
      local st = t:add(rdma, r, e)
      st:set_text(e)
      if e == "RETH" then
        st:add(rf.va, r(0, 8)); st:add(rf.rkey, r(8, 4)); st:add(rf.dmalen, r(12, 4))
      elseif e == "SETH" then
        st:add(rf.rmsn, r(0, 4))
      elseif e == "OETH" then
        st:add(rf.offset, r(0, 4))
      elseif e == "STETH" then
        st:add(rf.sink_va, r(0, 8)); st:add(rf.lkey, r(8, 4))
      elseif e == "ImmDt" then
        st:add(rf.imm, r(0, 4))
      elseif e == "IETH" then
        st:add(rf.inv_rkey, r(0, 4))
      elseif e == "DETH" then
        st:add(rf.qkey, r(0, 4)); st:add(rf.sqp, r(5, 3))
      elseif e == "XRCETH" then
        st:add(rf.xrc, r(1, 3))
      elseif e == "AtomicETH" then
        st:add(rf.atomic, r)
      elseif e == "AtomicAckETH" then
        st:add(rf.atomic_ack, r(0, 8))
      end
      off = off + n
    end
  end
  if tvb:len() > off then t:add(rf.data, tvb(off)) end
end

local function dissect_nvme(tvb, pinfo, tree)
  local t = tree:add(nvme, tvb())
  if tvb:len() < 32 then
    t:add_proto_expert_info(nvme_short)
    return
  end
  t:add(nf.version, tvb(0, 1))
  t:add(nf.type, tvb(0, 1))
  t:add(nf.ini_fn, tvb(1, 3))
  t:add(nf.inv, tvb(4, 1))
  t:add(nf.split, tvb(4, 1))
  t:add(nf.ng, tvb(4, 1))
  t:add(nf.ttag, tvb(5, 3))
  t:add(nf.ncnt_total, tvb(8, 1))
  t:add(nf.itag, tvb(9, 3))
  t:add(nf.ncnt_offset, tvb(12, 1))
  t:add(nf.icmd, tvb(13, 3))
  local typ = bit.band(tvb(0, 1):uint(), 0x0f)
  local info = nvme_types[typ]
  if info == nil then
    t:add_proto_expert_info(nvme_badtype)
    return
  end
  pinfo.cols.info:append(" " .. info[1] .. " itag=" .. tvb(9, 3):uint())
  local off = 32
  if tvb:len() < off + info[2] then
    t:add_proto_expert_info(nvme_short)
    return
  end
  if info[2] == 32 then
    local c = tvb(off, 32)
    local ct = t:add(nvme, c, "Command")
    ct:set_text("Command")
    ct:add(nf.ins, c(0, 2)); ct:add(nf.tns, c(2, 2)); ct:add(nf.slba, c(4, 8)); ct:add(nf.nlb, c(12, 2))
    ct:add(nf.fua, c(15, 1)); ct:add(nf.sqid, c(31, 1))
    pinfo.cols.info:append(" slba=" .. c(4, 8):uint64():tonumber() .. " nlb=" .. c(12, 2):uint())
  elseif info[2] == 4 then
    local s = tvb(off, 4)
    t:add(nf.status, s(2, 2))
    if bit.band(s(2, 2):uint(), 0x7fff) ~= 0 then t:add_proto_expert_info(nvme_err) end
  end
  off = off + info[2]
  if tvb:len() > off then t:add(nf.data, tvb(off)) end
end

-- dissect_falcon dissects a Falcon packet; bare: without the envelope
-- (a packet decrypted from a PSP datagram).
local function dissect_falcon(tvb, pinfo, tree, bare)
  pinfo.cols.protocol = "Falcon"
  local len = tvb:len()
  local t = tree:add(falcon, tvb())
  if len < 8 then
    t:add_proto_expert_info(ef.short)
    return len
  end
  t:add(f.version, tvb(0, 1))
  t:add(f.cid, tvb(1, 3))
  local ver = bit.rshift(tvb(0, 1):uint(), 4)
  local typ = bit.band(bit.rshift(tvb(7, 1):uint(), 1), 0x0f)
  local cid = tvb(1, 3):uint()
  t:add(f.type, tvb(7, 1))
  if ver ~= 1 then
    t:add_proto_expert_info(ef.bad_version)
    return len
  end
  local info = falcon_types[typ]
  if info == nil then
    t:add_proto_expert_info(ef.bad_type)
    return len
  end
  local hdr = info[2]
  -- The envelope: IV timestamp and ICV at the end of the frame.
  local body = len
  if bare then
    body = len
  elseif falcon.prefs.envelope and len >= hdr + 8 then
    body = len - 8
  elseif len == hdr + 4 then
    body = len - 4 -- ICV only (wire.SealICV)
  end
  if body < hdr then
    t:add_proto_expert_info(ef.short)
    return len
  end
  t:append_text(", " .. info[1] .. ", CID " .. cid)
  pinfo.cols.info = info[1] .. " cid=" .. cid
  t:add(f.data_base, tvb(8, 4))
  t:add(f.req_base, tvb(12, 4))
  if typ == 0 or typ == 3 or typ == 5 or typ == 6 then
    t:add(f.dest_fn, tvb(4, 3))
    t:add(f.protocol, tvb(7, 1))
    t:add(f.ar, tvb(7, 1))
    t:add(f.psn, tvb(16, 4))
    t:add(f.rsn, tvb(20, 4))
    local psn, rsn = tvb(16, 4):uint(), tvb(20, 4):uint()
    pinfo.cols.info:append(" psn=" .. psn .. " rsn=" .. rsn)
    if typ == 0 or typ == 5 then t:add(f.req_len, tvb(26, 2)) end
    if typ == 6 then
      t:add(f.resync_code, tvb(24, 1))
      t:add(f.resync_type, tvb(25, 1))
      t:add(f.vendor, tvb(28, 4))
    end
    -- Retransmissions: the same transaction packet seen before.
    if info[3] ~= nil then
      local key = tostring(pinfo.src) .. ":" .. pinfo.src_port .. ">" .. tostring(pinfo.dst) .. ":" .. pinfo.dst_port ..
        "/" .. cid .. "/" .. info[3] .. "/" .. psn
      if not pinfo.visited then
        local first = first_seen[key]
        if first == nil then
          first_seen[key] = pinfo.number
        elseif first ~= pinfo.number then
          retx_of[pinfo.number] = first
        end
      end
      local first = retx_of[pinfo.number]
      if first ~= nil then
        t:add(f.retx_of, first):set_generated()
        t:add_proto_expert_info(ef.retx, "Retransmission of frame " .. first .. " (PSN " .. psn .. ")")
        pinfo.cols.info:append(" [retransmission]")
      end
    end
    local proto = bit.rshift(tvb(7, 1):uint(), 5)
    if typ ~= 6 and body > hdr then
      local ulp = tvb(hdr, body - hdr)
      if proto == 2 then
        dissect_rdma(ulp:tvb(), pinfo, tree)
      elseif proto == 3 then
        dissect_nvme(ulp:tvb(), pinfo, tree)
      else
        t:add(f.payload, ulp)
      end
    end
  else
    -- BACK, EACK, NACK
    t:add(f.t1, tvb(16, 4))
    t:add(f.t2, tvb(20, 4))
    local w6, w7 = tvb(24, 4):uint(), tvb(28, 4):uint()
    t:add(f.hops, tvb(24, 1), bit.rshift(w6, 28))
    t:add(f.rx_level, tvb(24, 2), bit.band(bit.rshift(w6, 23), 0x1f))
    t:add(f.ecn, tvb(25, 3), bit.band(bit.rshift(w6, 9), 0x3fff))
    pinfo.cols.info:append(" dbase=" .. tvb(8, 4):uint() .. " rbase=" .. tvb(12, 4):uint())
    if typ == 8 then
      t:add(f.rue, tvb(29, 3), bit.band(w7, 0xffffff))
      t:add(f.nack_psn, tvb(32, 4))
      t:add(f.nack_code, tvb(36, 1))
      t:add(f.rnr_to, tvb(37, 1))
      local win = "data"
      if bit.band(tvb(38, 1):uint(), 0x80) ~= 0 then win = "request" end
      t:add(f.nack_window, tvb(38, 1), win)
      t:add(f.ulp_code, tvb(39, 1))
      local code = tvb(36, 1):uint()
      local name = nack_codes[code] or ("code " .. code)
      t:add_proto_expert_info(ef.nack, "NACK " .. name .. " for " .. win .. " PSN " .. tvb(32, 4):uint())
      pinfo.cols.info:append(" nack=" .. name .. " npsn=" .. tvb(32, 4):uint())
    else
      t:add(f.rue, tvb(28, 4), bit.band(bit.rshift(w7, 2), 0x3fffff))
      t:add(f.own_data, tvb(31, 1), bit.band(w7, 2) ~= 0)
      t:add(f.own_req, tvb(31, 1), bit.band(w7, 1) ~= 0)
      if bit.band(w7, 3) ~= 0 then t:add_proto_expert_info(ef.own) end
      if typ == 10 then
        local a = t:add(f.ack_bitmap, tvb(32, 16))
        add_set_psns(a, tvb(32, 16):tvb(), tvb(8, 4):uint(), 128)
        local r = t:add(f.rx_bitmap, tvb(48, 16))
        add_set_psns(r, tvb(48, 16):tvb(), tvb(8, 4):uint(), 128)
        local q = t:add(f.req_bitmap, tvb(64, 8))
        add_set_psns(q, tvb(64, 8):tvb(), tvb(12, 4):uint(), 64)
      end
    end
  end
  if body < len then
    if len - body == 8 then
      t:add(f.iv, tvb(body, 4))
      t:add(f.icv, tvb(body + 4, 4))
    else
      t:add(f.icv, tvb(body, 4))
    end
  end
  return len
end

local function dissect_cm(tvb, pinfo, tree)
  pinfo.cols.protocol = "Falcon CM"
  local t = tree:add(cmp, tvb())
  if tvb:len() < 48 then
    t:add_proto_expert_info(cm_short)
    return
  end
  t:add(cf.magic, tvb(0, 4)); t:add(cf.version, tvb(4, 1)); t:add(cf.type, tvb(5, 1)); t:add(cf.ulp, tvb(6, 1))
  t:add(cf.src, tvb(8, 6)); t:add(cf.dst, tvb(14, 6)); t:add(cf.scid, tvb(20, 4)); t:add(cf.dcid, tvb(24, 4))
  t:add(cf.req_psn, tvb(28, 4)); t:add(cf.data_psn, tvb(32, 4)); t:add(cf.rsn, tvb(36, 4))
  local typ = tvb(5, 1):uint()
  if typ == 3 then t:add_proto_expert_info(cm_rej) end
  pinfo.cols.info = "CM " .. (cm_types[typ] or ("type " .. typ)) .. " " .. tostring(tvb(8, 6):ether()) .. " > " ..
    tostring(tvb(14, 6):ether()) .. " cid=" .. tvb(20, 4):uint()
end

-- A PSP datagram carrying a Falcon packet: next header 252, a 16-byte
-- header (ext len 1), byte 3's low bit set.
local function is_psp(tvb)
  return tvb:len() >= 2 and tvb(0, 1):uint() == 252 and tvb(1, 1):uint() == 1
end

local function dissect_psp(tvb, pinfo, tree)
  pinfo.cols.protocol = "PSP/Falcon"
  local len = tvb:len()
  local t = tree:add(pspp, tvb())
  if len < 16 + 4 + 16 then
    t:add_proto_expert_info(psp_short)
    return
  end
  t:add(pf.next_header, tvb(0, 1)); t:add(pf.ext_len, tvb(1, 1)); t:add(pf.crypt_off, tvb(2, 1))
  t:add(pf.version, tvb(3, 1)); t:add(pf.spi, tvb(4, 4)); t:add(pf.key_slot, tvb(4, 4))
  t:add(pf.iv_ts, tvb(8, 4)); t:add(pf.iv_seq, tvb(12, 4))
  local clear = bit.band(tvb(2, 1):uint(), 0x3f) * 4
  if clear < 4 or 16 + clear + 16 > len then clear = 4 end
  local ft = tree:add(falcon, tvb(16, clear))
  ft:add(f.version, tvb(16, 1)); ft:add(f.cid, tvb(17, 3))
  ft:append_text(" (first word in the clear)")
  if len > 16 + clear + 16 then
    t:add(pf.encrypted, tvb(16 + clear, len - 16 - clear - 16))
  end
  t:add(pf.icv, tvb(len - 16, 16))
  pinfo.cols.info = string.format("PSP spi=0x%08x seq=%d cid=%d, %d bytes encrypted", tvb(4, 4):uint(), tvb(12, 4):uint(),
    tvb(17, 3):uint(), len - 16 - clear - 16)
  if not keylog.loaded then return end
  note_keylog(pinfo, t)
  local spi = tvb(4, 4):uint()
  local version = bit.band(bit.rshift(tvb(3, 1):uint(), 2), 0x0f)
  local keys = keylog.psp[spi]
  if keys == nil then
    t:add_proto_expert_info(psp_no_key, string.format("No key for SPI 0x%08x in the key log", spi))
    return
  end
  local aad, nonce = tvb:raw(0, 16 + clear), tvb:raw(4, 12)
  local ctlen = len - 16 - clear - 16
  local ct, icv = "", tvb:raw(len - 16, 16)
  if ctlen > 0 then ct = tvb:raw(16 + clear, ctlen) end
  local plain, used
  local cached = psp_key_of[pinfo.number]
  for _, k in ipairs(keys) do
    if k.version == version and (cached == nil or cached == k) then
      plain = k.ctx:open(nonce, aad, ct, icv)
      if plain ~= nil then
        used = k
        break
      end
    end
  end
  if cached == nil then psp_key_of[pinfo.number] = used or false end
  t:add(pf.icv_ok, tvb(len - 16, 16), plain ~= nil):set_generated()
  if plain == nil then
    t:add_proto_expert_info(psp_bad_icv, string.format("ICV does not verify under the %d key(s) logged for SPI 0x%08x", #keys, spi))
    pinfo.cols.info:append(" [ICV BAD]")
    return
  end
  t:add(pf.key_line, tvb(4, 4), used.what):set_generated()
  local inner = ByteArray.new(tvb:raw(16, clear) .. plain, true):tvb("Decrypted Falcon packet")
  dissect_falcon(inner, pinfo, tree, true)
  pinfo.cols.protocol = "PSP/Falcon"
end

-- An authenticated CM envelope: magic "FNCA".
local function is_cmauth(tvb)
  return tvb:len() >= 4 and tvb(0, 4):uint() == 0x464e4341
end

local function dissect_cmauth(tvb, pinfo, tree)
  pinfo.cols.protocol = "Falcon CM"
  local len = tvb:len()
  local t = tree:add(cmauthp, tvb())
  if len < 28 then
    t:add_proto_expert_info(cmauth_short)
    return
  end
  local idl = tvb(5, 1):uint()
  t:add(af.magic, tvb(0, 4)); t:add(af.version, tvb(4, 1)); t:add(af.id_len, tvb(5, 1))
  t:add(af.time, tvb(8, 8)); t:add(af.nonce, tvb(16, 12))
  if 28 + idl + 16 > len then
    t:add_proto_expert_info(cmauth_short)
    return
  end
  local id = ""
  if idl > 0 then
    t:add(af.id, tvb(28, idl))
    id = tvb(28, idl):string()
  end
  if len > 28 + idl + 16 then
    t:add(af.sealed, tvb(28 + idl, len - 28 - idl - 16))
  end
  t:add(af.tag, tvb(len - 16, 16))
  pinfo.cols.info = "CM (sealed) from " .. id
  if not keylog.loaded then return end
  note_keylog(pinfo, t)
  if #keylog.cm == 0 then return end
  local aad, nonce = tvb:raw(0, 28 + idl), tvb:raw(16, 12)
  local ct, tag = "", tvb:raw(len - 16, 16)
  if len - 28 - idl - 16 > 0 then ct = tvb:raw(28 + idl, len - 28 - idl - 16) end
  local plain
  for _, k in ipairs(keylog.cm) do
    plain = k.ctx:open(nonce, aad, ct, tag)
    if plain ~= nil then break end
  end
  t:add(af.tag_ok, tvb(len - 16, 16), plain ~= nil):set_generated()
  if plain == nil then
    t:add_proto_expert_info(cmauth_bad_tag)
    pinfo.cols.info:append(" [TAG BAD]")
    return
  end
  local d = ByteArray.new(plain, true):tvb("Decrypted CM envelope")
  if d:len() < 40 then
    t:add_proto_expert_info(cmauth_short)
    return
  end
  local st = t:add(cmauthp, d(0, 40), "SA offer")
  st:set_text("SA offer")
  st:add(af.sa_version, d(0, 1)); st:add(af.sa_flags, d(1, 1)); st:add(af.sa_spi, d(4, 4))
  local v, offered = d(0, 1):uint(), bit.band(d(1, 1):uint(), 1) == 1
  local klen = (v == 0 and 16) or (v == 1 and 32) or 0
  if offered and klen > 0 then
    st:add(af.sa_key, d(8, klen))
    -- The offer keys the datagrams sent to the offering NIC: learn it, so
    -- connections set up in the capture decrypt with the CM key alone.
    local spi = d(4, 4):uint()
    if spi ~= 0 and not pinfo.visited then keylog_add_psp(spi, v, d:raw(8, klen), "SA offer in frame " .. pinfo.number) end
  end
  if d:len() > 40 then
    dissect_cm(d(40):tvb(), pinfo, tree)
    pinfo.cols.info:append(" (sealed, from " .. id .. ")")
  end
end

local eth = Dissector.get("eth_withoutfcs")

local function fabric_ok(tvb)
  local len = tvb:len()
  return len >= 12 and tvb(0, 2):uint() == 0xFA1C and tvb(2, 1):uint() == 1 and tvb(3, 1):uint() >= 1 and
    tvb(3, 1):uint() <= 3 and tvb(8, 2):uint() == len - 12
end

function fabric.dissector(tvb, pinfo, tree)
  if not fabric_ok(tvb) then return 0 end
  pinfo.cols.protocol = "Fabric"
  local t = tree:add(fabric, tvb(0, 12))
  t:add(ff.magic, tvb(0, 2)); t:add(ff.version, tvb(2, 1)); t:add(ff.kind, tvb(3, 1))
  t:add(ff.flow, tvb(4, 4)); t:add(ff.length, tvb(8, 2)); t:add(ff.reserved, tvb(10, 2))
  local kind = tvb(3, 1):uint()
  t:append_text(", " .. fabric_kinds[kind] .. ", flow 0x" .. string.format("%08x", tvb(4, 4):uint()))
  if tvb:len() == 12 then return 12 end
  local payload = tvb(12):tvb()
  if kind == 1 then
    eth:call(payload, pinfo, tree)
  elseif kind == 2 then
    if is_psp(payload) then
      dissect_psp(payload, pinfo, tree)
    else
      dissect_falcon(payload, pinfo, tree)
    end
  elseif is_cmauth(payload) then
    dissect_cmauth(payload, pinfo, tree)
  else
    dissect_cm(payload, pinfo, tree)
  end
  return tvb:len()
end

local function fabric_heur(tvb, pinfo, tree)
  if not fabric_ok(tvb) then return false end
  fabric.dissector(tvb, pinfo, tree)
  return true
end

function falcon.dissector(tvb, pinfo, tree)
  return dissect_falcon(tvb, pinfo, tree)
end

fabric:register_heuristic("udp", fabric_heur)
local udp = DissectorTable.get("udp.port")
udp:add(1000, falcon)
local registered = fabric.prefs.port
udp:add(registered, fabric)
function fabric.prefs_changed()
  if registered ~= fabric.prefs.port then
    udp:remove(registered, fabric)
    registered = fabric.prefs.port
    udp:add(registered, fabric)
  end
end
