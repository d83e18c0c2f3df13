package device

import (
	"regexp"
	"testing"

	"falconnic/device/cm"
	"falconnic/device/ether"
	"falconnic/device/port"
	"falconnic/device/rdma"
	"falconnic/device/storage"
	"falconnic/device/vsock"
	"falconnic/falcon"
	"falconnic/internal/stats"
	"falconnic/nvme"
	"falconnic/verbs"
	"falconnic/vhostuser"
)

// counterName is the one style of every counter the daemon exports:
// snake_case (the status adds dotted prefixes such as "vhost.").
var counterName = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestEveryCounterIsSnakeCase checks the counter table of every function,
// engine and back-end the daemon reports, each written once.
func TestEveryCounterIsSnakeCase(t *testing.T) {
	tables := map[string]stats.Set{
		"ether":     new(ether.Counters).Set(),
		"vhostuser": new(vhostuser.Counters).Set(),
		"rdma":      new(rdma.Counters).Set(),
		"verbs":     new(verbs.Counters).Set(),
		"nvme":      new(nvme.Counters).Set(),
		"namespace": new(nvme.NamespaceCounters).Set(),
		"blk":       new(storage.BlkCounters).Set(),
		"pool":      new(storage.NSPoolCounters).Set(),
		"port":      new(port.Counters).Set(),
		"cm":        new(cm.Counters).Set(),
		"vsock":     new(vsock.Counters).Set(),
		"endpoint":  new(falcon.EndpointCounters).Set(),
		"conn":      new(falcon.ConnCounters).Set(),
	}
	for table, set := range tables {
		if len(set) == 0 {
			t.Errorf("%s: empty table", table)
		}
		seen := map[string]bool{}
		for _, d := range set {
			if !counterName.MatchString(d.Name) {
				t.Errorf("%s: counter %q is not snake_case", table, d.Name)
			}
			if seen[d.Name] {
				t.Errorf("%s: counter %q listed twice", table, d.Name)
			}
			seen[d.Name] = true
		}
	}
}
