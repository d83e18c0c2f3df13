package verbs

import (
	"testing"

	"falconnic/falcon"
	"falconnic/falcon/sim"
	"falconnic/falcon/wire"
)

// TestConnStateRemovedWithConnection: a connection's entry goes with
// ConnDown, and entries of connections closed behind the engine's back
// are swept, so replaced connections do not accumulate [issue 18, finding 5].
func TestAdversarialReplacedConnectionsDoNotLeak(t *testing.T) {
	p, err := sim.NewPair(sim.PairConfig{Conn: falcon.ConnConfig{SCID: 1, DCID: 2, Protocol: wire.ProtoRDMA}})
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{})
	e.connOf(p.CA)
	e.ConnDown(p.CA)
	if e.ConnStates() != 0 {
		t.Fatalf("after ConnDown: %d entries", e.ConnStates())
	}
	for i := range uint32(1000) {
		a, _, err := p.Connect(falcon.ConnConfig{SCID: 10 + i, DCID: 5000 + i, Protocol: wire.ProtoRDMA})
		if err != nil {
			t.Fatal(err)
		}
		e.connOf(a)
		if err := p.A.Close(a.SCID()); err != nil { // replaced: closed without telling the engine
			t.Fatal(err)
		}
	}
	if n := e.ConnStates(); n > 2*minConnSweep {
		t.Fatalf("1000 replaced connections left %d entries", n)
	}
}
