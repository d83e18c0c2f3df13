package nvme

import "falconnic/falcon/wire"

// Fields this package puts in bytes that [N] leaves reserved. They are
// the only places where the wire format goes beyond the spec; see doc.go.
//
//	NVMeCmd C7 bits 0:7   Opcode (0 on a Read Request means Read, on a
//	                      Write Request means Write: the spec's only ones)
//	NVMeCmd C7 bits 8:15  Flags (bit 0: Write Zeroes may deallocate;
//	                      Identify: CNS)

// cmdExt is a view of the extension bytes of a Read/Write Request command.
type cmdExt wire.NVMeCmd

// opcodeOnWire maps the Opcode to the byte carried in C7: Read and Write
// travel as 0 so plain [N] requests keep their meaning.
func opcodeOnWire(o Opcode) uint8 {
	if o == OpRead || o == OpWrite {
		return 0
	}
	return uint8(o) | 0x80
}

// Opcode returns the command's opcode given the packet type that carried it.
func (c cmdExt) Opcode(t wire.NVMePacketType) (Opcode, bool) {
	b := c[28]
	if b == 0 {
		if t == wire.NVMeReadRequest {
			return OpRead, true
		}
		return OpWrite, true
	}
	if b&0x80 == 0 {
		return 0, false
	}
	return Opcode(b &^ 0x80), true
}

// SetOpcode sets the opcode byte.
func (c cmdExt) SetOpcode(o Opcode) { c[28] = opcodeOnWire(o) }

// Flags returns C7 bits 8:15.
func (c cmdExt) Flags() uint8 { return c[29] }

// SetFlags sets C7 bits 8:15.
func (c cmdExt) SetFlags(v uint8) { c[29] = v }

// flagDeallocate on Write Zeroes: the target may unmap.
const flagDeallocate = 1
