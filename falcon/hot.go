package falcon

import "falconnic/internal/stats"

// The counters every packet or transaction bumps (frames, bytes,
// transaction packets, submissions, completions, ACKs) are atomic adds,
// and an atomic add waits for the core's store buffer to drain. A driver
// that hands the endpoint frames in bursts (all the frames one poll of a
// link found) brackets each with BeginBurst and EndBurst; inside a burst
// those counts add up in plain fields and EndBurst publishes them, one
// atomic add per counter that moved. Outside a burst every count goes to
// its counter at once. A reader on another goroutine sees a burst's
// counts when it ends; so does a ULP callback during the burst.

// epHot indexes an endpoint's per-event counters.
type epHot uint8

const (
	hotRxFrames epHot = iota
	hotRxBytes
	hotTxFrames
	hotTxBytes
	numEpHot
)

// connHot indexes a connection's per-event counters.
type connHot uint8

const (
	hotTxnSubmitted connHot = iota
	hotTxTxnPackets
	hotRxTxnPackets
	hotDelivered
	hotCompleted
	hotXoff
	hotXon
	hotAckPiggyback
	hotRxBACK
	hotTxBACK
	hotAckByCount
	hotAckByAR
	numConnHot
)

// epHotCounters and connHotCounters name each index's counter.
var epHotCounters = [numEpHot]func(*EndpointCounters) *stats.Counter{
	hotRxFrames: func(s *EndpointCounters) *stats.Counter { return &s.RxFrames },
	hotRxBytes:  func(s *EndpointCounters) *stats.Counter { return &s.RxBytes },
	hotTxFrames: func(s *EndpointCounters) *stats.Counter { return &s.TxFrames },
	hotTxBytes:  func(s *EndpointCounters) *stats.Counter { return &s.TxBytes },
}

var connHotCounters = [numConnHot]func(*ConnCounters) *stats.Counter{
	hotTxnSubmitted: func(s *ConnCounters) *stats.Counter { return &s.TxnSubmitted },
	hotTxTxnPackets: func(s *ConnCounters) *stats.Counter { return &s.TxTxnPackets },
	hotRxTxnPackets: func(s *ConnCounters) *stats.Counter { return &s.RxTxnPackets },
	hotDelivered:    func(s *ConnCounters) *stats.Counter { return &s.Delivered },
	hotCompleted:    func(s *ConnCounters) *stats.Counter { return &s.Completed },
	hotXoff:         func(s *ConnCounters) *stats.Counter { return &s.Xoff },
	hotXon:          func(s *ConnCounters) *stats.Counter { return &s.Xon },
	hotAckPiggyback: func(s *ConnCounters) *stats.Counter { return &s.AckPiggyback },
	hotRxBACK:       func(s *ConnCounters) *stats.Counter { return &s.RxBACK },
	hotTxBACK:       func(s *ConnCounters) *stats.Counter { return &s.TxBACK },
	hotAckByCount:   func(s *ConnCounters) *stats.Counter { return &s.AckByCount },
	hotAckByAR:      func(s *ConnCounters) *stats.Counter { return &s.AckByAR },
}

// epCounts is an endpoint's unpublished counts.
type epCounts struct {
	n     [numEpHot]uint64
	ctr   [numEpHot]*stats.Counter
	dirty []*Conn // connections with unpublished counts
	burst bool    // between BeginBurst and EndBurst: counts wait
}

// connCounts is a connection's unpublished counts.
type connCounts struct {
	n     [numConnHot]uint64
	ctr   [numConnHot]*stats.Counter
	dirty bool // on the endpoint's dirty list
}

func (e *Endpoint) initCounts() {
	for k, f := range epHotCounters {
		e.hot.ctr[k] = f(&e.Stats)
	}
}

func (c *Conn) initCounts() {
	for k, f := range connHotCounters {
		c.hot.ctr[k] = f(&c.Stats)
	}
}

// BeginBurst starts a burst: the events until EndBurst (the frames of one
// poll of a link, say) publish their counts together at EndBurst. Each
// event still reads the clock for itself. Bursts do not nest.
func (e *Endpoint) BeginBurst() { e.hot.burst = true }

// EndBurst ends a burst and publishes its counts.
func (e *Endpoint) EndBurst() {
	e.hot.burst = false
	e.publish()
}

// count adds n to the endpoint's counter k.
func (e *Endpoint) count(k epHot, n uint64) {
	if !e.hot.burst {
		e.hot.ctr[k].Add(n)
		return
	}
	e.hot.n[k] += n
}

// count adds one to the connection's counter k.
func (c *Conn) count(k connHot) {
	if !c.ep.hot.burst {
		c.hot.ctr[k].Inc()
		return
	}
	c.hot.n[k]++
	if !c.hot.dirty {
		c.hot.dirty = true
		c.ep.hot.dirty = append(c.ep.hot.dirty, c)
	}
}

// publish adds the unpublished counts to their counters.
func (e *Endpoint) publish() {
	for k, v := range e.hot.n {
		if v != 0 {
			e.hot.ctr[k].Add(v)
			e.hot.n[k] = 0
		}
	}
	for i, c := range e.hot.dirty {
		for k, v := range c.hot.n {
			if v != 0 {
				c.hot.ctr[k].Add(v)
				c.hot.n[k] = 0
			}
		}
		c.hot.dirty = false
		e.hot.dirty[i] = nil
	}
	e.hot.dirty = e.hot.dirty[:0]
}
