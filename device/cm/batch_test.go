package cm

import (
	"net/netip"
	"sync"
	"testing"

	"falconnic/falcon"
)

// cmBatchNet is a cmDaemon's Net that carries Falcon packets in batches:
// a port's packets reach the peer when its agent flushes the batch.
type cmBatchNet struct{ *cmDaemon }

func (n cmBatchNet) FalconBatch() FalconBatch { return &cmBatch{d: n.cmDaemon} }

// cmBatch holds packets until Flush; flushes counts the Flush calls that
// sent something.
type cmBatch struct {
	d       *cmDaemon
	mu      sync.Mutex
	held    []cmInFlight
	flushes int
}

func (b *cmBatch) Link(peer netip.AddrPort) falcon.Link {
	return linkFunc(func(pkt []byte, flow uint32) {
		b.mu.Lock()
		b.held = append(b.held, cmInFlight{from: b.d.addr, to: peer, b: append([]byte(nil), pkt...)})
		b.mu.Unlock()
	})
}

func (b *cmBatch) Flush() {
	b.mu.Lock()
	held := b.held
	b.held = nil
	if len(held) > 0 {
		b.flushes++
	}
	b.mu.Unlock()
	for _, m := range held {
		if p := b.d.w.daemons[m.to]; p != nil {
			p.cm.ReceiveFalcon(m.from, 0, m.b)
		}
	}
}

func (b *cmBatch) counts() (held, flushes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held), b.flushes
}

// TestCMBatchesFalconPacketsPerPort: with a batching Net, a connection
// across daemons sends through its port's one batch, which the port
// flushes at the end of its burst of work.
func TestCMBatchesFalconPacketsPerPort(t *testing.T) {
	w := newCMWorld(t)
	w.batching = true
	d1, d2 := w.daemon(1, 0xa), w.daemon(2, 0xb)
	d1.nics[0xa].dial(0xb)
	w.settle()
	a := d1.nics[0xa]
	paired(t, a, d2.nics[0xb])
	_, cfg := a.conn(0xb)
	var b *cmBatch
	a.on(func() {
		b, _ = a.agent.batch.(*cmBatch)
		if b == nil {
			return
		}
		cfg.Peer.Send([]byte{1, 2, 3, 4}, 0)
		if held, _ := b.counts(); held != 1 {
			t.Errorf("%d packets held during the port's work, want 1", held)
		}
	})
	if b == nil {
		t.Fatalf("agent batch %T, want the Net's", a.agent.batch)
	}
	w.sync()
	if held, flushes := b.counts(); held != 0 || flushes != 1 {
		t.Errorf("after the port's burst: %d held, %d flushes; want 0 and 1", held, flushes)
	}
}
