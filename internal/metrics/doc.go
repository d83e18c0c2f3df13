// Package metrics serves falconnic's counter tables (stats.Table) in the
// Prometheus exposition format through the ecosystem's client library
// (github.com/prometheus/client_golang).
//
// Naming: a table of kind K with counter N becomes the family
// falconnic_K_N_total, a counter (N in snake_case; a leading "K_" in N is
// not repeated, so the port's "port_rx_packets" is
// falconnic_port_rx_packets_total). A gauge G of the table becomes
// falconnic_K_G. A counter that is a high-water mark (its name ends in
// "_max" or has "_max_" in it) is exported as a gauge, without _total. The
// help line is the table's help text. The table's labels become the
// series' labels; every table of one kind has the same label names.
//
// Cardinality: the series are what the source returns at each scrape, so
// the source bounds them (the daemon exports at most a fixed number of
// connections per NIC one by one, and counts the others); the exporter
// adds a hard cap, MaxSeries per scrape, past which it drops series and
// counts them in falconnic_metrics_series_dropped_total.
//
// Collector gathers on each scrape (no polling in the background): a
// scrape costs one walk of the tables. The Go runtime and process
// collectors are registered beside it.
package metrics
