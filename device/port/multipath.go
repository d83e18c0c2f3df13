package port

import (
	"fmt"

	"falconnic/falcon"
)

// Multipath is a NIC's paths per connection [digest §7]: each connection
// it opens sends over Flows flows, flow i with a flow label whose low two
// bits are i (the UDP fabric sends label l from source port l mod paths,
// so flows take different paths through an ECMP network), new packets
// spread by Policy, and a flow whose packet times out moves to a new label
// (protective reroute) unless Reroute is false.
type Multipath struct {
	Flows   int    `json:"flows,omitempty"`   // 1..4; default 1
	Policy  string `json:"policy,omitempty"`  // round-robin, weighted or max-open (default)
	Reroute *bool  `json:"reroute,omitempty"` // default true
}

// conn returns the connection settings m stands for.
func (m Multipath) conn() (falcon.ConnConfig, error) {
	var c falcon.ConnConfig
	c.Flows = m.Flows
	if c.Flows == 0 {
		c.Flows = 1
	}
	if c.Flows < 1 || c.Flows > 4 {
		return c, fmt.Errorf("multipath: flows %d out of range 1..4", m.Flows)
	}
	c.PathPolicy = falcon.PathMaxOpen
	if m.Policy != "" {
		p, ok := falcon.ParsePathPolicy(m.Policy)
		if !ok {
			return c, fmt.Errorf("multipath: policy %q (want round-robin, weighted or max-open)", m.Policy)
		}
		c.PathPolicy = p
	}
	c.ProtectiveReroute = m.Reroute == nil || *m.Reroute
	return c, nil
}

// Check reports whether m is valid.
func (m Multipath) Check() error {
	_, err := m.conn()
	return err
}

// UseMultipath has the connections the port opens from now on take m's
// flows, policy and reroute, unless their own config names flows (before
// Run, or on the port's goroutine).
func (p *Port) UseMultipath(m Multipath) error {
	c, err := m.conn()
	if err != nil {
		return err
	}
	p.paths = c
	return nil
}

// applyPaths fills a connection config that names no flows from the
// port's multipath settings.
func (p *Port) applyPaths(cfg *falcon.ConnConfig) {
	if cfg.Flows != 0 || p.paths.Flows <= 1 {
		return
	}
	cfg.Flows, cfg.PathPolicy, cfg.ProtectiveReroute = p.paths.Flows, p.paths.PathPolicy, p.paths.ProtectiveReroute
}
