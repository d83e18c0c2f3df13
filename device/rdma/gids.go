package rdma

import (
	"net/netip"

	"falconnic/verbs"
)

// SetGuestAddrs tells the RDMA function the guest's addresses on the NIC
// (from the daemon's config): its UD sends may then carry only the RoCE
// link-local GID of the NIC's MAC and the GID of each address
// (IPv4-mapped for IPv4, as the guest driver's ip_gids), anything else
// completing in error [issue 18, finding 7; verbs.Engine.SetGIDs]. Call
// before the port runs.
func (r *Func) SetGuestAddrs(ips []netip.Addr) {
	gids := [][16]byte{verbs.LinkLocalGID(r.mac)}
	for _, a := range ips {
		gids = append(gids, a.As16())
	}
	r.eng.SetGIDs(gids)
}
