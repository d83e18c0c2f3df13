package device

import (
	"runtime"
	"testing"
	"time"

	"falconnic/device/fabric"
	"falconnic/device/storage"
	"falconnic/falcon"
)

// FuzzCMReceiveOverFabric drives the connection manager's receive path
// over a real fabric port [issue 18, fuzzing]: each input becomes a CM
// datagram from a rogue peer of a secure daemon that exports a namespace
// — as it is (byte 0 even), or sealed with the fabric's secret by a
// member (byte 0 odd) so that the CM decoder, the ownership check and the
// agent's set-up logic see the bytes. The daemon must neither panic nor
// stop serving its ports.
func FuzzCMReceiveOverFabric(f *testing.F) {
	la, lb := freeUDPPort(f), freeUDPPort(f)
	store := startDaemon(f, storeConfig(lb, la, storage.NamespaceMemory, ""))
	bad := rogue(f, store)
	member := memberSealer(f, "fuzzer")
	src := [6]byte{0x02, 0, 0, 0, 0, 0x42}
	f.Add(append([]byte{0}, plainCM(cmTypeREQ, protoNVMe, hostMAC, storeMAC, 7, 0)...))
	f.Add(append([]byte{1}, plainCM(cmTypeREQ, protoNVMe, src, storeMAC, 8, 0)...))
	f.Add(append([]byte{1}, plainCM(2, protoNVMe, src, storeMAC, 9, 5)...))
	f.Add(append([]byte{1}, plainCM(4, protoNVMe, src, storeMAC, 9, 5)...))
	f.Add(append([]byte{1}, plainCM(5, protoNVMe, src, storeMAC, 9, 5)...)) // REKEY_ACK
	f.Add(append([]byte{1}, plainCM(cmTypeREQ, 2, storeMAC, storeMAC, 10, 0)...))
	f.Add([]byte{0, 'F', 'N', 'C', 'A', 1})
	to := store.Fabric().LocalAddr()
	port := store.Daemon.nics[0].falcon
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		b := in[1:]
		if in[0]&1 == 1 {
			b = sealCM(t, member, b)
		}
		rx := func() uint64 { return store.Fabric().Counters().Snapshot()["rx_datagrams"] }
		before := rx()
		if err := bad.Send(fabric.KindCM, to, 0, b); err != nil {
			return // too large for a datagram: the fabric refuses to send it
		}
		// Yield rather than sleep while waiting: a sleep shorter than a
		// millisecond lasts about one on Linux, which held the target to
		// ~1,000 executions a second.
		for deadline := time.Now().Add(10 * time.Second); rx() == before; runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatal("the datagram never arrived")
			}
		}
		// The port's queue is FIFO: once this runs, the agent has handled
		// whatever the message became.
		if !port.Call(func(*falcon.Endpoint) {}) {
			t.Fatal("the NIC's port stopped")
		}
	})
}
