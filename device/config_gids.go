package device

import (
	"fmt"
	"net/netip"
)

// ips returns the guest's addresses on the NIC ("ips"; nil when the config
// names none). Given, the RDMA function lets the guest's UD sends carry
// only the GIDs of its MAC and of these [issue 18, finding 7;
// rdma.Func.SetGuestAddrs]; without them the device does not know the
// guest's addresses (RoCEv2 GIDs are the netdev's IPs) and does not check.
func (n NICSpec) ips() ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range n.IPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("ips: %q is not an IP address", s)
		}
		out = append(out, a)
	}
	return out, nil
}
