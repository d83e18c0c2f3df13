package tl

import "strconv"

// Kind is a transaction kind.
type Kind uint8

// Transaction kinds [S §6.1.1].
const (
	Push Kind = 1
	Pull Kind = 2
)

// String returns "push" or "pull".
func (k Kind) String() string {
	switch k {
	case Push:
		return "push"
	case Pull:
		return "pull"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Status is a 4-bit initiator completion code [S §11].
type Status uint8

// Completion codes; 0x2, 0x5-0x7 and 0xE are reserved.
const (
	CmplAck           Status = 0x0
	CmplTargetNackCIE Status = 0x1
	CmplTargetNackNRE Status = 0x3
	CmplTargetNackCID Status = 0x4
	CmplLocalTO       Status = 0x8
	CmplOpErr         Status = 0x9
	CmplDeadConn      Status = 0xA
	CmplLocalRsrc     Status = 0xB
	CmplUlpCdtErr     Status = 0xC
	CmplRemoteErr     Status = 0xD
	CmplLocalXlr      Status = 0xF
)

var statusNames = [16]string{
	CmplAck: "ok", CmplTargetNackCIE: "target-cie", CmplTargetNackNRE: "target-nre",
	CmplTargetNackCID: "target-invalid-cid", CmplLocalTO: "local-timeout", CmplOpErr: "op-error",
	CmplDeadConn: "dead-connection", CmplLocalRsrc: "local-resources", CmplUlpCdtErr: "ulp-credit-error",
	CmplRemoteErr: "remote-error", CmplLocalXlr: "local-xlr",
}

// Statuses lists every defined completion code.
var Statuses = []Status{CmplAck, CmplTargetNackCIE, CmplTargetNackNRE, CmplTargetNackCID, CmplLocalTO,
	CmplOpErr, CmplDeadConn, CmplLocalRsrc, CmplUlpCdtErr, CmplRemoteErr, CmplLocalXlr}

// String names the status.
func (s Status) String() string {
	if int(s) < len(statusNames) && statusNames[s] != "" {
		return statusNames[s]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}
