package device

import (
	"context"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
	"falconnic/firmware"
	"falconnic/internal/clock"
)

// TestPortEndpointReadsTheClockOncePerWorkItem: while the port handles a
// work item the endpoint sees one time however the clock moves; between
// items it sees the clock.
func TestPortEndpointReadsTheClockOncePerWorkItem(t *testing.T) {
	clk := clock.NewManual(time.Second)
	p := NewFalconPort(clk, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	var first, second time.Duration
	p.Call(func(ep *falcon.Endpoint) {
		first = ep.Now()
		clk.Advance(time.Millisecond)
		second = ep.Now()
	})
	if first != time.Second || second != first {
		t.Fatalf("inside one work item the endpoint saw %v then %v, want %v twice", first, second, time.Second)
	}
	var next time.Duration
	p.Call(func(ep *falcon.Endpoint) { next = ep.Now() })
	if next != time.Second+time.Millisecond {
		t.Fatalf("the next work item saw %v, want %v", next, time.Second+time.Millisecond)
	}
}

// TestPortRUEWidensOnlyNVMeWindows: the port's RUE answers an NVMe
// connection's events with NVMeFcwnd and an RDMA connection's with the
// fixed RUE's default.
func TestPortRUEWidensOnlyNVMeWindows(t *testing.T) {
	p := NewFalconPort(clock.NewManual(0), nil)
	nv, err := p.ep.Connect(falcon.ConnConfig{SCID: 1, DCID: 2, Protocol: wire.ProtoNVMe})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := p.ep.Connect(falcon.ConnConfig{SCID: 3, DCID: 4, Protocol: wire.ProtoRDMA, Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	r := portRUE{p: p, base: firmware.NewFixed(firmware.FixedConfig{})}
	for _, c := range []struct {
		conn *falcon.Conn
		want rue.Fixed
	}{{nv, NVMeFcwnd * rue.One}, {rd, 32 * rue.One}} {
		resp, ok := r.Handle(&rue.Event{Conn: c.conn.SCID(), Type: rue.EventACK})
		if !ok || resp.Fcwnd != c.want {
			t.Errorf("conn %d: fcwnd %v (ok %v), want %v", c.conn.SCID(), resp.Fcwnd, ok, c.want)
		}
	}
}
