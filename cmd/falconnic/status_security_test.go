package main

import (
	"bytes"
	"strings"
	"testing"

	"falconnic/device"
)

// TestPrintSecurityShowsRotation: the period, the rotations made, put
// off and failed, and a NIC's pending and failed REKEYs.
func TestPrintSecurityShowsRotation(t *testing.T) {
	var b bytes.Buffer
	printSecurity(&b, &device.SecurityStatus{Mode: "psp", ID: "a", Fingerprint: "f", RotateEvery: "1h0m0s", Rotations: 3,
		RotationsDeferred: 1, NICs: []device.NICSecurity{{Name: "n0", Generation: 4, RekeysFailed: 1}, {Name: "n1", Generation: 4}}})
	out := b.String()
	for _, want := range []string{"key rotation every 1h0m0s: 3 made, 1 put off", "n0 psp generation 4, REKEYs pending 0, failed 1", "n1 psp generation 4:"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}
