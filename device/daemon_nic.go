package device

import "errors"

// newVhostNIC builds the vhost-user NIC for spec. It is wired to device.NIC
// (device/nic.go) once that lands; until then the daemon runs with NICs
// given through DaemonOptions.NewNIC only.
func newVhostNIC(spec NICSpec, uplink deliverer) (DaemonNIC, error) {
	return nil, errors.New("device: the vhost-user NIC (device/nic.go) is not in this build yet")
}
