package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"falconnic/internal/stats"
)

// Namespace is the prefix of every family.
const Namespace = "falconnic"

// MaxSeries bounds the series one scrape exports.
const MaxSeries = 50000

// Source returns the counter tables at the time of the call.
type Source func() []stats.Table

// Collector is a prometheus.Collector over a Source.
type Collector struct {
	src Source

	mu    sync.Mutex
	descs map[descKey]*prometheus.Desc
	// Counters of the exporter itself.
	scrapes, dropped, conflicts stats.Counter
}

type descKey struct {
	name   string
	labels string
}

// NewCollector returns a collector of src's tables.
func NewCollector(src Source) *Collector {
	return &Collector{src: src, descs: map[descKey]*prometheus.Desc{}}
}

// Describe sends nothing: the families depend on the daemon's config, so
// the collector is unchecked.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// family is one family as seen during a scrape: its label names and help,
// which every series of it must share.
type family struct {
	labels string
	help   string
}

// Collect walks the source's tables and sends one constant metric per
// counter and gauge.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.scrapes.Inc()
	tables := c.src()
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]family{}
	n := 0
	var values []string
	emit := func(t *stats.Table, name, help string, typ prometheus.ValueType, v float64) {
		if n >= MaxSeries {
			c.dropped.Inc()
			return
		}
		names := make([]string, len(t.Labels))
		values = values[:0]
		for i, l := range t.Labels {
			names[i] = l.Name
			values = append(values, l.Value)
		}
		key := descKey{name, strings.Join(names, ",")}
		if f, ok := seen[name]; ok && (f.labels != key.labels || f.help != help) {
			c.conflicts.Inc() // a family must keep its labels and help within a scrape
			return
		}
		seen[name] = family{key.labels, help}
		d := c.descs[key]
		if d == nil {
			d = prometheus.NewDesc(name, help, names, nil)
			c.descs[key] = d
		}
		m, err := prometheus.NewConstMetric(d, typ, v, values...)
		if err != nil {
			c.conflicts.Inc()
			return
		}
		n++
		ch <- m
	}
	for i := range tables {
		t := &tables[i]
		kind := SnakeCase(t.Kind)
		for _, d := range t.Set {
			base, scale := baseUnits(strings.TrimPrefix(SnakeCase(d.Name), kind+"_"))
			name := Namespace + "_" + kind + "_" + base
			v := float64(d.Counter.Load()) * scale
			if isHighWater(base) {
				emit(t, name, helpText(d.Help), prometheus.GaugeValue, v)
			} else {
				emit(t, name+"_total", helpText(d.Help), prometheus.CounterValue, v)
			}
		}
		for _, g := range t.Gauges {
			emit(t, Namespace+"_"+kind+"_"+SnakeCase(g.Name), helpText(g.Help), prometheus.GaugeValue, g.Value)
		}
	}
	self := &stats.Table{Kind: "metrics"}
	for _, d := range c.Set() {
		emit(self, Namespace+"_metrics_"+d.Name+"_total", d.Help, prometheus.CounterValue, float64(d.Counter.Load()))
	}
}

// Set lists the exporter's own counters.
func (c *Collector) Set() stats.Set {
	return stats.Set{
		{Name: "scrapes", Help: "scrapes answered", Counter: &c.scrapes},
		{Name: "series_dropped", Help: "series left out of a scrape: past the cap of series per scrape", Counter: &c.dropped},
		{Name: "series_conflicts", Help: "series left out of a scrape: their family already had other label names or help text", Counter: &c.conflicts},
	}
}

// units are the abbreviated time units counter tables use, and their
// share of a second: Prometheus names carry base units.
var units = []struct {
	abbr  string
	scale float64
}{{"_ns", 1e-9}, {"_us", 1e-6}, {"_ms", 1e-3}}

// baseUnits renames a counter in a time unit to seconds and returns the
// factor that converts its value (1 for other counters).
func baseUnits(name string) (string, float64) {
	for _, u := range units {
		if strings.HasSuffix(name, u.abbr) {
			return strings.TrimSuffix(name, u.abbr) + "_seconds", u.scale
		}
	}
	return name, 1
}

func isHighWater(name string) bool {
	return strings.HasSuffix(name, "_max") || strings.Contains(name, "_max_")
}

func helpText(h string) string {
	if h == "" {
		return "(no help text in the counter table)"
	}
	return h
}

// SnakeCase turns a counter name into a valid Prometheus name part:
// CamelCase becomes camel_case, anything but letters, digits and '_'
// becomes '_'.
func SnakeCase(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsUpper(r):
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1])) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		case r < 128 && (unicode.IsLower(r) || unicode.IsDigit(r) || r == '_'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// NewRegistry returns a registry with c and the Go runtime and process
// collectors.
func NewRegistry(c *Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves reg's metrics at any path it is mounted on.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: reg})
}

// Serve serves /metrics for src on ln until ctx is done.
func Serve(ctx context.Context, ln net.Listener, src Source) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(NewRegistry(NewCollector(src))))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("falconnic daemon: metrics at /metrics\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
