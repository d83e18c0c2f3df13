package device

import (
	"fmt"
	"time"

	"falconnic/device/rdma"
)

// RDMASpec tunes a NIC's RDMA function ("rdma" in a NIC's config).
//
//	"rdma": {
//	  "doorbell_polling": "off",   // "off" (default) or "on"
//	  "poll_window_cap": "200us"   // the longest polling window; default 200µs, 2µs..10ms
//	}
//
// With doorbell polling on, the NIC sets an SQ's polling flag while it
// drains it and for an adaptive window after (verbs/poll.go), polling the
// producer index on its port's goroutine, so the guest driver sends no
// DB_SQ frame; the window is switched off while the daemon runs its polls
// late (short of CPU). The counters are verbs.poll_* in the NIC's status.
type RDMASpec struct {
	DoorbellPolling string   `json:"doorbell_polling,omitempty"`
	PollWindowCap   Duration `json:"poll_window_cap,omitzero"`
}

// Bounds of RDMASpec.PollWindowCap.
const (
	minPollWindowCap = rdma.MinPollWindowCap
	maxPollWindowCap = rdma.MaxPollWindowCap
)

func (s *RDMASpec) check() error {
	switch s.DoorbellPolling {
	case "", "off", "on":
	default:
		return fmt.Errorf("rdma: doorbell_polling %q must be \"off\" or \"on\"", s.DoorbellPolling)
	}
	if c := time.Duration(s.PollWindowCap); c != 0 && (c < minPollWindowCap || c > maxPollWindowCap) {
		return fmt.Errorf("rdma: poll_window_cap %v out of range %v..%v", c, minPollWindowCap, maxPollWindowCap)
	}
	return nil
}

// pollConfig is the verbs engine's doorbell-polling configuration of the
// NIC (off without an "rdma" section).
func (n NICSpec) pollConfig() rdma.PollConfig {
	if n.RDMA == nil {
		return rdma.PollConfig{}
	}
	return rdma.PollConfig{On: n.RDMA.DoorbellPolling == "on", WindowCap: time.Duration(n.RDMA.PollWindowCap)}
}
