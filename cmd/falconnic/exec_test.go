package main

import (
	"errors"
	"testing"
	"time"
)

// TestExecLimit: a deadline derived from what runs — fio's run and ramp
// time plus the margin when fio is time based, the default otherwise.
func TestExecLimit(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want time.Duration
	}{
		{[]string{"fio", "--runtime=8", "--time_based", "--ramp_time=1"}, 9*time.Second + execMargin},
		{[]string{"fio", "--runtime=2m", "--time_based"}, 2*time.Minute + execMargin},
		{[]string{"fio", "--runtime=500ms", "--time_based"}, 500*time.Millisecond + execMargin},
		{[]string{"fio", "--runtime=8"}, defaultExecLimit}, // size-bound: runtime is only a cap
		{[]string{"fio", "--runtime=1h"}, time.Hour + execMargin},
		{[]string{"fio", "--runtime=x", "--time_based"}, defaultExecLimit},
		{[]string{"sleep", "10"}, defaultExecLimit},
		{nil, defaultExecLimit},
	} {
		if got := execLimit(c.argv); got != c.want {
			t.Errorf("execLimit(%q) = %v, want %v", c.argv, got, c.want)
		}
	}
}

// TestCheckGuestClock fails a time-based fio run that the host saw end
// sooner than the guest's clock says it ran, and passes everything else.
func TestCheckGuestClock(t *testing.T) {
	timed := []string{"fio", "--runtime=10", "--time_based", "--ramp_time=1"}
	for _, c := range []struct {
		argv []string
		wall time.Duration
		fast bool
	}{
		{timed, 11500 * time.Millisecond, false},
		{timed, 10 * time.Second, false}, // within the 10 % slack
		{timed, 9800 * time.Millisecond, true},
		{timed, 5800 * time.Millisecond, true},                // the 1.9× guest seen once
		{timed, time.Minute, false},                           // a slow exec, or a slow guest clock: not told apart
		{[]string{"fio", "--runtime=10"}, time.Second, false}, // size-bound: may end early
		{[]string{"sleep", "10"}, time.Second, false},
		{nil, 0, false},
	} {
		err := checkGuestClock(c.argv, c.wall)
		if fast := errors.Is(err, errGuestClock); fast != c.fast {
			t.Errorf("checkGuestClock(%q, %v) = %v, want fast %v", c.argv, c.wall, err, c.fast)
		}
	}
}

// TestFioVerifyFailed tells a verify failure (EILSEQ, fio's messages)
// from another error.
func TestFioVerifyFailed(t *testing.T) {
	for _, c := range []struct {
		out  string
		want bool
	}{
		{`{"jobs":[{"error":84,"job options":{"verify":"crc32c"}}]}`, true},
		{"verify: bad magic header 0, wanted acca\n{\"jobs\":[{\"error\":0}]}", true},
		{`{"jobs":[{"error":5,"job options":{"verify":"crc32c"}}]}`, false},
		{"fio: io_u error on file /dev/vda: Input/output error", false},
	} {
		if got := fioVerifyFailed(c.out); got != c.want {
			t.Errorf("fioVerifyFailed(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}
