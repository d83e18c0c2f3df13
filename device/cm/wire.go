package cm

import (
	"encoding/binary"
	"errors"

	"falconnic/falcon/wire"
	"falconnic/psp"
	"falconnic/psp/cmauth"
)

// Connection-manager messages (over the fabric, or handed between two
// NICs' ports in one daemon) set up one Falcon connection of a protocol
// between two NICs [ARCHITECTURE §5 CM; cm.go]. The initiator sends REQ
// with its CID and initial sequence numbers; the NIC with the destination
// MAC answers REP with its own (or REJ when it has no such NIC or no
// function for the protocol). All integers are big-endian.
//
// Byte 6 names the ULP whose connection is set up: 0 is RDMA (one ordered
// connection); wire.ProtoNVMe an NVMe path's one unordered connection.
//
//	0  magic "FNCM"          4  version (1) | type | ULP | reserved
//	8  source NIC MAC (6)   14  destination NIC MAC (6)
//	20 sender's CID         24  receiver's CID (0 in REQ)
//	28 sender's initial request-window PSN
//	32 sender's initial data-window PSN
//	36 sender's initial RSN 40  reserved 8
//
// REKEY and REKEY_ACK (secure.go) put other fields at 28 and 32: REKEY
// the offering NIC's master-key generation (28) — a peer never moves back
// to an older one; REKEY_ACK the SPI the sender now seals with (28) and
// the generation of the REKEY it answers (32).
const cmMsgLen = 48

// cmMagic marks a CM message.
const cmMagic = 0x464e434d // "FNCM"

// cmVersion is the CM message version.
const cmVersion = 1

// cmType is a CM message type.
type cmType uint8

// CM message types.
const (
	cmREQ cmType = 1
	cmREP cmType = 2
	cmREJ cmType = 3
	// cmREKEY offers the peer of an up connection a new SA (master-key
	// rotation); only between daemons, only sealed (secure.go).
	cmREKEY cmType = 4
	// cmREKEYACK confirms a REKEY: the sender seals with the SPI it
	// offered (secure.go). Until it arrives the REKEY is resent.
	cmREKEYACK cmType = 5
)

// cmMsg is a decoded CM message.
type cmMsg struct {
	typ            cmType
	proto          uint8 // 0: RDMA; otherwise a wire.ProtocolType
	src, dst       [6]byte
	srcCID, dstCID uint32
	reqPSN         uint32
	dataPSN        uint32
	rsn            uint32
	// sa is the SA the message offers (hasSA): it travels in the cmauth
	// envelope, never in these bytes.
	sa    cmauth.SA
	hasSA bool
}

// CM decode errors.
var (
	errCMShort   = errors.New("cm: message too short")
	errCMMagic   = errors.New("cm: bad magic")
	errCMVersion = errors.New("cm: unsupported version")
	errCMType    = errors.New("cm: unknown message type")
	errCMCID     = errors.New("cm: CID does not fit 24 bits")
)

// protocol is the ULP the message is for (byte 6: 0 is RDMA).
func (m *cmMsg) protocol() wire.ProtocolType {
	if m.proto == 0 {
		return wire.ProtoRDMA
	}
	return wire.ProtocolType(m.proto)
}

// rekeyGen is a REKEY's master-key generation (bytes 28..31).
func (m *cmMsg) rekeyGen() uint32 { return m.reqPSN }

// ackSPI and ackGen are a REKEY_ACK's SPI (28..31) and the generation of
// the REKEY it answers (32..35).
func (m *cmMsg) ackSPI() psp.SPI { return psp.SPI(m.reqPSN) }
func (m *cmMsg) ackGen() uint32  { return m.dataPSN }

// cmProtoByte is byte 6 for protocol p.
func cmProtoByte(p wire.ProtocolType) uint8 {
	if p == wire.ProtoRDMA {
		return 0
	}
	return uint8(p)
}

func (m *cmMsg) append(b []byte) []byte {
	var x [cmMsgLen]byte
	be := binary.BigEndian
	be.PutUint32(x[0:], cmMagic)
	x[4], x[5], x[6] = cmVersion, byte(m.typ), m.proto
	copy(x[8:], m.src[:])
	copy(x[14:], m.dst[:])
	be.PutUint32(x[20:], m.srcCID)
	be.PutUint32(x[24:], m.dstCID)
	be.PutUint32(x[28:], m.reqPSN)
	be.PutUint32(x[32:], m.dataPSN)
	be.PutUint32(x[36:], m.rsn)
	return append(b, x[:]...)
}

// Addrs returns the source and destination NIC MACs of CM message b (for
// a capture to tell which NIC it belongs to); ok false when b does not
// decode.
func Addrs(b []byte) (src, dst [6]byte, ok bool) {
	m, err := decodeCM(b)
	return m.src, m.dst, err == nil
}

func decodeCM(b []byte) (cmMsg, error) {
	be := binary.BigEndian
	if len(b) < cmMsgLen {
		return cmMsg{}, errCMShort
	}
	if be.Uint32(b) != cmMagic {
		return cmMsg{}, errCMMagic
	}
	if b[4] != cmVersion {
		return cmMsg{}, errCMVersion
	}
	m := cmMsg{typ: cmType(b[5]), proto: b[6], srcCID: be.Uint32(b[20:]), dstCID: be.Uint32(b[24:]),
		reqPSN: be.Uint32(b[28:]), dataPSN: be.Uint32(b[32:]), rsn: be.Uint32(b[36:])}
	if m.typ < cmREQ || m.typ > cmREKEYACK {
		return cmMsg{}, errCMType
	}
	if m.srcCID >= 1<<24 || m.dstCID >= 1<<24 || (m.typ != cmREJ && m.srcCID == 0) {
		return cmMsg{}, errCMCID
	}
	copy(m.src[:], b[8:])
	copy(m.dst[:], b[14:])
	return m, nil
}
