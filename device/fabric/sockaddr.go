package fabric

import (
	"encoding/binary"
	"net/netip"

	"golang.org/x/sys/unix"
)

// rawSockaddr holds a struct sockaddr_in or sockaddr_in6 as the kernel
// reads and writes it for sendmmsg and recvmmsg: the family in host byte
// order, the port in network byte order.
type rawSockaddr [unix.SizeofSockaddrInet6]byte

// putSockaddr writes ap into sa for a socket of the IPv6 family (v6: an
// IPv4 address becomes v4-mapped) or the IPv4 family, and returns the
// sockaddr's length; 0 if ap cannot be sent to from such a socket.
func putSockaddr(sa *rawSockaddr, ap netip.AddrPort, v6 bool) uint32 {
	*sa = rawSockaddr{}
	a := ap.Addr()
	binary.BigEndian.PutUint16(sa[2:], ap.Port())
	switch {
	case v6:
		binary.NativeEndian.PutUint16(sa[0:], unix.AF_INET6)
		ip := a.As16()
		copy(sa[8:24], ip[:])
		return unix.SizeofSockaddrInet6
	case a.Is4() || a.Is4In6():
		binary.NativeEndian.PutUint16(sa[0:], unix.AF_INET)
		ip := a.Unmap().As4()
		copy(sa[4:8], ip[:])
		return unix.SizeofSockaddrInet4
	}
	return 0
}

// parseSockaddr decodes the source address the kernel wrote for a
// received datagram (n bytes of sa); ok false if it is neither a complete
// sockaddr_in nor a complete sockaddr_in6. A v4-mapped IPv6 address comes
// back as IPv4.
func parseSockaddr(sa *rawSockaddr, n uint32) (netip.AddrPort, bool) {
	if n < 2 || n > uint32(len(sa)) {
		return netip.AddrPort{}, false
	}
	port := binary.BigEndian.Uint16(sa[2:])
	switch binary.NativeEndian.Uint16(sa[0:]) {
	case unix.AF_INET:
		if n < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port), true
	case unix.AF_INET6:
		if n < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(sa[8:24])).Unmap(), port), true
	}
	return netip.AddrPort{}, false
}

// setOffload turns UDP GRO on for every socket and reports whether the
// kernel takes UDP GSO sends on all of them: both or neither are used.
func setOffload(raw []rawConn) bool {
	ok := true
	for _, rc := range raw {
		err := rc.Control(func(fd uintptr) {
			if _, err := unix.GetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT); err != nil {
				ok = false
				return
			}
			if err := unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
				ok = false
			}
		})
		if err != nil {
			ok = false
		}
	}
	if !ok {
		for _, rc := range raw {
			_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 0) })
		}
	}
	return ok
}

// groSegment returns the segment size of a coalesced receive from the
// control messages ctrl the kernel wrote (UDP_GRO), or 0 if there is
// none. Malformed control data yields 0: the receive is then taken as
// one datagram.
func groSegment(ctrl []byte) int {
	const hdrLen = unix.SizeofCmsghdr
	const lenLen = hdrLen - 8 // cmsg_len is a size_t, level and type ints
	for len(ctrl) >= hdrLen {
		var l uint64
		if lenLen == 8 {
			l = binary.NativeEndian.Uint64(ctrl)
		} else {
			l = uint64(binary.NativeEndian.Uint32(ctrl))
		}
		level := int32(binary.NativeEndian.Uint32(ctrl[lenLen:]))
		typ := int32(binary.NativeEndian.Uint32(ctrl[lenLen+4:]))
		if l < hdrLen || l > uint64(len(ctrl)) {
			return 0
		}
		if level == unix.SOL_UDP && typ == unix.UDP_GRO && l >= hdrLen+4 {
			return int(int32(binary.NativeEndian.Uint32(ctrl[hdrLen:])))
		}
		next := unix.CmsgSpace(int(l) - hdrLen)
		if next > len(ctrl) {
			return 0
		}
		ctrl = ctrl[next:]
	}
	return 0
}
