package wire

// Congestion-control info of BACK, EACK and NACK, W6-W7 read as one
// big-endian 64-bit value V [S §7.7.1, §7.8]:
//
//	V[63:60] forward hop count          (4)
//	V[59:55] rx-buffer level            (5)
//	V[54:41] ECN-marked packet count    (14)
//	V[40:24] reserved                   (17)
//	BACK/EACK: V[23:2] RUE value (22), V[1] D-OWN, V[0] R-OWN
//	NACK:      V[23:0] RUE value (24)
//
// (The BACK table numbers its 62-bit CC info [61:0] in front of the two OWN
// bits; shifted by 2 that is the layout above.)
const ccOff = 24

func ccGet(b []byte) uint64 { return be.Uint64(b[ccOff:]) }

func ccSet(b []byte, shift uint, width uint, v uint64) {
	mask := uint64(1)<<width - 1
	w := be.Uint64(b[ccOff:])
	w = w&^(mask<<shift) | (v&mask)<<shift
	be.PutUint64(b[ccOff:], w)
}

func ccField(b []byte, shift, width uint) uint64 { return ccGet(b) >> shift & (1<<width - 1) }

const (
	hopShift, hopWidth     = 60, 4
	levelShift, levelWidth = 55, 5
	ecnShift, ecnWidth     = 41, 14
	ackRUEShift, ackRUEW   = 2, 22
	nackRUEShift, nackRUEW = 0, 24
	ownDataShift           = 1
	ownReqShift            = 0
)

// Limits of the CC info fields.
const (
	MaxHopCount      = 1<<hopWidth - 1
	MaxRxBufferLevel = 1<<levelWidth - 1
	MaxECNCount      = 1<<ecnWidth - 1
	MaxAckRUEValue   = 1<<ackRUEW - 1
	MaxNackRUEValue  = 1<<nackRUEW - 1
)
