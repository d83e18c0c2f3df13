package sim

import (
	"testing"
	"time"

	"falconnic/falcon/fabric"
	"falconnic/falcon/rue"
	"falconnic/firmware"
)

// Protective reroute on a blackholed path: a one-flow connection whose
// label hashes onto a spine whose uplink then blackholes stalls for good
// without reroute; with it, the flow's timeout moves it to a new label
// and the writes resume.
func TestProtectiveRerouteLeavesBlackhole(t *testing.T) {
	for _, reroute := range []bool{false, true} {
		c := Common{Seed: 3, Reroute: reroute}
		s := New(Config{Fabric: DefaultFabric(2, 1, 4, 3), Conn: c.Conn(), Seed: 3})
		qp, err := s.Connect(0, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		var rec Recorder
		qp.Closed(Write, 64<<10, 1, -1, 0, &rec)
		s.Run(s.Now() + time.Millisecond)
		sp := s.Fabric.SpineOf(0, 1, qp.Conn.Config().FlowLabels[0])
		s.Fabric.Fail(s.Now(), 0, sp, fabric.Blackhole)
		s.Run(s.Now() + 100*time.Microsecond)
		before := rec.Ops
		s.Run(s.Now() + 10*time.Millisecond)
		moved := qp.Conn.Stats.Reroute.Load()
		switch {
		case !reroute && (rec.Ops > before+1 || moved != 0):
			t.Errorf("without reroute: %d ops after the failure, %d reroutes; want a stall", rec.Ops-before, moved)
		case reroute && (rec.Ops < before+50 || moved == 0):
			t.Errorf("with reroute: %d ops in 10 ms after the failure, %d reroutes", rec.Ops-before, moved)
		case reroute && s.Fabric.SpineOf(0, 1, qp.Conn.Flows()[0].Label) == sp:
			t.Errorf("the flow still hashes onto the failed spine %d", sp)
		}
	}
}

// PLB moves a flow off a path congested by other traffic (background load
// on its spine uplink keeps its delay above target) and leaves a flow on a
// healthy path where it is.
func TestPLBLeavesCongestedPath(t *testing.T) {
	for _, congested := range []bool{false, true} {
		c := Common{Seed: 5, InitFcwnd: 4 * rue.One}
		eng := firmware.NewSwift(firmware.SwiftConfig{PLB: true})
		s := New(Config{Fabric: DefaultFabric(2, 1, 2, 5), Conn: c.Conn(), Seed: 5,
			RUE: func(int) rue.Engine { return eng }})
		qp, err := s.Connect(0, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		qp.Closed(Write, 64<<10, 1, -1, 0, nil)
		sp := s.Fabric.SpineOf(0, 1, qp.Conn.Config().FlowLabels[0])
		if congested {
			up, _ := s.Fabric.SpineLinks(0, sp)
			s.Fabric.AddBackground(fabric.Background{Link: up, Load: 0.98, Size: 4096, Start: s.Now(), Stop: s.Now() + 5*time.Millisecond})
		}
		s.Run(s.Now() + 5*time.Millisecond)
		moved := qp.Conn.Stats.Repath.Load()
		now := s.Fabric.SpineOf(0, 1, qp.Conn.Flows()[0].Label)
		if congested && (moved == 0 || now == sp) {
			t.Errorf("congested path: %d repaths, flow on spine %d (was %d); %+v", moved, now, sp, eng.Stats)
		}
		if !congested && moved != 0 {
			t.Errorf("healthy path: %d repaths; %+v", moved, eng.Stats)
		}
	}
}
