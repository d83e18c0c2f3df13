// Package stats holds falconnic's counters: free-running atomics, one per
// cause, each exported with a name and a line of help text.
//
// A component keeps its counters in a struct of Counter fields and lists
// them once in a Set (the table of name → counter → help). Hot paths only
// call Inc/Add; status and benchmarks read Snapshot.
package stats

import (
	"sort"
	"sync/atomic"
)

// Counter is a free-running 64-bit event counter, safe for concurrent use.
// The zero value is ready.
type Counter struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Max raises the value to v if v is larger: a high-water mark kept in a
// counter's table (it never goes down).
func (c *Counter) Max(v uint64) {
	for {
		old := c.v.Load()
		if v <= old || c.v.CompareAndSwap(old, v) {
			return
		}
	}
}

// Load returns the current value.
func (c *Counter) Load() uint64 { return c.v.Load() }

// Desc names one counter.
type Desc struct {
	Name    string
	Help    string
	Counter *Counter
}

// Set is a table of counters of one component instance.
type Set []Desc

// Snapshot returns the current value of every counter by name.
func (s Set) Snapshot() map[string]uint64 {
	m := make(map[string]uint64, len(s))
	for _, d := range s {
		m[d.Name] = d.Counter.Load()
	}
	return m
}

// NonZero returns the names of counters that are not zero, sorted.
func (s Set) NonZero() []string {
	var names []string
	for _, d := range s {
		if d.Counter.Load() != 0 {
			names = append(names, d.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Label tells one instance of a counter table from the others of its kind
// (nic="n0", disk="d0").
type Label struct{ Name, Value string }

// Gauge is a value that goes up and down (open connections, a window), kept
// beside a counter table for exporters.
type Gauge struct {
	Name  string
	Help  string
	Value float64
}

// Table is one instance of a counter table as an exporter sees it: its
// kind (the family prefix every instance of that table shares: "fabric",
// "falcon", "vhost_user"), the labels that name this instance, its counters
// and any gauges. Every table of one kind carries the same label names.
type Table struct {
	Kind   string
	Labels []Label
	Set    Set
	Gauges []Gauge
}
