// Package tests holds falconnic's end-to-end tests: they build the
// falconnic binary and the guest image, boot QEMU guests under TCG and check
// what guests see (ping, checksummed TCP transfers), over a plain QEMU
// stream link and over falconnic daemons.
//
// They run only when FALCONNIC_E2E is set (scripts/test.sh sets it to "ci"
// or "full"); otherwise they skip. The image cache is FALCONNIC_CACHE or
// ~/.cache/falconnic, shared between runs.
package tests
