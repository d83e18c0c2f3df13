// Package fabric emulates a leaf–spine datacenter network for Falcon
// experiments, event-driven on an injected clock.
//
// Topology: Racks racks of HostsPerRack hosts; each rack has one leaf
// switch, and every leaf has one link to each of Spines spine switches.
// Traffic between two hosts of one rack crosses host → leaf → host (one
// switch); traffic between racks crosses host → leaf → spine → leaf → host
// (three switches). Every link direction has its own egress queue with a
// rate, a propagation delay, and each switch adds a pipeline delay. The
// source leaf picks the spine by ECMP: a hash of (source, destination,
// flow label) with a salt of its own (each hashing stage is salted
// differently), over the spines routable to the destination rack, so a new
// flow label moves a flow.
//
// Buffers: a host NIC's egress queue may be capped (HostQueueBytes);
// a switch egress queue is capped by PortBytes and shares the switch's pool
// (PoolBytes) under a dynamic threshold — a queue may hold at most
// Alpha × (free pool bytes). A packet that joins a switch queue holding at
// least ECNBytes is marked. The receiver learns, per packet, the number of
// switches it crossed and whether it was marked (Meta).
//
// Failures and changes are scheduled in simulated time (At, Fail, Restore,
// Flap, Degrade, LossAt): a failed leaf–spine link drops everything that
// reaches it or waits in its queue; in Blackhole mode ECMP keeps hashing
// onto it, in Withdrawn mode the routing removes it after Convergence.
// Background generators add open-loop non-Falcon traffic between hosts or
// into one link at a target load.
//
// Every drop is counted by cause, fabric-wide (Stats) and per link
// (LinkMetrics.Drops); each link keeps its transmitted bytes, its largest
// backlog, ECN marks and a histogram of queueing delays, and watched links
// a queue-depth and utilization series.
//
// Mechanics: a packet is a recycled slot; its life is a chain of events in
// one heap ordered by (time, schedule order): arrival at a link's egress
// queue (admission, marking, finish time = max(arrival, link busy) +
// size/rate) and departure from it at the finish time (buffer released,
// next hop's arrival scheduled after the propagation and pipeline delays).
// Poll runs the events due at the clock's reading; NextDue tells the
// driver when to call it next. A rate change applies to packets that
// arrive after it. The fabric is driven by one goroutine.
package fabric
