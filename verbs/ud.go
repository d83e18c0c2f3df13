package verbs

import "encoding/binary"

// UD addressing. RoCEv2 carries the source and destination GIDs of a UD
// message in its IP header; the receiver hands them to the consumer in the
// 40-byte GRH area at the start of the receive buffer, and Linux's ib_mad
// and ib_cm build their reply address handles from it
// (ib_init_ah_attr_from_wc). Falcon has no IP header between NICs, so the
// sending NIC puts a UD address header (udAddrLen bytes) in front of the
// data of every UD push, filled from the sending QP's address vector (an AH
// the guest kernel created, or a kernel QP's inline AV), and the receiving
// NIC validates it and builds the GRH area from it:
//
//	0      network type (0: no GIDs, NetIPv4, NetIPv6)
//	1      hop limit
//	2      traffic class
//	3      reserved, 0
//	4..8   flow label (big-endian, 20 bits)
//	8..24  source GID
//	24..40 destination GID
//
// For NetIPv4 both GIDs must be IPv4-mapped (::ffff:a.b.c.d).

// Network header types (FALCONNIC_NET_*, the RXE_NETWORK_TYPE_* values).
const (
	NetNone = 0
	NetIPv4 = 1
	NetIPv6 = 2
)

const udAddrLen = 40

// udAddr is a parsed UD address header.
type udAddr struct {
	net         uint8
	hop, tclass uint8
	flow        uint32
	sgid, dgid  [16]byte
}

var v4Mapped = [12]byte{10: 0xff, 11: 0xff}

func isV4Mapped(g *[16]byte) bool { return [12]byte(g[:12]) == v4Mapped }

// appendUDAddr appends the UD address header of av to b. An AV whose GIDs
// do not fit its network type (IPv4 with a GID that is not IPv4-mapped)
// sends no GIDs.
func appendUDAddr(b []byte, av *AV) []byte {
	var h [udAddrLen]byte
	if av.Net == NetIPv6 || (av.Net == NetIPv4 && isV4Mapped(&av.SGID) && isV4Mapped(&av.DGID)) {
		h[0], h[1], h[2] = av.Net, av.HopLimit, av.TClass
		binary.BigEndian.PutUint32(h[4:], av.Flow&0xfffff)
		copy(h[8:], av.SGID[:])
		copy(h[24:], av.DGID[:])
	}
	return append(b, h[:]...)
}

// parseUDAddr splits a UD push's data into its address header and the
// message; ok is false for a header that is short or malformed.
func parseUDAddr(p []byte) (a udAddr, data []byte, ok bool) {
	if len(p) < udAddrLen {
		return a, nil, false
	}
	a.net, a.hop, a.tclass = p[0], p[1], p[2]
	a.flow = binary.BigEndian.Uint32(p[4:])
	copy(a.sgid[:], p[8:24])
	copy(a.dgid[:], p[24:40])
	switch {
	case p[3] != 0 || a.flow > 0xfffff:
		return a, nil, false
	case a.net == NetNone:
		if a != (udAddr{}) {
			return a, nil, false
		}
	case a.net == NetIPv4:
		if !isV4Mapped(&a.sgid) || !isV4Mapped(&a.dgid) {
			return a, nil, false
		}
	case a.net != NetIPv6:
		return a, nil, false
	}
	return a, p[udAddrLen:], true
}

// RoCEv2 headers that follow the IP header of a UD message, for the IP
// length fields: UDP (8), BTH (12), DETH (8) and the ICRC (4) after the
// payload.
const rocev2UDOverhead = 8 + 12 + 8 + 4

// putGRH writes the 40-byte GRH area of a UD receive for a message of n
// bytes, as Linux's Soft-RoCE does: the IPv6 header, or for IPv4 20 zero
// bytes then the IPv4 header with a valid checksum. With no GIDs it is zero
// but for the IPv6 version nibble.
func putGRH(g []byte, a *udAddr, n int) {
	clear(g[:grhLen])
	switch a.net {
	case NetIPv6:
		binary.BigEndian.PutUint32(g[0:], 6<<28|uint32(a.tclass)<<20|a.flow&0xfffff)
		binary.BigEndian.PutUint16(g[4:], uint16(min(n+rocev2UDOverhead, 0xffff)))
		g[6] = 17 // next header: UDP
		g[7] = a.hop
		copy(g[8:24], a.sgid[:])
		copy(g[24:40], a.dgid[:])
	case NetIPv4:
		ip := g[20:40]
		ip[0] = 0x45 // version 4, 5 words
		ip[1] = a.tclass
		binary.BigEndian.PutUint16(ip[2:], uint16(min(20+n+rocev2UDOverhead, 0xffff)))
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // don't fragment
		ip[8] = a.hop
		ip[9] = 17 // UDP
		copy(ip[12:16], a.sgid[12:])
		copy(ip[16:20], a.dgid[12:])
		binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip))
	default:
		g[0] = 6 << 4
	}
}

// ipv4Checksum is the Internet checksum of an IPv4 header whose checksum
// field is zero [RFC 791, RFC 1071].
func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// inlineAV reads the address vector a kernel QP's UD WQE carries in
// wr.ud.av (struct rxe_av): network type, dmac, grh.dgid, flow label, hop
// limit, traffic class, and the source GID from sgid_addr (sockaddr_in or
// sockaddr_in6, as rxe fills it). ok is false when it names no usable
// RoCEv2 path.
func inlineAV(w SendWQE) (av AV, ok bool) {
	r := w[sendWQEAVOff : sendWQEAVOff+avSize]
	av.Net = r[1]
	copy(av.DMAC[:], r[2:8])
	copy(av.DGID[:], r[8:24])
	av.Flow = le.Uint32(r[24:]) & 0xfffff
	av.HopLimit, av.TClass = r[29], r[30]
	sa := r[32:60]
	switch fam := le.Uint16(sa); {
	case av.Net == NetIPv4 && fam == afInet:
		copy(av.SGID[:12], v4Mapped[:])
		copy(av.SGID[12:], sa[4:8])
		if !isV4Mapped(&av.DGID) {
			return av, false
		}
	case av.Net == NetIPv6 && fam == afInet6:
		copy(av.SGID[:], sa[8:24])
	default:
		return av, false
	}
	av.Valid = true
	return av, true
}

// Offsets of the inline address vector (rxe_send_wqe.wr.wr.ud.av) and the
// socket address families rxe writes into it.
const (
	sendWQEAVOff = 56
	afInet       = 2
	afInet6      = 10
)
