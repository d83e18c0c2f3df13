package device

import (
	"sort"
	"strconv"

	"falconnic/device/ether"
	"falconnic/falcon"
	"falconnic/falcon/wire"
	"falconnic/internal/stats"
)

// The daemon's counter tables as exporters read them (the Prometheus
// endpoint, `falconnic top`): every stats.Set the daemon keeps, each with
// the labels that name its instance. This is the one place that lists
// them; status reads the same tables.

// DefaultTopConns is how many connections per NIC CounterTables and Conns
// report one by one unless told otherwise: the busiest ones.
const DefaultTopConns = 8

// ConnReport is one Falcon connection of a NIC: its identity, its
// congestion-control state and its counters.
type ConnReport struct {
	NIC      string            `json:"nic"`
	Protocol string            `json:"protocol"`
	CID      uint32            `json:"cid"`
	DCID     uint32            `json:"dcid"`
	Fcwnd    float64           `json:"fcwnd"`  // fabric window, packets
	Ncwnd    uint32            `json:"ncwnd"`  // NIC window, packets
	RTTNs    int64             `json:"rtt_ns"` // smoothed RTT
	RTONs    int64             `json:"rto_ns"`
	Outstand int               `json:"outstanding"` // initiator transactions in flight
	Flows    int               `json:"flows"`
	Counters map[string]uint64 `json:"counters"`
	set      stats.Set
}

// connCounterTable names a connection's counters (help text for sums).
var connCounterTable = (&falcon.ConnCounters{}).Set()

// busy is the ranking key of "busiest": transaction packets sent and
// received since the connection opened.
func busy(c *falcon.Conn) uint64 { return c.Stats.TxTxnPackets.Load() + c.Stats.RxTxnPackets.Load() }

// nicConns reports NIC n's connections, the top busiest first (all of
// them when top <= 0), and how many the NIC has (on the port's goroutine;
// ok false once the port stopped).
func (n *daemonNIC) nicConns(top int) (conns []ConnReport, total int, byProto map[string]int, ok bool) {
	conns, total, byProto, _, ok = n.nicConnsSum(top, false)
	return conns, total, byProto, ok
}

// nicConnsSum is nicConns that also sums every open connection's counters
// by name when sum is set.
func (n *daemonNIC) nicConnsSum(top int, sum bool) (conns []ConnReport, total int, byProto map[string]int, sums map[string]uint64, ok bool) {
	ok = n.falcon.Call(func(ep *falcon.Endpoint) {
		all := append([]*falcon.Conn(nil), ep.Conns()...)
		total = len(all)
		byProto = n.falcon.ConnCounts()
		if sum {
			sums = map[string]uint64{}
			for _, c := range all {
				for _, d := range c.Stats.Set() {
					sums[d.Name] += d.Counter.Load()
				}
			}
		}
		sort.SliceStable(all, func(i, j int) bool { return busy(all[i]) > busy(all[j]) })
		if top > 0 && len(all) > top {
			all = all[:top]
		}
		for _, c := range all {
			cfg := c.Config()
			conns = append(conns, ConnReport{
				NIC: n.spec.Name, Protocol: protoLabel(cfg.Protocol), CID: c.SCID(), DCID: cfg.DCID,
				Fcwnd: c.Fcwnd().Float(), Ncwnd: c.Ncwnd(), RTTNs: int64(c.SmoothedRTT()), RTONs: int64(c.RTO()),
				Outstand: c.Outstanding(), Flows: int(cfg.Flows), set: c.Stats.Set(),
			})
		}
	})
	return conns, total, byProto, sums, ok
}

func protoLabel(t wire.ProtocolType) string {
	switch t {
	case wire.ProtoRDMA:
		return "rdma"
	case wire.ProtoNVMe:
		return "nvme"
	}
	return "proto_" + strconv.Itoa(int(t))
}

// Conns reports the busiest top connections of each NIC (every one when
// top <= 0) with their counters, for `falconnic top`.
func (d *Daemon) Conns(top int) []ConnReport {
	var out []ConnReport
	for _, n := range d.nics {
		conns, _, _, _ := n.nicConns(top)
		for i := range conns {
			conns[i].Counters = conns[i].set.Snapshot()
		}
		out = append(out, conns...)
	}
	return out
}

// CounterTables returns every counter table of the daemon with its labels:
// the switch and its ports, the fabric and its peers, the connection
// manager, and per NIC its Ethernet, vhost-user, RDMA, verbs, Falcon port
// and endpoint tables, the NVMe engine, namespaces and disks, vsock
// devices; plus, per NIC, the topConns busiest connections one by one
// (labelled by CID) and gauges of open connections. Series per connection
// are capped at topConns per NIC; the rest are counted in
// falcon_conns_not_exported.
func (d *Daemon) CounterTables(topConns int) []stats.Table {
	var ts []stats.Table
	add := func(kind string, set stats.Set, labels ...string) {
		t := stats.Table{Kind: kind, Set: set}
		for i := 0; i+1 < len(labels); i += 2 {
			t.Labels = append(t.Labels, stats.Label{Name: labels[i], Value: labels[i+1]})
		}
		ts = append(ts, t)
	}
	add("switch", d.sw.Counters())
	for _, p := range d.sw.Ports() {
		add("switch_port", p.Counters(), "port", p.Name())
	}
	if f := d.fabric; f != nil {
		add("fabric", f.Counters())
		for _, p := range f.PeerTables() {
			add("fabric_peer", p.Set, "peer", p.Addr.String())
		}
	}
	add("cm", d.cm.Stats.Set())
	add("capture", d.capture.Stats.Set())
	for _, n := range d.nics {
		name := n.spec.Name
		if v, ok := n.eth.(*ether.NIC); ok {
			add("eth", v.Counters().Set(), "nic", name)
			add("vhost_user", v.VhostCounters().Set(), "device", name, "function", "net")
		}
		if r := n.rdma; r != nil {
			add("rdma", r.Stats.Set(), "nic", name)
			add("verbs", r.Engine().Stats.Set(), "nic", name)
		}
		add("port", n.falcon.Stats.Set(), "nic", name)
		var epSet stats.Set
		n.falcon.Call(func(ep *falcon.Endpoint) { epSet = ep.Stats.Set() })
		if epSet == nil {
			continue // the port stopped
		}
		add("falcon", epSet, "nic", name)
		conns, total, byProto, sums, _ := n.nicConnsSum(topConns, true)
		g := stats.Table{Kind: "falcon_nic", Labels: []stats.Label{{Name: "nic", Value: name}}, Gauges: []stats.Gauge{
			{Name: "conns_not_exported", Help: "open connections beyond the per-NIC cap of connections exported one by one (falconnic_falcon_conn_*)", Value: float64(total - len(conns))},
		}}
		ts = append(ts, g)
		// Every open connection's counters summed: a gauge, as a
		// connection that closes takes its counts with it.
		sum := stats.Table{Kind: "falcon", Labels: []stats.Label{{Name: "nic", Value: name}}}
		for _, d := range connCounterTable {
			sum.Gauges = append(sum.Gauges, stats.Gauge{Name: d.Name + "_open_conns", Help: d.Help + " (summed over the NIC's open connections)", Value: float64(sums[d.Name])})
		}
		ts = append(ts, sum)
		for _, proto := range []string{"rdma", "nvme"} {
			ts = append(ts, stats.Table{Kind: "falcon", Labels: []stats.Label{{Name: "nic", Value: name}, {Name: "protocol", Value: proto}},
				Gauges: []stats.Gauge{{Name: "connections", Help: "open Falcon connections of the NIC's port, by protocol", Value: float64(byProto[proto])}}})
		}
		for _, c := range conns {
			ts = append(ts, stats.Table{Kind: "falcon_conn", Labels: []stats.Label{
				{Name: "nic", Value: name}, {Name: "protocol", Value: c.Protocol}, {Name: "connection", Value: strconv.FormatUint(uint64(c.CID), 10)},
			}, Set: c.set, Gauges: []stats.Gauge{
				{Name: "fcwnd", Help: "the connection's fabric congestion window, packets", Value: c.Fcwnd},
				{Name: "ncwnd", Help: "the connection's NIC congestion window, packets", Value: float64(c.Ncwnd)},
				{Name: "rtt_seconds", Help: "the connection's smoothed RTT", Value: float64(c.RTTNs) / 1e9},
				{Name: "rto_seconds", Help: "the connection's retransmission timeout", Value: float64(c.RTONs) / 1e9},
				{Name: "outstanding", Help: "initiator transactions in flight on the connection", Value: float64(c.Outstand)},
			}})
		}
		if n.nvme != nil {
			add("nvme", n.nvme.Engine.Stats.Set(), "nic", name)
		}
	}
	if nv := d.cfg.NVMe; nv != nil {
		for _, s := range nv.Namespaces {
			if n := d.nic(s.NIC); n != nil && n.nvme != nil {
				if set, ok := n.nvme.NamespaceCounters(s.NSID); ok {
					add("nvme_namespace", set, "nic", s.NIC, "namespace", strconv.Itoa(int(s.NSID)))
				}
			}
		}
	}
	d.nvme.mu.Lock()
	for _, k := range d.disks() {
		if k.blk != nil {
			add("blk", k.blk.Stats.Set(), "disk", k.spec.Name, "nic", k.spec.NIC)
			add("vhost_user", k.srv.Counters.Set(), "device", k.spec.Name, "function", "blk")
		}
	}
	d.nvme.mu.Unlock()
	for _, v := range d.vsocks {
		add("vsock", v.Counters.Set(), "device", v.Name())
		add("vhost_user", v.BackendCounters().Set(), "device", v.Name(), "function", "vsock")
	}
	return ts
}
