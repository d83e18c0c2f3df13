package device

import (
	"fmt"
	"net"
	"strings"

	"falconnic/device/storage"
	"falconnic/nvme"
)

// resolveACL turns a namespace's allow list into its ACL [issue 18,
// finding 2]: NIC names of this daemon and MACs become MACs, "nqn.…"
// host NQNs, "*" (alone) lets every initiator in. No list: the NICs of
// this daemon only, so a namespace is never open to the fabric unless
// its config says to whom.
func resolveACL(n *storage.NamespaceSpec, nics []NICSpec) error {
	if n.Allow == nil {
		acl := &nvme.ACL{}
		for _, nic := range nics {
			acl.MACs = append(acl.MACs, macOf(nic.hwAddr()))
		}
		n.ACL = acl
		return nil
	}
	if len(n.Allow) == 1 && n.Allow[0] == "*" {
		n.ACL = nil
		return nil
	}
	acl := &nvme.ACL{}
	for _, a := range n.Allow {
		switch {
		case a == "*":
			return fmt.Errorf(`allow: "*" must be the only entry`)
		case strings.HasPrefix(a, "nqn."):
			acl.NQNs = append(acl.NQNs, a)
		case isMAC(a):
			hw, _ := net.ParseMAC(a)
			acl.MACs = append(acl.MACs, macOf(hw))
		default:
			found := false
			for _, nic := range nics {
				if nic.Name == a {
					acl.MACs = append(acl.MACs, macOf(nic.hwAddr()))
					found = true
				}
			}
			if !found {
				return fmt.Errorf("allow: %q is neither a nic of this daemon, a MAC nor an NQN", a)
			}
		}
	}
	n.ACL = acl
	return nil
}

func macOf(hw net.HardwareAddr) (m [6]byte) {
	copy(m[:], hw)
	return m
}
