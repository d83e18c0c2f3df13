package fabric

import (
	"math/bits"
	"time"

	"falconnic/internal/clock"
	"falconnic/internal/stats"
)

// Cause is why the fabric dropped a packet.
type Cause uint8

// Drop causes, each with its own counter.
const (
	DropHostQueue Cause = iota // a host NIC's egress queue was full
	DropPortCap                // a switch egress queue reached PortBytes
	DropThreshold              // a switch queue exceeded α × free shared buffer
	DropPoolFull               // a switch's shared pool was full
	DropLinkDown               // the link was down (failed, still hashed or not yet withdrawn)
	DropLoss                   // the link's configured random loss
	DropNoRoute                // no spine was routable between the racks
	NumCauses
)

var causeNames = [NumCauses]string{"host_queue", "port_cap", "dt_threshold", "pool_full", "link_down", "loss", "no_route"}

func (c Cause) String() string { return causeNames[c] }

// Stats counts what a Fabric did, fabric-wide, one counter per cause.
type Stats struct {
	Sent                stats.Counter
	Delivered           stats.Counter
	DeliveredECN        stats.Counter
	ECNMarked           stats.Counter
	LinkFailures        stats.Counter
	BackgroundSent      stats.Counter
	BackgroundDelivered stats.Counter
	BackgroundDropped   stats.Counter
	DropNoHost          stats.Counter
	DropNoReceiver      stats.Counter
	Drops               [NumCauses]stats.Counter
}

func (s *Stats) drop(c Cause) { s.Drops[c].Inc() }

// Set lists the counters with their help text.
func (s *Stats) Set() stats.Set {
	set := stats.Set{
		{Name: "fabric_sent", Help: "packets hosts handed to the fabric", Counter: &s.Sent},
		{Name: "fabric_delivered", Help: "packets delivered to a host's receiver", Counter: &s.Delivered},
		{Name: "fabric_delivered_ecn", Help: "delivered packets carrying an ECN mark", Counter: &s.DeliveredECN},
		{Name: "fabric_ecn_marked", Help: "packets marked at a switch queue above the ECN threshold", Counter: &s.ECNMarked},
		{Name: "fabric_link_failures", Help: "scheduled leaf-spine link failures that happened", Counter: &s.LinkFailures},
		{Name: "fabric_background_sent", Help: "background (non-Falcon) packets generated", Counter: &s.BackgroundSent},
		{Name: "fabric_background_delivered", Help: "background packets that reached their sink", Counter: &s.BackgroundDelivered},
		{Name: "fabric_background_dropped", Help: "background packets dropped (also counted by cause)", Counter: &s.BackgroundDropped},
		{Name: "fabric_drop_no_host", Help: "packets addressed to a host outside the fabric", Counter: &s.DropNoHost},
		{Name: "fabric_drop_no_receiver", Help: "packets for a host with no receiver attached", Counter: &s.DropNoReceiver},
	}
	help := [NumCauses]string{
		"packets dropped at a full host NIC egress queue",
		"packets dropped at a switch egress queue holding PortBytes",
		"packets dropped by the shared buffer's dynamic threshold (alpha x free)",
		"packets dropped because a switch's shared pool was full",
		"packets dropped by a failed link",
		"packets dropped by a link's configured random loss",
		"packets dropped because no spine was routable",
	}
	for c := range NumCauses {
		set = append(set, stats.Desc{Name: "fabric_drop_" + causeNames[c], Help: help[c], Counter: &s.Drops[c]})
	}
	return set
}

// LinkMetrics is what one link did.
type LinkMetrics struct {
	TxPackets     uint64
	TxBytes       uint64
	ECNMarked     uint64
	MaxQueueBytes int
	Drops         [NumCauses]uint64
	// QueueDelay is the histogram of the time packets waited in the queue
	// before their serialization started.
	QueueDelay Histogram
	// Series holds the samples of a watched link.
	Series []Sample
}

// Sample is one point of a watched link's time series.
type Sample struct {
	At          clock.Time
	QueueBytes  int
	Utilization float64 // over the sample period
}

// Metrics returns link i's metrics (the histogram and series are shared,
// not copied).
func (f *Fabric) Metrics(i int) LinkMetrics { return f.links[i].m }

// QueueBytes returns the bytes queued on link i now.
func (f *Fabric) QueueBytes(i int) int { return f.links[i].backlog }

// Rate returns link i's current rate in bits per second.
func (f *Fabric) Rate(i int) uint64 { return f.links[i].rate }

// Kind returns link i's kind.
func (f *Fabric) Kind(i int) Kind { return f.links[i].kind }

// Watch records a queue-depth and utilization series of link i every
// Config.SampleEvery.
func (f *Fabric) Watch(i int) {
	f.watched = append(f.watched, i)
	f.links[i].lastTx = f.links[i].m.TxBytes
	if !f.sampling && f.cfg.SampleEvery > 0 {
		f.sampling = true
		f.push(f.clk.Now()+f.cfg.SampleEvery, evSample, 0)
	}
}

// StopSampling ends the series at the next sample (so an idle fabric
// runs out of events).
func (f *Fabric) StopSampling() { f.sampling = false }

func (f *Fabric) sample(t clock.Time) {
	if !f.sampling {
		return
	}
	period := f.cfg.SampleEvery.Seconds()
	for _, i := range f.watched {
		l := &f.links[i]
		u := float64(l.m.TxBytes-l.lastTx) * 8 / (float64(l.rate) * period)
		l.lastTx = l.m.TxBytes
		l.m.Series = append(l.m.Series, Sample{At: t, QueueBytes: l.backlog, Utilization: u})
	}
	f.push(t+f.cfg.SampleEvery, evSample, 0)
}

// Histogram counts durations in power-of-two nanosecond buckets: bucket
// 0 holds 0 ns, bucket k holds [2^(k-1), 2^k) ns.
type Histogram struct {
	Buckets [48]uint64
	Count   uint64
	Sum     time.Duration
}

func (h *Histogram) add(d time.Duration) {
	b := 0
	if d > 0 {
		b = min(bits.Len64(uint64(d)), len(h.Buckets)-1)
	}
	h.Buckets[b]++
	h.Count++
	h.Sum += d
}

// Mean returns the mean duration.
func (h *Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// Quantile returns the upper edge of the bucket holding quantile q.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	want := uint64(q * float64(h.Count))
	var seen uint64
	for b, n := range h.Buckets {
		seen += n
		if seen > want || seen == h.Count {
			if b == 0 {
				return 0
			}
			return time.Duration(1) << b
		}
	}
	return 0
}

// events

type evKind uint8

const (
	evArrive evKind = iota
	evDepart
	evCall
	evBackground
	evSample
)

type event struct {
	at   clock.Time
	seq  uint64
	idx  int32
	kind evKind
}

// Before orders events by (time, schedule order) in the fabric's queue.
func (a *event) Before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}
