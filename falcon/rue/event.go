package rue

import (
	"strconv"
	"time"
)

// Fixed is a window in fixed point with FracBits fractional bits, the
// fcwnd format of the RUE records (11-bit integer + 10-bit fraction in Gen1,
// [S §10.6]).
type Fixed uint32

// FracBits is the number of fractional bits of Fixed.
const FracBits = 10

// One is 1.0 in Fixed.
const One Fixed = 1 << FracBits

// FixedFrom converts a float window to Fixed, saturating at 0.
func FixedFrom(f float64) Fixed {
	if f <= 0 {
		return 0
	}
	return Fixed(f*float64(One) + 0.5)
}

// Float returns f as a float64.
func (f Fixed) Float() float64 { return float64(f) / float64(One) }

// Int returns the integer part of f.
func (f Fixed) Int() uint32 { return uint32(f >> FracBits) }

// String formats f with three decimals.
func (f Fixed) String() string { return strconv.FormatFloat(f.Float(), 'f', 3, 64) }

// EventType says what triggered an event [S §10.6: event_type].
type EventType uint8

// Event types.
const (
	EventACK  EventType = 0
	EventNACK EventType = 1
	EventRetx EventType = 2
	// EventUndo is not in Rev 0.9: the datapath found that the RTO
	// retransmissions which began at the flow's last timeout were
	// spurious (the peer had the packets: Eifel detection, RFC 3522), and
	// UndoFcwnd carries the flow's window from before them, for the RUE to
	// restore if it cut for them (the Eifel response, RFC 4015).
	EventUndo EventType = 3
)

var eventTypeNames = [...]string{"ACK", "NACK", "RETX", "UNDO"}

// String returns "ACK", "NACK", "RETX" or "UNDO".
func (t EventType) String() string {
	if int(t) < len(eventTypeNames) {
		return eventTypeNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// RetxReason is the cause of a retransmission event (Gen3's 2-bit reason).
type RetxReason uint8

// Retransmission reasons.
const (
	RetxRTO   RetxReason = 0
	RetxEarly RetxReason = 1
	RetxRACK  RetxReason = 2
	RetxTLP   RetxReason = 3
)

// Event is one RUE event record. Times t1..t4 are in Falcon units
// (131.072 ns) like the wire; durations the datapath enforces are carried as
// time.Duration for clarity.
type Event struct {
	Conn       uint32 // connection (local source CID)
	Flow       uint8  // flow id, 0..3
	Type       EventType
	T1, T2     uint32 // data packet IV timestamp / its receive time (from the ACK/NACK)
	T3, T4     uint32 // ACK/NACK IV timestamp / its local receive time
	RetxCount  uint8
	RetxReason RetxReason
	NackCode   uint8
	ForwardHop uint8
	RxBufLevel uint8  // 0..31
	CCMetadata uint32 // 24-bit value reflected by the receiver
	NumAcked   uint32 // packets acked since the last event (saturating)
	EACK       bool
	EACKDrop   bool // the EACK shows a hole (presumed drop)
	ECN        uint32
	UndoFcwnd  Fixed // EventUndo: the flow's fcwnd before the spurious timeouts

	// ConnFcwnd is the connection's fabric window, the sum over its flows
	// (what the transmit gate enforces; pacing applies below one).
	ConnFcwnd Fixed

	// State that round-trips: the current enforced values and the RUE's own.
	Fcwnd        Fixed
	Ncwnd        uint32
	IPG          time.Duration
	RTO          time.Duration
	FabricMarker uint32 // 24-bit time markers [S §10.3.6]
	NICMarker    uint32
	NcwndUp      bool
	DelayState   uint32
	RTTState     uint32 // smoothed RTT in Falcon units
	BaseDelay    uint32
	CCOpaque     uint32
	PLBState     uint32 // protective load balancing's counters [S §10.4]
	Now          uint32 // event time in Falcon units (24-bit arithmetic in the RUE)
}

// Response is one RUE result record: the new values for one connection flow.
type Response struct {
	Conn          uint32
	Flow          uint8
	RandomizePath bool
	CCMetadata    uint32
	Fcwnd         Fixed
	Ncwnd         uint32
	IPG           time.Duration
	RTO           time.Duration
	FabricMarker  uint32
	NICMarker     uint32
	NcwndUp       bool
	DelayState    uint32
	RTTState      uint32
	BaseDelay     uint32
	CCOpaque      uint32
	PLBState      uint32
	// AlphaRequest, when non-zero, is the connection's dynamic-threshold
	// alpha for new requests [RM-8]: it may hold at most AlphaRequest ×
	// the NIC's free Tx request packets.
	AlphaRequest Fixed
}

// Engine computes congestion-control responses.
type Engine interface {
	// Handle processes ev. A synchronous engine returns its response and
	// true; an asynchronous one copies ev, returns false and hands the
	// response to the datapath later. Handle must not retain ev.
	Handle(ev *Event) (Response, bool)
}
