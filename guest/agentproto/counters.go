package agentproto

import (
	"errors"

	"falconnic/internal/stats"
)

// Counters counts frames and every rejected frame by cause.
type Counters struct {
	FramesIn    stats.Counter
	FramesOut   stats.Counter
	BadMagic    stats.Counter
	UnknownType stats.Counter
	Reserved    stats.Counter
	TooLong     stats.Counter
	BadPayload  stats.Counter
	WrongSide   stats.Counter
	ResyncBytes stats.Counter
	Busy        stats.Counter
}

// Set lists the counters with their help text.
func (c *Counters) Set() stats.Set {
	return stats.Set{
		{Name: "frames_in", Help: "frames received and accepted", Counter: &c.FramesIn},
		{Name: "frames_out", Help: "frames sent", Counter: &c.FramesOut},
		{Name: "bad_magic", Help: "headers without the FNAG magic", Counter: &c.BadMagic},
		{Name: "unknown_type", Help: "headers with an unknown message type", Counter: &c.UnknownType},
		{Name: "reserved", Help: "headers with reserved bits set", Counter: &c.Reserved},
		{Name: "too_long", Help: "payloads longer than their type allows", Counter: &c.TooLong},
		{Name: "bad_payload", Help: "payloads that do not decode", Counter: &c.BadPayload},
		{Name: "wrong_side", Help: "frames of a type the peer must not send", Counter: &c.WrongSide},
		{Name: "resync_bytes", Help: "bytes skipped to find the next magic", Counter: &c.ResyncBytes},
		{Name: "busy", Help: "Exec refused because a command was running", Counter: &c.Busy},
	}
}

var errCounter = []struct {
	err error
	get func(*Counters) *stats.Counter
}{
	{ErrBadMagic, func(c *Counters) *stats.Counter { return &c.BadMagic }},
	{ErrUnknownType, func(c *Counters) *stats.Counter { return &c.UnknownType }},
	{ErrReserved, func(c *Counters) *stats.Counter { return &c.Reserved }},
	{ErrTooLong, func(c *Counters) *stats.Counter { return &c.TooLong }},
	{ErrBadPayload, func(c *Counters) *stats.Counter { return &c.BadPayload }},
}

func (c *Counters) count(err error) {
	for _, e := range errCounter {
		if errors.Is(err, e.err) {
			e.get(c).Inc()
			return
		}
	}
}
