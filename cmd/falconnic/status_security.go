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
	for _, n := range s.NICs {
		fmt.Fprintf(w, "  %s psp generation %d: %s\n", n.Name, n.Generation, nonZero(n.Counters))
	}
	fmt.Fprintln(w)
}
