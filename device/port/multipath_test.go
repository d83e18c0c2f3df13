package port

import (
	"testing"

	"falconnic/falcon"
	"falconnic/internal/clock"
)

// TestMultipathAppliesToConnectionsThatNameNoFlows: the port's flows,
// policy and reroute go to connections whose config names no flows; one
// that names its own keeps them; bad settings are refused.
func TestMultipathAppliesToConnectionsThatNameNoFlows(t *testing.T) {
	p := New(clock.NewManual(0), nil)
	off := false
	if err := p.UseMultipath(Multipath{Flows: 3, Policy: "round-robin", Reroute: &off}); err != nil {
		t.Fatal(err)
	}
	c, err := p.Connect(falcon.ConnConfig{SCID: 1, DCID: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Config(); got.Flows != 3 || got.PathPolicy != falcon.PathRoundRobin || got.ProtectiveReroute {
		t.Errorf("flows %d policy %v reroute %v, want 3 round-robin false", got.Flows, got.PathPolicy, got.ProtectiveReroute)
	}
	own, err := p.Connect(falcon.ConnConfig{SCID: 3, DCID: 4, Flows: 1})
	if err != nil {
		t.Fatal(err)
	}
	if own.Config().Flows != 1 {
		t.Errorf("a connection naming 1 flow got %d", own.Config().Flows)
	}
	if err := p.UseMultipath(Multipath{Flows: 4}); err != nil {
		t.Fatal(err)
	}
	d, _ := p.Connect(falcon.ConnConfig{SCID: 5, DCID: 6})
	if got := d.Config(); got.Flows != 4 || got.PathPolicy != falcon.PathMaxOpen || !got.ProtectiveReroute {
		t.Errorf("defaults: flows %d policy %v reroute %v, want 4 max-open true", got.Flows, got.PathPolicy, got.ProtectiveReroute)
	}
	for _, bad := range []Multipath{{Flows: 5}, {Flows: -1}, {Flows: 2, Policy: "random"}} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
