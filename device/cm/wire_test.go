package cm

import (
	"context"
	"net/netip"
	"testing"

	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// FuzzCMMessage: every message that decodes encodes back to itself, and a
// NIC's agent takes any message without panicking.
func FuzzCMMessage(f *testing.F) {
	f.Add((&cmMsg{typ: cmREQ, srcCID: 1, reqPSN: 5}).append(nil))
	f.Add((&cmMsg{typ: cmREP, srcCID: 2, dstCID: 1}).append(nil))
	f.Add((&cmMsg{typ: cmREJ, dstCID: 1}).append(nil))
	f.Add((&cmMsg{typ: cmREQ, proto: 3, srcCID: 7, rsn: 9}).append(nil))
	f.Add((&cmMsg{typ: cmREKEY, srcCID: 2, dstCID: 1, reqPSN: 3}).append(nil))
	f.Add((&cmMsg{typ: cmREKEYACK, srcCID: 1, dstCID: 2, reqPSN: 0x80000002, dataPSN: 3}).append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeCM(b)
		if err != nil {
			return
		}
		again, err := decodeCM(m.append(nil))
		if err != nil || again != m {
			t.Fatalf("round trip: %v %+v %+v", err, m, again)
		}
		mgr := New(nil)
		p := port.New(clock.NewManual(0), nil)
		mgr.Attach([6]byte{0x52, 0x54, 0, 0, 0, 1}, p).Register(wire.ProtoRDMA, Proto{
			Config: func(*falcon.ConnConfig) {},
			Up:     func([6]byte, *falcon.Conn) error { return nil },
			Down:   func([6]byte, *falcon.Conn) {},
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go p.Run(ctx)
		mgr.ReceiveCM(netip.MustParseAddrPort("192.0.2.1:7"), 0, b)
		p.Call(func(*falcon.Endpoint) {}) // what reached the NIC's agent is handled
	})
}
