package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"falconnic/internal/stats"
)

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"rx_frames":           "rx_frames",
		"Reads":               "reads",
		"WatchdogAvailNoKick": "watchdog_avail_no_kick",
		"FUAWrites":           "fua_writes",
		"vhost.kicks":         "vhost_kicks",
		"rx-µs":               "rx__s",
	} {
		if got := SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCollectNamesTypesAndConflicts: counters get _total, high-water marks
// and gauges do not, time units become seconds, and a table that would
// change a family's labels is left out and counted.
func TestCollectNamesTypesAndConflicts(t *testing.T) {
	var a, b, late stats.Counter
	a.Add(3)
	b.Add(5)
	late.Max(1500)
	c := NewCollector(func() []stats.Table {
		return []stats.Table{
			{Kind: "port", Labels: []stats.Label{{Name: "nic", Value: "n0"}}, Set: stats.Set{
				{Name: "port_rx_packets", Help: "packets", Counter: &a},
				{Name: "port_timer_late_max_us", Help: "latest wake", Counter: &late},
			}, Gauges: []stats.Gauge{{Name: "depth", Help: "queue depth", Value: 2}}},
			{Kind: "port", Labels: []stats.Label{{Name: "disk", Value: "d0"}}, Set: stats.Set{
				{Name: "port_rx_packets", Help: "packets", Counter: &b},
			}},
		}
	})
	want := `
# HELP falconnic_port_rx_packets_total packets
# TYPE falconnic_port_rx_packets_total counter
falconnic_port_rx_packets_total{nic="n0"} 3
# HELP falconnic_port_timer_late_max_seconds latest wake
# TYPE falconnic_port_timer_late_max_seconds gauge
falconnic_port_timer_late_max_seconds{nic="n0"} 0.0015
# HELP falconnic_port_depth queue depth
# TYPE falconnic_port_depth gauge
falconnic_port_depth{nic="n0"} 2
# HELP falconnic_metrics_series_conflicts_total series left out of a scrape: their family already had other label names or help text
# TYPE falconnic_metrics_series_conflicts_total counter
falconnic_metrics_series_conflicts_total 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"falconnic_port_rx_packets_total", "falconnic_port_timer_late_max_seconds", "falconnic_port_depth",
		"falconnic_metrics_series_conflicts_total"); err != nil {
		t.Error(err)
	}
}
