package falcon

import (
	"time"

	"falconnic/falcon/rue"
	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// Config configures an Endpoint (one NIC's Falcon engine).
type Config struct {
	Clock clock.Clock // required
	Link  Link        // where packets go; required before traffic
	ULP   ULP         // target deliveries and initiator completions; required
	RUE   rue.Engine  // congestion control; nil keeps every window at its initial value
	// Rand supplies initial PSNs/RSNs for Connect when a ConnConfig leaves
	// them to the endpoint (nil: a fixed-seed generator).
	Rand interface{ Uint32() uint32 }
	// Limits sizes the NIC's resource pools (zero value: tl.DefaultLimits).
	Limits tl.Limits
	// Tap, when set, sees every Falcon packet sent (tx) or accepted by the
	// integrity check (rx), without the envelope. It must not keep pkt.
	Tap func(tx bool, pkt []byte)
	// ReplayMargin is the PAWS-like replay window on IV timestamps
	// [S §9.2.2.2]; 0 means 1 s.
	ReplayMargin time.Duration
	// ReplayMaxLead bounds how far ahead of the peer's projected clock an
	// IV timestamp may be: one further ahead is dropped (RxIVAhead) and
	// does not move the peer clock, so no single datagram can make every
	// later one a "replay" [issue 18, finding 3]. 0 means 10 s.
	ReplayMaxLead time.Duration
}

// ConnConfig is what the connection manager sets up for one connection
// [S §6.2, digest §4]. Zero fields take the defaults noted.
type ConnConfig struct {
	SCID uint32 // local CID: the DCID peers put on packets to us (24 bits)
	DCID uint32 // the peer's CID for this connection
	// Ordered selects RSN-ordered delivery and completion.
	Ordered  bool
	Protocol wire.ProtocolType // default RDMA
	DestFn   uint32            // Destination Function on outgoing packets
	// Peer is the link towards the peer NIC; nil uses the endpoint's Link.
	Peer Link
	// Flows is the number of paths (1..4, default 1) [digest §7]. New
	// packets take the flows in round robin; retransmissions keep theirs.
	Flows int
	// PathPolicy chooses the flow of each new packet (default round
	// robin).
	PathPolicy PathPolicy
	// ProtectiveReroute moves a flow to a new path (a new label) when one
	// of its packets times out; RerouteHold (default 1 ms) then suspends
	// PLB's congestion repaths of that flow for a random time in
	// [hold, 2·hold).
	ProtectiveReroute bool
	RerouteHold       time.Duration
	// RerouteOnProbe also reroutes a flow when RACK or a tail-loss probe
	// resends one of its packets (needs RACK/TLP): they detect a loss
	// after one or two RTTs, an RTO after at least MinRTO, so a failed
	// path is left sooner.
	RerouteOnProbe bool
	// FlowLabels are the flows' labels; the flow id is the label's low 2
	// bits (default: label i = i).
	FlowLabels [4]uint32

	// Initial sequence numbers. Our TX PSNs must equal the peer's RX bases.
	TxReqPSN, TxDataPSN wire.PSN // ours
	RxReqPSN, RxDataPSN wire.PSN // the peer's TX PSNs
	TxRSN, RxRSN        wire.RSN // our first RSN / the peer's first RSN

	TxWindow  uint32 // TX ring per window (default 256)
	MaxTxns   uint32 // initiator table (default 256); target table is 2×
	MTU       int    // max transaction payload bytes (default 4096+256)
	InitFcwnd rue.Fixed
	// MaxFcwnd caps the window the RUE gives each flow, and their sum
	// (0: none beyond the receive windows). Between two NICs of one
	// daemon nothing congests, so a delay-based RUE grows the window to
	// the receive window; the cap keeps the packets in flight to what
	// the link needs.
	MaxFcwnd  rue.Fixed
	InitNcwnd uint32
	// MaxNcwnd caps the NIC window the RUE gives (0: none). Between two
	// NICs of one daemon no receiver's buffers fill as a NIC's do, so a
	// RUE that grows ncwnd while nothing pushes back takes it to its
	// ceiling; the cap keeps the requests in flight to what the link
	// needs, as MaxFcwnd does the packets.
	MaxNcwnd   uint32
	InitRTO    time.Duration // default 1 ms
	MinRTO     time.Duration // default 100 µs
	MaxRTO     time.Duration // backoff cap, default 100 ms
	MaxRetries uint8         // per packet before Resync 0x3 (default 16)
	// ULPRTO paces resends of a packet the peer reported received but not
	// yet acknowledged (Push Data waiting for its ULP ack): such resends do
	// not count toward MaxRetries (Isekai's ULP-RTO, digest §5.6; default
	// 5 ms, at least the RTO).
	ULPRTO time.Duration
	// PullTimeout is the TL's transaction timeout for pulls (kCmplLocalTO
	// when the Pull Data never comes; default 1 s; negative disables).
	PullTimeout time.Duration
	// PullReclaim is the target's soft-state reclaim for a delivered pull
	// its ULP never answers (F-TL-6; default 2 × PullTimeout, much longer
	// than the initiator's timeout; negative disables).
	PullReclaim time.Duration

	AckCoalesceCount   int           // default 10
	AckCoalesceTimeout time.Duration // default 8 µs
	ARFcwndThreshold   uint32        // AR on every packet below (default 2)
	ARPercent          uint32        // else on this percent of packets (default 10)
	OOODistance        uint32        // early retransmit distance (default 3)
	EarlyRetxCap       uint8         // per packet (default 16)
	RACK, TLP          bool          // Gen3 extensions (default off)
	// TLPProbes is how many tail-loss probes go out a PTO apart while no
	// ACK arrives (default 1: one probe, then the RTO, digest §5.7). More
	// cover a lost probe, or the lost ACK of one, at the PTO's pace rather
	// than the RTO's: a probe the receiver already holds costs it one
	// duplicate and draws the ACK the sender lacks. RerouteOnProbe probes
	// up to maxRerouteProbes times whatever this says. Below one packet
	// of fcwnd a probe that falls due inside the pacing gap waits for its
	// end, as every departure of a paced connection does.
	TLPProbes uint8
	// GateInFlight lets fcwnd bound the packets in flight — sent and not
	// acknowledged — rather than the PSN distance from the window's base
	// (Rev 0.9 §9.1.2, the default); the distance stays within the
	// receiver's window. A hole then holds only its own packet of the
	// window while it is repaired, not every packet after it. Packets
	// the receiver reported received before the first hole still count
	// (pdl.TxWindow.Unsettled): it holds them for its ULP, so a slow
	// host keeps its backpressure.
	GateInFlight bool
	// AckHoles has the receiver acknowledge at once a packet that arrives
	// beyond a hole in its window or fills one, rather than at the
	// coalescing count or timer: the sender's early retransmission (OOO
	// distance, RACK) starts sooner, and the window reopens as soon as
	// the repair lands. Costs ACKs only when packets are lost or
	// reordered.
	AckHoles bool
	// AckPerConn sends one ACK per coalescing round, on the latest
	// packet's label, instead of one per flow the peer sent on (each with
	// that flow's own timestamps) [digest §7]: a baseline for benchmarks.
	AckPerConn bool
	// GoBackN makes both the receiver (accept only the next PSN) and the
	// transmitter (resend everything from a loss) behave like RoCE without
	// selective repeat. Both ends must agree. Benchmark baseline only.
	GoBackN bool
}

func (c *ConnConfig) fill() {
	if c.Protocol == 0 {
		c.Protocol = wire.ProtoRDMA
	}
	def32 := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def32(&c.TxWindow, 256)
	def32(&c.MaxTxns, 256)
	def32(&c.InitNcwnd, 64)
	def32(&c.ARFcwndThreshold, 2)
	def32(&c.ARPercent, 10)
	def32(&c.OOODistance, 3)
	if c.Flows <= 0 || c.Flows > 4 {
		c.Flows = 1
	}
	if c.FlowLabels == [4]uint32{} {
		c.FlowLabels = [4]uint32{0, 1, 2, 3}
	}
	if c.MTU == 0 {
		c.MTU = 4096 + 256
	}
	if c.MTU > 0xffff {
		c.MTU = 0xffff
	}
	if c.InitFcwnd == 0 {
		c.InitFcwnd = 32 * rue.One
	}
	if c.MaxFcwnd > 0 {
		c.InitFcwnd = min(c.InitFcwnd, c.MaxFcwnd)
	}
	if c.MaxNcwnd > 0 {
		c.InitNcwnd = min(c.InitNcwnd, c.MaxNcwnd)
	}
	defD(&c.InitRTO, time.Millisecond)
	defD(&c.MinRTO, 100*time.Microsecond)
	defD(&c.MaxRTO, 100*time.Millisecond)
	defD(&c.RerouteHold, time.Millisecond)
	if c.PathPolicy >= numPathPolicies {
		c.PathPolicy = PathRoundRobin
	}
	defD(&c.AckCoalesceTimeout, 8*time.Microsecond)
	defD(&c.PullTimeout, time.Second)
	defD(&c.ULPRTO, 5*time.Millisecond)
	if c.PullReclaim == 0 && c.PullTimeout > 0 {
		c.PullReclaim = 2 * c.PullTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 16
	}
	if c.EarlyRetxCap == 0 {
		c.EarlyRetxCap = 16
	}
	if c.AckCoalesceCount == 0 {
		c.AckCoalesceCount = 10
	}
}

// Mirror returns the peer's view of a connection configured as c: CIDs and
// every TX/RX initial sequence number swapped.
func Mirror(c ConnConfig) ConnConfig {
	m := c
	m.SCID, m.DCID = c.DCID, c.SCID
	m.TxReqPSN, m.RxReqPSN = c.RxReqPSN, c.TxReqPSN
	m.TxDataPSN, m.RxDataPSN = c.RxDataPSN, c.TxDataPSN
	m.TxRSN, m.RxRSN = c.RxRSN, c.TxRSN
	return m
}
