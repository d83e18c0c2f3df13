package cmauth

import (
	"crypto/cipher"
	"encoding/binary"
	"strconv"
	"sync"
	"time"

	"falconnic/internal/stats"
	"falconnic/psp"
)

// Freshness and replay [issue 18, finding 1]: a message is accepted only
// if its sender's time lies within Window of the receiver's clock (the
// daemons' wall clocks must agree to within Window/2: NTP) and its nonce
// was not seen in that time. Each sender daemon has its own replay
// cache of at most CacheSize nonces; when it is full the oldest is
// evicted and nothing from that sender as old as it is accepted any more
// (its floor), so a flood cannot push a captured message out of the cache
// and replay it: it can only make the receiver refuse that sender's old
// messages, which the CM retries anyway. Caches are per sender so that
// one daemon's traffic (or clock) never raises another's floor; at most
// MaxSenders daemons are tracked.
const (
	// DefaultWindow is the default freshness window.
	DefaultWindow = 30 * time.Second
	// DefaultCacheSize is the default replay-cache capacity per sender.
	DefaultCacheSize = 4096
	// DefaultMaxSenders is the default number of sender daemons tracked.
	DefaultMaxSenders = 1024
)

// Drop is why Open refused a message; each has its counter.
type Drop uint8

// Drop causes, in the order Open checks them. Freshness and the cache
// are checked only after the tag verifies, so a forged message changes
// nothing.
const (
	dropNone Drop = iota
	DropShort
	DropMagic
	DropVersion
	DropReserved
	DropID
	DropAuth
	DropStale
	DropFuture
	DropFloor
	DropReplay
	DropSA
	DropSenders
	numDrops
)

var drops = [numDrops]struct{ name, help string }{
	dropNone:     {"cm_auth_opened", "CM messages authenticated and accepted"},
	DropShort:    {"cm_auth_short", "CM messages refused: shorter than an envelope"},
	DropMagic:    {"cm_auth_bad_magic", "CM messages refused: not an authenticated envelope (a plaintext CM message, or noise)"},
	DropVersion:  {"cm_auth_bad_version", "CM messages refused: unsupported envelope version"},
	DropReserved: {"cm_auth_reserved", "CM messages refused: reserved bytes not zero"},
	DropID:       {"cm_auth_bad_id", "CM messages refused: sender ID empty, too long, or the receiver's own"},
	DropAuth:     {"cm_auth_failed", "CM messages refused: tag did not verify (wrong fabric secret, or forged or corrupted)"},
	DropStale:    {"cm_auth_stale", "CM messages refused: authentic but older than the freshness window (a replay, or clocks apart)"},
	DropFuture:   {"cm_auth_future", "CM messages refused: authentic but dated beyond the freshness window"},
	DropFloor:    {"cm_auth_below_floor", "CM messages refused: authentic but no newer than a nonce the full replay cache evicted"},
	DropReplay:   {"cm_auth_replay", "CM messages refused: authentic but their nonce was already accepted"},
	DropSA:       {"cm_auth_bad_sa", "CM messages refused: authentic but the SA offer is malformed"},
	DropSenders:  {"cm_auth_too_many_senders", "CM messages refused: authentic but from a new daemon while MaxSenders are tracked"},
}

// String names the cause (its counter's name).
func (d Drop) String() string {
	if d < numDrops {
		return drops[d].name
	}
	return "drop(" + strconv.Itoa(int(d)) + ")"
}

// Error makes a Drop usable as an error.
func (d Drop) Error() string { return "cmauth: " + d.String() }

// Counters count opened and refused messages by cause, and ownership
// refusals (Owners).
type Counters struct {
	Rx                                    [numDrops]stats.Counter
	OwnMAC, NotOwner, TooManyMACs, Learnt stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	var s stats.Set
	for d := range numDrops {
		s = append(s, stats.Desc{Name: drops[d].name, Help: drops[d].help, Counter: &c.Rx[d]})
	}
	return append(s,
		stats.Desc{Name: "cm_auth_own_mac", Help: "CM messages refused: their source MAC is a NIC of this daemon", Counter: &c.OwnMAC},
		stats.Desc{Name: "cm_auth_not_owner", Help: "CM messages refused: their source MAC belongs to another daemon", Counter: &c.NotOwner},
		stats.Desc{Name: "cm_auth_too_many_macs", Help: "CM messages refused: the sender already speaks for its limit of MACs", Counter: &c.TooManyMACs},
		stats.Desc{Name: "cm_auth_learnt", Help: "MACs bound to the first daemon that spoke for them", Counter: &c.Learnt},
	)
}

// OpenerConfig configures an Opener.
type OpenerConfig struct {
	Window     time.Duration // freshness window (DefaultWindow)
	CacheSize  int           // replay-cache capacity per sender (DefaultCacheSize)
	MaxSenders int           // sender daemons tracked (DefaultMaxSenders)
	Counters   *Counters     // nil: the opener's own
}

// Opener opens the CM messages this daemon receives. Safe for concurrent
// use (a mutex: CM messages are rare).
type Opener struct {
	aead   cipher.AEAD
	self   ID
	window int64
	Stats  *Counters

	mu         sync.Mutex
	senders    map[ID]*senderCache
	cacheSize  int
	maxSenders int
	nonce      [nonceLen]byte
}

// senderCache is one sender daemon's replay cache.
type senderCache struct {
	seen  map[[nonceLen]byte]int64 // nonce → sender time
	ring  []cacheEntry             // insertion order, for eviction
	head  int
	floor int64 // nothing at or before this time is accepted
}

type cacheEntry struct {
	nonce [nonceLen]byte
	at    int64
}

// NewOpener returns the opener of daemon self in the fabric of s.
func NewOpener(s *Secret, self ID, cfg OpenerConfig) (*Opener, error) {
	if !self.valid() {
		return nil, ErrID
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.MaxSenders <= 0 {
		cfg.MaxSenders = DefaultMaxSenders
	}
	if cfg.Counters == nil {
		cfg.Counters = &Counters{}
	}
	return &Opener{aead: newGCM(s), self: self, window: int64(cfg.Window), Stats: cfg.Counters,
		senders: map[ID]*senderCache{}, cacheSize: cfg.CacheSize, maxSenders: cfg.MaxSenders}, nil
}

// Open authenticates and decrypts message b (in place: b is spoiled)
// received at now (Unix ns). It checks the header, then the tag, then
// freshness and the replay cache; only an accepted message enters the
// cache. The returned Msg's Body is a subslice of b.
func (o *Opener) Open(b []byte, now int64) (Msg, Drop) {
	m, d := o.open(b, now)
	o.Stats.Rx[d].Inc()
	return m, d
}

func (o *Opener) open(b []byte, now int64) (Msg, Drop) {
	be := binary.BigEndian
	switch {
	case len(b) < headerLen:
		return Msg{}, DropShort
	case be.Uint32(b) != envMagic:
		return Msg{}, DropMagic
	case b[4] != envVersion:
		return Msg{}, DropVersion
	case b[6] != 0 || b[7] != 0:
		return Msg{}, DropReserved
	}
	idLen := int(b[5])
	if idLen == 0 || idLen > MaxIDLen {
		return Msg{}, DropID
	}
	aad := headerLen + idLen
	if len(b) < aad+saLen+tagLen {
		return Msg{}, DropShort
	}
	from := ID(b[headerLen:aad])
	if from == o.self {
		return Msg{}, DropID
	}
	at := int64(be.Uint64(b[8:]))
	o.mu.Lock()
	defer o.mu.Unlock()
	copy(o.nonce[:], b[16:16+nonceLen])
	plain, err := o.aead.Open(b[aad:aad], o.nonce[:], b[aad:], b[:aad])
	if err != nil {
		return Msg{}, DropAuth
	}
	switch {
	case at <= now-o.window:
		return Msg{}, DropStale
	case at >= now+o.window:
		return Msg{}, DropFuture
	}
	sc := o.senders[from]
	switch {
	case sc == nil && len(o.senders) >= o.maxSenders:
		return Msg{}, DropSenders
	case sc == nil:
		sc = &senderCache{seen: map[[nonceLen]byte]int64{}}
	case at <= sc.floor:
		return Msg{}, DropFloor
	}
	if _, dup := sc.seen[o.nonce]; dup {
		return Msg{}, DropReplay
	}
	m := Msg{From: from, Time: at, Body: plain[saLen:]}
	if plain[1]&^1 != 0 || plain[2] != 0 || plain[3] != 0 {
		return Msg{}, DropSA
	}
	if plain[1]&1 != 0 {
		m.HasSA = true
		m.SA.Version = psp.Version(plain[0])
		m.SA.SPI = psp.SPI(be.Uint32(plain[4:]))
		copy(m.SA.Key[:], plain[8:saLen])
		n := m.SA.Version.KeyLen()
		if n == 0 || m.SA.SPI == 0 || !allZero(plain[8+n:saLen]) {
			return Msg{}, DropSA
		}
	}
	clear(plain[:saLen])
	if len(sc.seen) == 0 {
		o.senders[from] = sc
	}
	sc.remember(o.nonce, at, now, o.window, o.cacheSize)
	return m, dropNone
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// remember puts an accepted nonce in the cache, evicting the oldest
// entry when it is full (its time becomes the floor if still fresh) and
// expired entries on the way.
func (c *senderCache) remember(n [nonceLen]byte, at, now, window int64, size int) {
	if len(c.ring) < size {
		c.ring = append(c.ring, cacheEntry{n, at})
		c.seen[n] = at
		return
	}
	old := &c.ring[c.head]
	delete(c.seen, old.nonce)
	if old.at > now-window && old.at > c.floor {
		c.floor = old.at
	}
	*old = cacheEntry{n, at}
	c.seen[n] = at
	c.head = (c.head + 1) % len(c.ring)
}

// Cached returns how many nonces the replay caches hold in all (bounded
// by CacheSize × MaxSenders).
func (o *Opener) Cached() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.senders {
		n += len(c.seen)
	}
	return n
}

// Senders returns how many sender daemons the opener tracks.
func (o *Opener) Senders() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.senders)
}
