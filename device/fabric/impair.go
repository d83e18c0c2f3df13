package fabric

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"falconnic/internal/clock"
)

// DefaultReorderHold is how long a datagram held back for reordering waits
// for a successor before it is sent anyway.
const DefaultReorderHold = time.Millisecond

// Impairment is seeded fabric egress impairment for tests and experiments.
// Each datagram is dropped with probability LossPercent/100; a surviving
// datagram is held back with probability ReorderPercent/100 and sent right
// after the next one (or after Hold if none follows), so it arrives one
// place late. The same Seed and send sequence give the same decisions.
type Impairment struct {
	LossPercent    float64       `json:"loss_percent"`
	ReorderPercent float64       `json:"reorder_percent"`
	Seed           uint64        `json:"seed"`
	Hold           time.Duration `json:"hold_ns,omitempty"`
}

// Active reports whether the impairment does anything.
func (im Impairment) Active() bool { return im.LossPercent > 0 || im.ReorderPercent > 0 }

// Validate checks the percentages.
func (im Impairment) Validate() error {
	for _, v := range []struct {
		name string
		pct  float64
	}{{"loss", im.LossPercent}, {"reorder", im.ReorderPercent}} {
		if !(v.pct >= 0 && v.pct <= 100) {
			return fmt.Errorf("fabric: %s percentage %v out of range 0..100", v.name, v.pct)
		}
	}
	if im.Hold < 0 {
		return fmt.Errorf("fabric: negative reorder hold %v", im.Hold)
	}
	return nil
}

// impairer applies an Impairment. Its lock serialises impaired sends, which
// is fine: impairment is for experiments, not the fast path.
type impairer struct {
	cfg     Impairment
	clk     clock.Clock
	mu      sync.Mutex
	rng     *rand.Rand
	held    []byte
	heldOn  *net.UDPConn
	heldTo  netip.AddrPort
	holding bool
	gen     uint64
}

// newImpairer returns nil when im does nothing.
func newImpairer(im Impairment, clk clock.Clock) (*impairer, error) {
	if err := im.Validate(); err != nil {
		return nil, err
	}
	if !im.Active() {
		return nil, nil
	}
	if im.Hold == 0 {
		im.Hold = DefaultReorderHold
	}
	return &impairer{
		cfg: im,
		clk: clk,
		rng: rand.New(rand.NewPCG(im.Seed, im.Seed^0x9e3779b97f4a7c15)),
	}, nil
}

func (im *impairer) roll(pct float64) bool {
	return pct > 0 && im.rng.Float64()*100 < pct
}

// lose reports whether the loss impairment drops the next datagram
// (counted), as send would (an outbox's datagrams, which it batches when
// there is no reordering).
func (im *impairer) lose(f *Fabric) bool {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.roll(im.cfg.LossPercent) {
		f.c.TxImpairDrop.Inc()
		return true
	}
	return false
}

// send writes b (which the caller reuses) to dst, unless the impairment
// drops it or holds it back.
func (im *impairer) send(f *Fabric, conn *net.UDPConn, dst netip.AddrPort, b []byte) error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.roll(im.cfg.LossPercent) {
		f.c.TxImpairDrop.Inc()
		return nil
	}
	if !im.holding && im.roll(im.cfg.ReorderPercent) {
		f.c.TxImpairReorder.Inc()
		im.held = append(im.held[:0], b...)
		im.heldOn, im.heldTo, im.holding = conn, dst, true
		im.gen++
		gen := im.gen
		im.clk.AfterFunc(im.cfg.Hold, func() { im.flush(f, gen) })
		return nil
	}
	err := f.write(conn, dst, b)
	im.sendHeldLocked(f)
	return err
}

func (im *impairer) sendHeldLocked(f *Fabric) {
	if im.holding {
		im.holding = false
		f.write(im.heldOn, im.heldTo, im.held)
	}
}

// flush sends the held datagram if it is still the one held at gen.
func (im *impairer) flush(f *Fabric, gen uint64) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.gen == gen && !f.closed.Load() {
		im.sendHeldLocked(f)
	}
}

// release sends whatever is held (the impairer is being replaced or the
// fabric closed).
func (im *impairer) release(f *Fabric) {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.sendHeldLocked(f)
}
