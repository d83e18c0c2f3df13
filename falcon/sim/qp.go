package sim

import (
	"errors"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/tl"
)

// OpKind is what an operation does.
type OpKind uint8

// Operation kinds.
const (
	Write OpKind = iota // pushes from the QP's host to its peer
	Read                // pulls from the peer
)

func (k OpKind) String() string {
	if k == Read {
		return "pull"
	}
	return "push"
}

// Recorder collects the outcome of the operations of one class of QPs.
type Recorder struct {
	// Lat holds every completed operation's latency, from its arrival
	// (the generator's time, including waiting for flow control) to the
	// completion of its last transaction.
	Lat    []time.Duration
	Ops    uint64
	Bytes  uint64
	Failed uint64 // transactions that completed in error
}

// QP is one initiator connection and the operations it runs. An operation
// of Size bytes is split into transactions of at most the MTU; it
// completes when all of them have.
type QP struct {
	ID       int
	Src, Dst int
	Conn     *falcon.Conn // the initiator side
	Peer     *falcon.Conn // the target side
	sim      *Sim
	mtu      int

	// Generator settings (see Closed and Poisson).
	Kind    OpKind
	Size    int
	Rec     *Recorder
	closed  int           // outstanding operations kept (closed loop)
	limit   int           // operations left to start (<0: unlimited)
	stop    time.Duration // no new operation from this time (0: never)
	meanGap float64       // open loop: mean gap between arrivals, ns
	ops     []op
	head    int    // first live op in ops
	base    uint64 // seq of ops[head]
	nextSeq uint64
	issueAt int // index of the first op with transactions not yet submitted
	live    int // ops started and not completed
	OpsDone uint64
	Bytes   uint64 // bytes of completed operations
	Failed  uint64
	// TxnBytes counts the bytes of transactions completed, operations
	// finished or not (goodput of a QP whose operations are long).
	TxnBytes uint64
	// StartedBytes counts the bytes of operations started (offered).
	StartedBytes uint64
	// Dead is set when the connection refused a submission for good.
	Dead     bool
	lastDone time.Duration
}

type op struct {
	size, chunks, issued, done int
	start                      time.Duration
	failed                     bool
}

// Closed runs a closed loop: k operations of size bytes outstanding,
// each completion starting the next, until n operations have started
// (n < 0: no limit) or the clock reaches stop (0: never).
func (q *QP) Closed(kind OpKind, size, k, n int, stop time.Duration, rec *Recorder) {
	q.Kind, q.Size, q.Rec, q.closed, q.limit, q.stop = kind, size, rec, k, n, stop
	for i := 0; i < k && q.limit != 0; i++ {
		q.start(q.sim.Now())
	}
	q.pump()
}

// Poisson runs an open loop: operations of size bytes arrive with
// exponential gaps of mean 1/rate seconds from start until stop.
func (q *QP) Poisson(kind OpKind, size int, rate float64, start, stop time.Duration, rec *Recorder) {
	q.Kind, q.Size, q.Rec, q.limit, q.stop = kind, size, rec, -1, stop
	q.meanGap = 1e9 / rate
	q.sim.push(start+q.gap(), evArrival, int32(q.ID))
}

func (q *QP) gap() time.Duration {
	return time.Duration(max(1, q.sim.rng.ExpFloat64()*q.meanGap))
}

func (q *QP) arrival(now time.Duration) {
	if q.stop > 0 && now >= q.stop {
		return
	}
	q.start(now)
	q.pump()
	q.sim.push(now+q.gap(), evArrival, int32(q.ID))
}

// Outstanding returns the operations started and not completed.
func (q *QP) Outstanding() int { return q.live }

// LastCompletion returns when the QP last completed an operation.
func (q *QP) LastCompletion() time.Duration { return q.lastDone }

func (q *QP) start(now time.Duration) {
	if q.limit == 0 {
		return
	}
	if q.limit > 0 {
		q.limit--
	}
	q.StartedBytes += uint64(q.Size)
	chunks := max(1, (q.Size+q.mtu-1)/q.mtu)
	q.ops = append(q.ops, op{size: q.Size, chunks: chunks, start: now})
	q.nextSeq++
	q.live++
}

// pump submits transactions of started operations until the connection
// refuses (Xoff: OnXon calls pump again).
func (q *QP) pump() {
	s := q.sim
	for q.issueAt < len(q.ops) {
		o := &q.ops[q.issueAt]
		for o.issued < o.chunks {
			n := min(q.mtu, o.size-o.issued*q.mtu)
			cookie := q.base + uint64(q.issueAt-q.head)
			var err error
			if q.Kind == Read {
				_, err = q.Conn.Pull(cookie, n)
			} else {
				if n > len(s.zero) {
					s.zero = make([]byte, n)
				}
				_, err = q.Conn.Push(cookie, s.zero[:n])
			}
			if errors.Is(err, falcon.ErrXoff) {
				return
			}
			if err != nil { // a dead connection: nothing more can start
				q.Dead = true
				return
			}
			o.issued++
		}
		q.issueAt++
	}
}

func (q *QP) complete(cpl *falcon.Completion) {
	i := q.head + int(cpl.Cookie-q.base)
	if i < q.head || i >= len(q.ops) || q.ops[i].done >= q.ops[i].chunks {
		return
	}
	o := &q.ops[i]
	o.done++
	if cpl.Status == tl.CmplAck {
		q.TxnBytes += uint64(min(q.mtu, o.size-(o.done-1)*q.mtu))
	}
	if cpl.Status != tl.CmplAck {
		o.failed = true
		q.Failed++
		if q.Rec != nil {
			q.Rec.Failed++
		}
	}
	if o.done < o.chunks {
		return
	}
	now := q.sim.Now()
	q.live--
	q.lastDone = now
	if !o.failed {
		q.OpsDone++
		q.Bytes += uint64(o.size)
		if r := q.Rec; r != nil {
			r.Lat = append(r.Lat, now-o.start)
			r.Ops++
			r.Bytes += uint64(o.size)
		}
	}
	// Retire completed operations from the head.
	for q.head < len(q.ops) && q.ops[q.head].done == q.ops[q.head].chunks {
		q.head++
		q.base++
	}
	if q.head == len(q.ops) {
		q.issueAt -= q.head
		q.ops, q.head = q.ops[:0], 0
	} else if q.head > 64 && q.head*2 > len(q.ops) {
		n := copy(q.ops, q.ops[q.head:])
		q.issueAt -= q.head
		q.ops, q.head = q.ops[:n], 0
	}
	if q.closed > 0 && !q.Dead && (q.stop == 0 || now < q.stop) {
		q.start(now)
	}
	q.pump()
}

// AppendAges appends the age at now of every operation started and not
// completed (a latency it will at least have).
func (q *QP) AppendAges(dst []time.Duration, now time.Duration) []time.Duration {
	for i := q.head; i < len(q.ops); i++ {
		if o := &q.ops[i]; o.done < o.chunks {
			dst = append(dst, now-o.start)
		}
	}
	return dst
}
