package port

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/rue"
	"falconnic/falcon/wire"
	"falconnic/internal/clock"
)

// TestDefaultFirmwareIsSwiftAtDaemonScale: a new port runs Swift with the
// daemon's targets, and the spec it reports carries every default.
func TestDefaultFirmwareIsSwiftAtDaemonScale(t *testing.T) {
	p := New(clock.NewManual(0), nil)
	got := p.Firmware()
	if got.Name != FirmwareSwift || time.Duration(got.BaseTarget) != DaemonBaseTarget ||
		time.Duration(got.FlowScaling) != DaemonFlowScaling || got.MinFcwnd != DaemonMinFcwnd ||
		time.Duration(got.MinRTO) != DaemonMinRTO || got.MaxFcwnd != 256 || got.TargetLevel != 15 {
		t.Fatalf("default firmware %+v", got)
	}
	if p.rue.fw.swift == nil {
		t.Fatal("the default engine is not Swift")
	}
}

// TestFirmwareSpecChecks: unknown names and out-of-range parameters are
// refused with ErrFirmware; zero fields take defaults.
func TestFirmwareSpecChecks(t *testing.T) {
	for _, c := range []struct {
		spec FirmwareSpec
		ok   bool
	}{
		{FirmwareSpec{}, true},
		{FirmwareSpec{Name: FirmwareFixed}, true},
		{FirmwareSpec{Name: FirmwareSwift, BaseTarget: Duration(50 * time.Microsecond), MinFcwnd: 0.01, PLB: true}, true},
		{FirmwareSpec{Name: "cubic"}, false},
		{FirmwareSpec{MaxMDF: 1}, false},
		{FirmwareSpec{Beta: 2}, false},
		{FirmwareSpec{AI: -1}, false},
		{FirmwareSpec{MinFcwnd: 8, MaxFcwnd: 4}, false},
		{FirmwareSpec{MaxFcwnd: 4096}, false},
		{FirmwareSpec{TargetLevel: 32}, false},
		{FirmwareSpec{BaseTarget: Duration(-time.Microsecond)}, false},
		{FirmwareSpec{Name: FirmwareFixed, Fcwnd: 0.5}, false},
		{FirmwareSpec{Name: FirmwareFixed, Fcwnd: 3000}, false},
	} {
		err := c.spec.Check()
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrFirmware) {
			t.Errorf("%+v: %v, want ok %v", c.spec, err, c.ok)
		}
	}
}

// TestFirmwareSpecJSON: the config's spelling round-trips, durations as Go
// duration strings.
func TestFirmwareSpecJSON(t *testing.T) {
	var s FirmwareSpec
	in := `{"name":"swift","base_target":"200us","flow_scaling":"1ms","max_mdf":0.25,"min_fcwnd":0.5,"plb":true}`
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	if time.Duration(s.BaseTarget) != 200*time.Microsecond || time.Duration(s.FlowScaling) != time.Millisecond ||
		s.MaxMDF != 0.25 || s.MinFcwnd != 0.5 || !s.PLB {
		t.Fatalf("decoded %+v", s)
	}
	if err := json.Unmarshal([]byte(`{"base_target":500}`), &s); err == nil {
		t.Error("a duration as a number was accepted")
	}
}

// TestSwiftStartsFromAConnectionsInitialWindow: under Swift a connection
// opened with an InitFcwnd (NVMe's 128) starts there and moves (an ACK
// below the target delay grows it); under the fixed firmware it stays
// there, and a connection without one gets the fixed window.
func TestSwiftStartsFromAConnectionsInitialWindow(t *testing.T) {
	p := New(clock.NewManual(0), nil)
	nv, err := p.Connect(falcon.ConnConfig{SCID: 1, DCID: 2, Protocol: wire.ProtoNVMe, InitFcwnd: 128 * rue.One})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := p.Connect(falcon.ConnConfig{SCID: 3, DCID: 4})
	if err != nil {
		t.Fatal(err)
	}
	// An ACK 20 µs after its data packet, held 5 µs by the receiver.
	ack := func(c *falcon.Conn, w rue.Fixed) rue.Response {
		t.Helper()
		ev := rue.Event{Conn: c.SCID(), Type: rue.EventACK, T1: 1000, T2: 5000, T3: 5038, T4: 1153, NumAcked: 4,
			Fcwnd: w, ConnFcwnd: w, Ncwnd: 64, Now: 1153}
		r, ok := p.rue.Handle(&ev)
		if !ok {
			t.Fatal("no response")
		}
		return r
	}
	if r := ack(nv, 128*rue.One); r.Fcwnd <= 128*rue.One {
		t.Errorf("swift: NVMe window %v after a fast ACK, want above 128", r.Fcwnd)
	}
	if err := p.UseFirmware(FirmwareSpec{Name: FirmwareFixed}); err != nil {
		t.Fatal(err)
	}
	if r := ack(nv, 130*rue.One); r.Fcwnd != 128*rue.One {
		t.Errorf("fixed: NVMe window %v, want its initial 128", r.Fcwnd)
	}
	if r := ack(rd, 7*rue.One); r.Fcwnd != 32*rue.One {
		t.Errorf("fixed: RDMA window %v, want the fixed 32", r.Fcwnd)
	}
}

// TestSwapFirmwareOnARunningPort: a swap through the port's goroutine
// keeps every connection's enforced windows (the next event's response,
// by the new firmware, starts from them); a bad spec leaves the running
// firmware in place; a stopped port refuses.
func TestSwapFirmwareOnARunningPort(t *testing.T) {
	p := New(clock.NewManual(0), nil)
	ctx, cancel := context.WithCancel(context.Background())
	go p.Run(ctx)
	var c *falcon.Conn
	p.Call(func(*falcon.Endpoint) {
		c, _ = p.Connect(falcon.ConnConfig{SCID: 5, DCID: 6, InitFcwnd: 20 * rue.One, InitNcwnd: 40})
	})
	if err := p.SwapFirmware(FirmwareSpec{Name: FirmwareFixed, Fcwnd: 8}); err != nil {
		t.Fatal(err)
	}
	var w rue.Fixed
	var n uint32
	var name string
	p.Call(func(*falcon.Endpoint) { w, n, name = c.Fcwnd(), c.Ncwnd(), p.Firmware().Name })
	if name != FirmwareFixed || w != 20*rue.One || n != 40 {
		t.Fatalf("after the swap: firmware %s, fcwnd %v ncwnd %d, want fixed with 20 and 40 untouched", name, w, n)
	}
	if err := p.SwapFirmware(FirmwareSpec{Name: "cubic"}); !errors.Is(err, ErrFirmware) {
		t.Fatalf("swap to cubic: %v", err)
	}
	p.Call(func(*falcon.Endpoint) { name = p.Firmware().Name })
	if name != FirmwareFixed {
		t.Fatalf("a refused swap changed the firmware to %s", name)
	}
	cancel()
	<-p.Stopped()
	if err := p.SwapFirmware(FirmwareSpec{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("swap on a stopped port: %v", err)
	}
}

// TestFirmwareStatusListsTheBusiestConnections: at most top connections,
// those with the most packets in flight first, then by CID; the total
// counts them all; each flow has its label, window and Swift's target.
func TestFirmwareStatusListsTheBusiestConnections(t *testing.T) {
	p := New(clock.NewManual(0), nil)
	for i := uint32(1); i <= 20; i++ {
		if _, err := p.Connect(falcon.ConnConfig{SCID: i, DCID: 100 + i, Flows: 2}); err != nil {
			t.Fatal(err)
		}
	}
	busy := p.ep.Conn(17)
	for range 3 {
		if _, err := busy.Push(0, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	st := p.FirmwareStatus(4)
	if st.ConnsTotal != 20 || len(st.Conns) != 4 {
		t.Fatalf("%d of %d connections listed, want 4 of 20", len(st.Conns), st.ConnsTotal)
	}
	if got := [4]uint32{st.Conns[0].SCID, st.Conns[1].SCID, st.Conns[2].SCID, st.Conns[3].SCID}; got != [4]uint32{17, 1, 2, 3} {
		t.Errorf("listed %v, want 17 (busy) then 1, 2, 3", got)
	}
	c := st.Conns[0]
	if c.InFlight != 3 || c.Protocol != "rdma" || len(c.Flows) != 2 || c.Flows[1].Label != 1 || c.Flows[0].Target <= 0 {
		t.Errorf("busy connection %+v", c)
	}
	if st.Firmware.Name != FirmwareSwift || st.Counters["events"] != 0 {
		t.Errorf("firmware %+v counters %v", st.Firmware, st.Counters)
	}
	if all := p.FirmwareStatus(0); len(all.Conns) != DefaultStatusConns {
		t.Errorf("default top: %d connections", len(all.Conns))
	}
}
