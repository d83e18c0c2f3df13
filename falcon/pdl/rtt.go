package pdl

import "time"

// RTT is the datapath's round-trip estimator, used for recency checks,
// RACK's reorder window and TLP's probe timeout. (The RUE keeps its own
// smoothed delay for congestion control.) Smoothing follows Isekai's
// convention new = α·old + (1−α)·sample with α = 3/4 (digest §6.2).
type RTT struct {
	Smoothed time.Duration
	Min      time.Duration
	valid    bool
}

// Sample folds one measurement in.
func (r *RTT) Sample(d time.Duration) {
	if d <= 0 {
		return
	}
	if !r.valid {
		r.Smoothed, r.Min, r.valid = d, d, true
		return
	}
	r.Smoothed = (3*r.Smoothed + d) / 4
	if d < r.Min {
		r.Min = d
	}
}

// Valid reports whether any sample arrived.
func (r *RTT) Valid() bool { return r.valid }

// Or returns the smoothed RTT, or def before the first sample.
func (r *RTT) Or(def time.Duration) time.Duration {
	if r.valid {
		return r.Smoothed
	}
	return def
}
