package nvme

import "strconv"

// Opcode is an NVMe command opcode (NVM command set I/O opcodes, plus the
// admin Identify, which this fabric carries on the I/O path).
type Opcode uint8

// Opcodes [NVMe Base 2.0 §5, NVM Command Set 1.0 §3].
const (
	OpFlush       Opcode = 0x00
	OpWrite       Opcode = 0x01
	OpRead        Opcode = 0x02
	OpWriteZeroes Opcode = 0x08
	OpDSM         Opcode = 0x09 // Dataset Management (deallocate = discard)
	OpIdentify    Opcode = 0x06 // admin; CNS 0 (Identify Namespace) only
)

// OpInfo is one row of the opcode table: how a command travels.
type OpInfo struct {
	Name string
	// Read: carried by a Read Request, answered by Read Responses with data.
	// Otherwise by a Write Request answered by a Write Completion.
	Read bool
	// Data: the command moves blocks (split into 4 KiB nCMDs); a write's
	// data is pulled by the target (Write Data Request/Response).
	Data bool
	// Writes: the command changes the namespace (refused on a read-only one).
	Writes bool
}

// opTable is indexed by opcode (an array, not a map: every command looks
// its opcode up, on both sides); a row without a Name is an unsupported
// opcode.
var opTable = [256]OpInfo{
	OpFlush:       {Name: "Flush"},
	OpWrite:       {Name: "Write", Data: true, Writes: true},
	OpRead:        {Name: "Read", Read: true, Data: true},
	OpWriteZeroes: {Name: "WriteZeroes", Writes: true},
	OpDSM:         {Name: "DatasetManagement", Writes: true},
	OpIdentify:    {Name: "Identify", Read: true},
}

// Opcodes lists every supported opcode.
var Opcodes = []Opcode{OpFlush, OpWrite, OpRead, OpWriteZeroes, OpDSM, OpIdentify}

// Info returns o's row and whether o is supported.
func (o Opcode) Info() (OpInfo, bool) {
	i := &opTable[o]
	return *i, i.Name != ""
}

// String returns the opcode's name.
func (o Opcode) String() string {
	if i, ok := o.Info(); ok {
		return i.Name
	}
	return "Opcode(0x" + strconv.FormatUint(uint64(o), 16) + ")"
}

// Status is the 15-bit NVMe completion status field (CQE DW3 bits 17:31):
// SC bits 0:7, SCT bits 8:10, CRD 11:12, More 13, DNR 14.
type Status uint16

// Status code types.
const (
	SCTGeneric         = 0
	SCTCommandSpecific = 1
	SCTMedia           = 2
	SCTPath            = 3
)

// MakeStatus builds a status from its type and code; dnr sets Do Not Retry.
func MakeStatus(sct, sc uint8, dnr bool) Status {
	s := Status(sc) | Status(sct&7)<<8
	if dnr {
		s |= 1 << 14
	}
	return s
}

// Statuses this implementation returns [NVMe Base 2.0 §4.6.1.2].
var (
	StatusSuccess           = Status(0)
	StatusInvalidOpcode     = MakeStatus(SCTGeneric, 0x01, true)
	StatusInvalidField      = MakeStatus(SCTGeneric, 0x02, true)
	StatusDataTransferError = MakeStatus(SCTGeneric, 0x04, false)
	StatusInternalError     = MakeStatus(SCTGeneric, 0x06, false)
	StatusTransportError    = MakeStatus(SCTGeneric, 0x22, false) // Transient Transport Error (timeout)
	StatusInvalidNamespace  = MakeStatus(SCTGeneric, 0x0B, true)
	StatusWriteProtected    = MakeStatus(SCTGeneric, 0x20, true) // Namespace is Write Protected
	StatusLBAOutOfRange     = MakeStatus(SCTGeneric, 0x80, true)
	StatusWriteFault        = MakeStatus(SCTMedia, 0x80, false)
	StatusUnrecoveredRead   = MakeStatus(SCTMedia, 0x81, false)
	StatusAccessDenied      = MakeStatus(SCTMedia, 0x86, true) // the initiator may not use the namespace
	StatusInternalPathError = MakeStatus(SCTPath, 0x00, false) // the Falcon transaction failed
)

// SCT returns the status code type.
func (s Status) SCT() uint8 { return uint8(s>>8) & 7 }

// SC returns the status code.
func (s Status) SC() uint8 { return uint8(s) }

// DNR reports Do Not Retry.
func (s Status) DNR() bool { return s&(1<<14) != 0 }

// OK reports success.
func (s Status) OK() bool { return s&0x7ff == 0 }

var statusNames = map[Status]string{
	StatusSuccess: "success", StatusInvalidOpcode: "invalid-opcode", StatusInvalidField: "invalid-field",
	StatusDataTransferError: "data-transfer-error", StatusInternalError: "internal-error",
	StatusInvalidNamespace: "invalid-namespace", StatusWriteProtected: "namespace-write-protected",
	StatusLBAOutOfRange: "lba-out-of-range", StatusWriteFault: "write-fault",
	StatusUnrecoveredRead: "unrecovered-read-error", StatusInternalPathError: "internal-path-error",
	StatusTransportError: "transient-transport-error", StatusAccessDenied: "access-denied",
}

// KnownStatuses lists every status this package produces.
var KnownStatuses = []Status{StatusSuccess, StatusInvalidOpcode, StatusInvalidField, StatusDataTransferError,
	StatusInternalError, StatusInvalidNamespace, StatusWriteProtected, StatusLBAOutOfRange, StatusWriteFault,
	StatusUnrecoveredRead, StatusInternalPathError, StatusTransportError, StatusAccessDenied}

// String names the status.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return "Status(sct=" + strconv.Itoa(int(s.SCT())) + ",sc=0x" + strconv.FormatUint(uint64(s.SC()), 16) + ")"
}

// Command is one host command (an iCMD) submitted to an Initiator.
type Command struct {
	Op   Opcode
	NSID uint16 // target namespace
	SLBA uint64
	// Blocks is the number of logical blocks (1-based; 0 for Flush and
	// Identify). Data commands move Blocks × block size bytes.
	Blocks uint32
	// Data is the scatter list: the destination of a Read or Identify
	// (4096 bytes), the source of a Write. Its total length must match.
	Data [][]byte
	// Deallocate lets Write Zeroes unmap.
	Deallocate bool
	// FUA (Write): the target makes the data durable before it completes
	// the command (the Read/Write Request's Force Unit Access bit).
	FUA bool
	// Cookie is the submitter's.
	Cookie uint64
	// Done, if set, is called on completion instead of Config.OnComplete.
	Done func(*Command)
	// Status is set on completion.
	Status Status

	slot int32 // iCMD table slot while in flight
}

// dataLen returns the total length of the scatter list.
func dataLen(segs [][]byte) int {
	n := 0
	for _, s := range segs {
		n += len(s)
	}
	return n
}

// copyTo copies p into the scatter list at byte offset off.
func copyTo(segs [][]byte, off int, p []byte) {
	for _, s := range segs {
		if len(p) == 0 {
			return
		}
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n := copy(s[off:], p)
		p = p[n:]
		off = 0
	}
}
