package device

import (
	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/internal/clock"
)

// FalconPort is a NIC's Falcon port (package port), which every Falcon
// function of the NIC attaches to. The name stays in this package for the
// block function's files (blk*.go), which use it.
type FalconPort = port.Port

// NewFalconPort returns a Falcon port on clk (nil: the real clock) whose
// endpoint sends to link (nil: every connection names its own).
func NewFalconPort(clk clock.Clock, link falcon.Link) *FalconPort { return port.New(clk, link) }

// ErrPortStopped is returned by work that needed a stopped Falcon port.
var ErrPortStopped = port.ErrStopped
