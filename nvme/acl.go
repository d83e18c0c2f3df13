package nvme

import (
	"errors"

	"falconnic/falcon"
)

// Access control [issue 18, finding 2]: each exported namespace may list
// the initiators allowed to use it; a command from any other path fails
// with Access Denied and touches nothing. A path knows its initiator from
// whoever set it up (the device's connection manager, which has
// authenticated the peer daemon and checked that it speaks for the NIC's
// MAC): AddPathFrom.

// Initiator names the far end of a path.
type Initiator struct {
	// MAC is the initiating NIC's MAC.
	MAC [6]byte
	// NQN is the host NQN the initiator presented ("" if none).
	NQN string
	// Owner names the daemon that speaks for MAC ("" for a NIC of this
	// daemon): a live path of MAC is replaced only by its owner.
	Owner string
}

// ACL lists the initiators allowed to use a namespace: NIC MACs and host
// NQNs. An empty ACL allows no one.
type ACL struct {
	MACs [][6]byte
	NQNs []string
}

// Allows reports whether ini may use the namespace.
func (a *ACL) Allows(ini Initiator) bool {
	for _, m := range a.MACs {
		if m == ini.MAC && m != ([6]byte{}) {
			return true
		}
	}
	if ini.NQN == "" {
		return false
	}
	for _, n := range a.NQNs {
		if n == ini.NQN {
			return true
		}
	}
	return false
}

// ErrPathOwned is returned by AddPathFrom for a second path of an
// initiator MAC whose live path another daemon owns.
var ErrPathOwned = errors.New("nvme: the initiator has a live path owned by another daemon")

// allowed reports whether path p may use ns (p nil: an unidentified path).
func (ns *Namespace) allowed(p *Path) bool {
	if ns.cfg.Allow == nil {
		return true
	}
	if p == nil || !p.identified {
		return false
	}
	return ns.cfg.Allow.Allows(p.ini)
}

// AddPathFrom binds connection c to the initiator ini (see AddPath).
// While a path of the same initiator MAC is live, only its owner (the
// same Owner) may add another — the connection manager then replaces the
// old one (RemovePath); anyone else gets ErrPathOwned and the live path
// keeps serving.
func (e *Engine) AddPathFrom(c *falcon.Conn, ini Initiator) (*Path, error) {
	if old := e.byMAC[ini.MAC]; old != nil && !old.Down() && old.ini.Owner != ini.Owner {
		e.Stats.PathOwned.Inc()
		return nil, ErrPathOwned
	}
	p, err := e.AddPath(c)
	if err != nil {
		return nil, err
	}
	p.ini, p.identified = ini, true
	e.byMAC[ini.MAC] = p
	return p, nil
}

// Initiator returns the path's initiator and whether it was identified
// (AddPathFrom).
func (p *Path) Initiator() (Initiator, bool) { return p.ini, p.identified }
