package device

// newVhostNIC builds the vhost-user NIC (device.NIC) for spec, with uplink
// (its switch port) as where guest-transmitted frames go.
func newVhostNIC(spec NICSpec, uplink FrameSink) (DaemonNIC, error) {
	return NewNIC(NICConfig{
		Name:       spec.Name,
		Socket:     spec.Socket,
		MAC:        spec.hwAddr(),
		QueuePairs: spec.QueuePairs,
		Dial:       spec.Dial,
	}, uplink)
}

// The vhost-user NIC is what the daemon runs by default.
var _ DaemonNIC = (*NIC)(nil)
