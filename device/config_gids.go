package device

import (
	"fmt"
	"net/netip"

	"falconnic/verbs"
)

// gids returns the GIDs a NIC's guest may put in its UD sends [issue 18,
// finding 7]: with "ips" in its config, the RoCE link-local GID of its
// MAC and the GID of each address (IPv4-mapped for IPv4, as the guest
// driver's ip_gids); anything else is refused by the verbs engine
// (verbs.Engine.SetGIDs). Without "ips" the device does not know the
// guest's addresses (RoCEv2 GIDs are the netdev's IPs) and does not
// check: nil.
func (n NICSpec) gids() ([][16]byte, error) {
	if len(n.IPs) == 0 {
		return nil, nil
	}
	var mac verbs.MAC
	copy(mac[:], n.hwAddr())
	out := [][16]byte{verbs.LinkLocalGID(mac)}
	for _, s := range n.IPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("ips: %q is not an IP address", s)
		}
		out = append(out, a.As16()) // IPv4: ::ffff:a.b.c.d
	}
	return out, nil
}
