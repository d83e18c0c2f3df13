package cmauth

import (
	"errors"
	"sync"
)

// Owners binds each daemon of the fabric to the NIC MACs it may speak
// for [issue 18, findings 1 and 2]: a CM message's source MAC must be
// bound to the daemon that sealed it. This daemon's own NICs are bound to
// itself, so a message from the fabric naming one of them as its source
// is refused. MACs are bound statically (Bind: from config) or, with
// Learn, to the first authenticated daemon that speaks for them (trust on
// first use); a binding holds until Forget. Learning is bounded per
// daemon (MaxPerPeer), so one peer cannot fill the table.
type Owners struct {
	mu      sync.Mutex
	self    ID
	learn   bool
	max     int
	byMAC   map[[6]byte]ID
	perPeer map[ID]int
	stats   *Counters
}

// OwnersConfig configures Owners.
type OwnersConfig struct {
	Local      [][6]byte // this daemon's NICs
	Learn      bool      // bind an unbound MAC to the first daemon speaking for it
	MaxPerPeer int       // MACs one peer may hold (default 4096)
	Counters   *Counters // nil: the table's own
}

// Ownership errors.
var (
	ErrOwnMAC      = errors.New("cmauth: source MAC is a NIC of this daemon")
	ErrNotOwner    = errors.New("cmauth: source MAC belongs to another daemon")
	ErrUnknownMAC  = errors.New("cmauth: source MAC is bound to no daemon")
	ErrTooManyMACs = errors.New("cmauth: the daemon speaks for its limit of MACs")
)

// NewOwners returns the ownership table of daemon self.
func NewOwners(self ID, cfg OwnersConfig) *Owners {
	if cfg.MaxPerPeer <= 0 {
		cfg.MaxPerPeer = 4096
	}
	if cfg.Counters == nil {
		cfg.Counters = &Counters{}
	}
	o := &Owners{self: self, learn: cfg.Learn, max: cfg.MaxPerPeer, byMAC: map[[6]byte]ID{}, perPeer: map[ID]int{}, stats: cfg.Counters}
	for _, m := range cfg.Local {
		o.byMAC[m] = self
	}
	return o
}

// AddLocal binds a NIC of this daemon to it.
func (o *Owners) AddLocal(mac [6]byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev, ok := o.byMAC[mac]; ok && prev != o.self {
		o.perPeer[prev]--
	}
	o.byMAC[mac] = o.self
}

// Bind binds mac to daemon peer (configuration), replacing any learnt
// binding; a MAC of this daemon cannot be bound to another.
func (o *Owners) Bind(peer ID, mac [6]byte) error {
	if !peer.valid() {
		return ErrID
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, ok := o.byMAC[mac]
	switch {
	case ok && prev == o.self:
		return ErrOwnMAC
	case ok && prev == peer:
		return nil
	case ok:
		o.perPeer[prev]--
	}
	o.byMAC[mac] = peer
	o.perPeer[peer]++
	return nil
}

// Authorize reports whether daemon peer (an opened message's From) may
// speak for source MAC src, learning the binding if allowed.
func (o *Owners) Authorize(peer ID, src [6]byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner, ok := o.byMAC[src]
	switch {
	case ok && owner == o.self:
		o.stats.OwnMAC.Inc()
		return ErrOwnMAC
	case ok && owner == peer:
		return nil
	case ok:
		o.stats.NotOwner.Inc()
		return ErrNotOwner
	case !o.learn:
		o.stats.NotOwner.Inc()
		return ErrUnknownMAC
	case o.perPeer[peer] >= o.max:
		o.stats.TooManyMACs.Inc()
		return ErrTooManyMACs
	}
	o.byMAC[src] = peer
	o.perPeer[peer]++
	o.stats.Learnt.Inc()
	return nil
}

// Owner returns the daemon mac is bound to.
func (o *Owners) Owner(mac [6]byte) (ID, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	id, ok := o.byMAC[mac]
	return id, ok
}

// Forget drops every binding of daemon peer (it left the fabric).
func (o *Owners) Forget(peer ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for m, id := range o.byMAC {
		if id == peer {
			delete(o.byMAC, m)
		}
	}
	delete(o.perPeer, peer)
}
