// Package wire is the Falcon wire format (OCP Falcon Transport Protocol
// Specification Rev 0.9, §7): zero-copy byte views with getters and setters
// for every Falcon packet, sequence-number types with wrap-safe serial
// arithmetic, the bitmap window type the packet delivery layer keeps its
// windows in, and the 131.072 ns timestamp unit.
//
// # Conventions
//
// Packets are big-endian 32-bit words. Bit numbers follow the spec's figures:
// bit 0 is the most significant bit of a word, so "W1 bits 27:30" is
// (word1 >> 1) & 0xf. Reserved fields are written as zero and ignored on
// receipt.
//
// # Views
//
// Packet is any Falcon packet (fields common to all types: version, CID,
// type, the two piggy-backed window bases). Txn views Pull Request, Pull
// Data, Push Data and Resync; Ack views BACK and EACK; Nack views NACK. A
// view is just the byte slice: reading a field decodes it in place, setting
// one encodes it in place, nothing allocates. Untrusted bytes go through
// Parse first, which checks version, type and lengths and reports each
// failure as its own sentinel error (ErrShort, ErrVersion, ErrType,
// ErrLength) so receivers can count drops by cause. Builders (AppendTxn,
// AppendPushData, AppendBACK, AppendEACK, AppendNACK, ...) append a packet to
// a caller buffer and do not allocate when it has capacity.
//
// # Headers
//
// Base header (24 bytes) of Pull Request, Pull Data, Push Data, Resync:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-------+-------+-----------------------------------------------+
//	|Version| Rsvd  |            Destination CID (24)               | W0
//	+-------+-------+-----------------------------------------------+
//	|          Destination Function (24)            |Proto|PktType|A| W1
//	+-----------------------------------------------+-----+-------+-+
//	|              Receiver Data Window Base PSN                    | W2
//	+---------------------------------------------------------------+
//	|              Receiver Request Window Base PSN                 | W3
//	+---------------------------------------------------------------+
//	|                             PSN                               | W4
//	+---------------------------------------------------------------+
//	|                             RSN                               | W5
//	+---------------------------------------------------------------+
//
// Pull Request (32 bytes + ULP request headers) and Push Data (28 bytes +
// ULP headers and data) add:
//
//	+-------------------------------+-------------------------------+
//	|          Reserved             |        Request Length         | W6
//	+-------------------------------+-------------------------------+
//	|                Reserved (Pull Request only)                   | W7
//	+---------------------------------------------------------------+
//
// Resync (32 bytes) adds:
//
//	+---------------+-------+---------------------------------------+
//	|  Resync Code  |OrigTyp|             Reserved                  | W6
//	+---------------+-------+---------------------------------------+
//	|                      Vendor Defined                           | W7
//	+---------------------------------------------------------------+
//
// BACK (32 bytes); EACK (72 bytes) appends three bitmaps; NACK (40 bytes)
// replaces the OWN bits and widens the RUE value to 24 bits, then appends
// two words:
//
//	+-------+-------+-----------------------------------------------+
//	|Version| Rsvd  |              Connection ID (24)               | W0
//	+-------+-------+---------------------------------------+-------+-+
//	|                    Reserved (27)                    |PktType|R| W1
//	+-----------------------------------------------------+-------+-+
//	|              Receiver Data Window Base PSN                    | W2
//	|              Receiver Request Window Base PSN                 | W3
//	|              t1 (131.072 ns units)                            | W4
//	|              t2 (131.072 ns units)                            | W5
//	+-------+---------+---------------------------+-----------------+
//	| Hop(4)|RxLvl(5) |       ECN count (14)      |  Reserved (9)   | W6
//	+-------+---------+-------+-------------------+-------------+-+-+
//	|  Reserved (8)   |        RUE value (22)                   |D|R| W7 BACK/EACK
//	|  Reserved (8)   |        RUE value (24)                       | W7 NACK
//	+-----------------+---------------------------------------------+
//	EACK: W8-W11 data-ack bitmap, W12-W15 data-rx bitmap (128 b each),
//	      W16-W17 request bitmap (64 b); each bitmap is one big-endian
//	      integer, bit n (n = 0 is the last byte's LSB) = base PSN + n.
//	NACK:
//	+---------------------------------------------------------------+
//	|                          NACK PSN                             | W8
//	+---------------+-----+---------+-+-------------+---------------+
//	|  NACK Code    |Rsvd | RNR TO  |W|  Reserved   | ULP NACK Code | W9
//	+---------------+-----+---------+-+-------------+---------------+
//
// D and R are the D-OWN (data window) and R-OWN (request window)
// out-of-window bits; the spec's table puts "bit 0 = request window, bit 1
// = data window" in the last two bits, read here as least-significant
// first.
//
// # ULP headers
//
// The Falcon payload of RDMA packets starts with the RBTH and the extension
// headers its opcode requires (ParseRDMA, AppendRDMA, the opcode table in
// rdma.go); NVMe packets start with the NBTH and, for requests, a command or,
// for responses, a status word (ParseNVMe, AppendNVMe). Where the ULP specs'
// figures leave a bit position open the choice is documented at the type.
//
// # Integrity
//
// Rev 0.9 relies on PSP's ICV to drop corrupted packets before the packet
// delivery layer parses them. falconnic does not emulate PSP; SealICV and
// OpenICV append and check a CRC32C instead.
package wire
