package device

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/wire"
	"falconnic/internal/metrics"
	"falconnic/internal/stats"
)

// needTool returns the path of a program the test needs. Where it is
// missing the test is skipped on a developer's machine and fails in CI
// (CI set): scripts/deps.sh installs it there.
func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (scripts/deps.sh installs it): %v", name, err)
	}
	t.Skipf("%s is not installed (scripts/deps.sh installs it)", name)
	return ""
}

// metricsConfig is two vhost-user NICs, a namespace on one and a disk on
// the other: the daemon the Prometheus goal names.
const metricsConfig = `{
  "control": "ctl.sock",
  "nics": [
    {"name": "host", "socket": "host.sock", "mac": "52:54:00:00:00:01"},
    {"name": "store", "socket": "store.sock", "mac": "52:54:00:00:00:02"}
  ],
  "nvme": {
    "namespaces": [{"nic": "store", "nsid": 1, "backing": "memory", "size": 4194304}],
    "disks": [{"name": "d0", "socket": "vm/d0.sock", "nic": "host", "target": "store", "nsid": 1}]
  }
}`

// startVhostDaemon runs a daemon of vhost-user NICs from cfgJSON until
// the test ends.
func startVhostDaemon(t testing.TB, cfgJSON string) *Daemon {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "falconnic.json")
	if err := os.WriteFile(path, []byte(cfgJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDaemon(cfg, DaemonOptions{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// dialRDMA has NIC a's connection manager set up an RDMA connection to
// NIC b and waits (bounded) until both ends have it.
func dialRDMA(t testing.TB, d *Daemon, a, b string) {
	t.Helper()
	na, nb := d.nic(a), d.nic(b)
	na.falcon.Do(func(*falcon.Endpoint) { na.cm.Dial(wire.ProtoRDMA, nb.mac()) })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_, _, pa, _ := na.nicConns(0)
		_, _, pb, _ := nb.nicConns(0)
		if pa["rdma"] == 1 && pb["rdma"] == 1 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no RDMA connection between the NICs")
}

func scrape(t testing.TB, d *Daemon) string {
	t.Helper()
	srv := httptest.NewServer(metrics.Handler(metrics.NewRegistry(metrics.NewCollector(func() []stats.Table { return d.CounterTables(DefaultTopConns) }))))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// TestMetricsPassPromtool: a scrape of a daemon with two NICs, an RDMA
// pair and an NVMe disk passes `promtool check metrics`, and carries the
// counters of every table with their labels.
func TestMetricsPassPromtool(t *testing.T) {
	promtool := needTool(t, "promtool")
	d := startVhostDaemon(t, metricsConfig)
	dialRDMA(t, d, "host", "store")
	text := scrape(t, d)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		`falconnic_switch_port_rx_frames_total{port="host"}`,
		`falconnic_eth_`,
		`falconnic_vhost_user_`,
		`{device="d0",function="blk"}`,
		`falconnic_rdma_`,
		`falconnic_verbs_`,
		`falconnic_port_rx_packets_total{nic="store"}`,
		`falconnic_falcon_connections{nic="host",protocol="rdma"} 1`,
		`falconnic_falcon_connections{nic="host",protocol="nvme"} 1`,
		`falconnic_falcon_conn_tx_txn_packets_total{connection=`,
		`falconnic_falcon_conn_fcwnd{connection=`,
		`falconnic_falcon_nic_conns_not_exported{nic="host"} 0`,
		`falconnic_falcon_tx_txn_packets_open_conns{nic="host"}`,
		`falconnic_nvme_`,
		`falconnic_nvme_namespace_reads_total{namespace="1",nic="store"}`,
		`falconnic_blk_`,
		`falconnic_cm_conns_up_total `,
		`falconnic_port_timer_late_max_seconds{nic="host"}`,
		`falconnic_metrics_series_conflicts_total 0`,
		`# HELP falconnic_cm_dials_total connection set-ups started by this daemon's NICs`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// TestMetricsCapConnections: past the per-NIC cap, connections are not
// exported one by one but counted.
func TestMetricsCapConnections(t *testing.T) {
	d := startVhostDaemon(t, metricsConfig)
	dialRDMA(t, d, "host", "store")
	var conns, notExported float64
	for _, tb := range d.CounterTables(1) {
		switch tb.Kind {
		case "falcon_conn":
			if tb.Labels[0].Value == "host" {
				conns++
			}
		case "falcon_nic":
			if tb.Labels[0].Value == "host" {
				notExported = tb.Gauges[0].Value
			}
		}
	}
	if conns != 1 || notExported != 1 {
		t.Errorf("host: %v connections exported, %v counted as not exported; want 1 and 1 (rdma + nvme, cap 1)", conns, notExported)
	}
}

// BenchmarkScrape is one Prometheus scrape of the metricsConfig daemon
// (RDMA pair, NVMe disk): tables, encoding, HTTP. At one scrape a second
// the CPU share of a core is ns/op ÷ 10⁹.
func BenchmarkScrape(b *testing.B) {
	d := startVhostDaemon(b, metricsConfig)
	dialRDMA(b, d, "host", "store")
	srv := httptest.NewServer(metrics.Handler(metrics.NewRegistry(metrics.NewCollector(func() []stats.Table { return d.CounterTables(DefaultTopConns) }))))
	defer srv.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resp, err := http.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.SetBytes(n)
	}
}
