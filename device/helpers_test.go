package device

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

// waitBound is the generous bound a test waits for something that must
// happen. Tests never sleep; they wait for the event itself.
const waitBound = 10 * time.Second

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// inbox is a frame sink (a test NIC) that hands copies to a channel.
type inbox struct{ ch chan []byte }

func newInbox() *inbox { return &inbox{ch: make(chan []byte, 1024)} }

func (in *inbox) Deliver(frame []byte) { in.ch <- append([]byte(nil), frame...) }

// next returns the next frame, failing the test if none comes within waitBound.
func (in *inbox) next(t *testing.T, what string) []byte {
	t.Helper()
	select {
	case b := <-in.ch:
		return b
	case <-time.After(waitBound):
		t.Fatalf("%s: nothing arrived within %v", what, waitBound)
		return nil
	}
}

// none checks that nothing is queued now.
func (in *inbox) none(t *testing.T, what string) {
	t.Helper()
	select {
	case b := <-in.ch:
		t.Errorf("%s: unexpected % x", what, b)
	default:
	}
}

func testMAC(last byte) [6]byte { return [6]byte{0x52, 0x54, 0, 0, 0, last} }

var bcastMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

const ethHeaderLen = 14

// testFrame builds an Ethernet frame dst ← src of EtherType typ with a
// payload of n bytes.
func testFrame(dst, src [6]byte, typ uint16, n int) []byte {
	f := make([]byte, ethHeaderLen+n)
	copy(f[0:], dst[:])
	copy(f[6:], src[:])
	binary.BigEndian.PutUint16(f[12:], typ)
	for i := range n {
		f[ethHeaderLen+i] = byte(i)
	}
	return f
}
