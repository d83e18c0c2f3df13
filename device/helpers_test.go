package device

import (
	"testing"

	"falconnic/device/vsock"
)

// Helpers of the block function's QEMU test (blk_qemu_test.go), which
// boots its guest with the vsock device for the guest agent: they lived
// with the vsock device's tests before it became package device/vsock.

// NewVsock and VsockConfig name the vsock device as that test does.
var NewVsock = vsock.New

type VsockConfig = vsock.Config

// vsMust fails the test on err.
func vsMust(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// vsNonZero returns m's non-zero entries.
func vsNonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
