package main

import (
	"fmt"
	"io"

	"falconnic/device"
)

// printSecurity says how the fabric is secured: a warning first thing
// when it is not.
func printSecurity(w io.Writer, s *device.SecurityStatus) {
	switch {
	case s == nil:
		return
	case s.Mode == "insecure":
		fmt.Fprintf(w, "WARNING: %s\n\n", s.Warning)
		return
	}
	fmt.Fprintf(w, "fabric security: %s, id %s, secret %s; cm auth %s\n", s.Mode, s.ID, s.Fingerprint, nonZero(s.Auth))
	fmt.Fprintf(w, "  key rotation every %s: %d made, %d put off (REKEYs pending), %d failed", s.RotateEvery, s.Rotations, s.RotationsDeferred, s.RotationsFailed)
	if s.LastRotationError != "" {
		fmt.Fprintf(w, " (last: %s)", s.LastRotationError)
	}
	fmt.Fprintln(w)
	for _, n := range s.NICs {
		fmt.Fprintf(w, "  %s psp generation %d", n.Name, n.Generation)
		if n.RekeysPending > 0 || n.RekeysFailed > 0 {
			fmt.Fprintf(w, ", REKEYs pending %d, failed %d (on the previous generation)", n.RekeysPending, n.RekeysFailed)
		}
		fmt.Fprintf(w, ": %s\n", nonZero(n.Counters))
	}
	fmt.Fprintln(w)
}
