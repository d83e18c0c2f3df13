package storage

import (
	"time"

	"falconnic/nvme"
)

// BlkPaths replaces a disk's path when it breaks (NVMeCM for a target on
// another daemon). Broken runs on the port's goroutine with the path the
// disk saw fail (nil: it has none); the replacement arrives through
// Blk.SetPath.
type BlkPaths interface {
	Broken(p *nvme.Path)
}

// Retry policy of disks with BlkPaths: a command failed by its path (dead
// connection, path replaced, command timeout) is resubmitted up to
// blkMaxRetries times; one waiting for a path longer than the retry
// window fails with IOERR, so a request never hangs.
//
// A failed command is never resubmitted on the path it failed on while
// that path is still up [issue 18, finding 6]. A command that timed out
// may still be at the target — its write in the target's backend, or
// waiting for it — and a copy sent beside it could be acknowledged before
// it lands, and the guest's next write to those blocks be overwritten by
// it. The disk retires such a path instead: its commands, new ones too,
// wait for the replacement (BlkPaths.Broken), and the target fences the
// old path's writes when the replacement is set up — the connection
// manager replaces a live connection at the target (cm.Agent.install,
// storage.NVMeFunc.pathDown → nvme.Engine.RemovePath) before it answers
// the REQ, so the old path's writes still in the target's backend hold
// off every write of this initiator (nvme WriteFenced) until they land,
// and those not yet there never land.
const (
	blkMaxRetries         = 8
	blkDefaultRetryWindow = 30 * time.Second
	blkMaxParked          = 1 << 16
)

// blkParked is a command waiting for a path.
type blkParked struct {
	r  *blkReq
	c  *nvme.Command
	at time.Duration
}

// SetPath makes p the disk's path and resubmits the commands waiting for
// one. It runs on the port's goroutine. A path the disk retired is not
// taken back.
func (b *Blk) SetPath(p *nvme.Path) {
	if p == nil || p == b.retired {
		return
	}
	b.path, b.retired = p, nil
	b.pathGen++
	parked := b.parked
	b.parked = nil
	for _, w := range parked {
		b.submit(w.r, w.c)
	}
}

// submit hands c (of request r) to the current path, or parks it until a
// path comes (port's goroutine).
func (b *Blk) submit(r *blkReq, c *nvme.Command) {
	p := b.path
	if p != nil && !p.Down() {
		c.Cookie = b.pathGen
		err := p.Submit(c)
		if err == nil {
			return
		}
		if err != nvme.ErrPathDown {
			r.fail(c, nvme.StatusInternalPathError)
			return
		}
	}
	if b.cfg.Paths == nil || len(b.parked) >= blkMaxParked {
		r.fail(c, nvme.StatusInternalPathError)
		return
	}
	b.Stats.Parked.Inc()
	b.parked = append(b.parked, blkParked{r: r, c: c, at: b.cfg.Port.Clock().Now()})
	if p == nil {
		p = b.retired // ask for a replacement of the path retired
	}
	b.cfg.Paths.Broken(p)
}

// retry resubmits a command its path failed; false when it is final. A
// command that failed on the current path while it is up retires it
// (see blkMaxRetries).
func (b *Blk) retry(r *blkReq, c *nvme.Command) bool {
	if b.cfg.Paths == nil || r.retries >= blkMaxRetries ||
		(c.Status != nvme.StatusInternalPathError && c.Status != nvme.StatusTransportError) {
		return false
	}
	r.retries++
	b.Stats.Retries.Inc()
	if p := b.path; p != nil && c.Cookie == b.pathGen && !p.Down() {
		b.Stats.PathsRetired.Inc()
		b.retired, b.path = p, nil
	}
	b.submit(r, c)
	return true
}

// NextDeadline implements the port's ULP timers: the oldest parked
// command's retry window.
func (b *Blk) NextDeadline() (time.Duration, bool) {
	if len(b.parked) == 0 {
		return 0, false
	}
	return b.parked[0].at + b.retryWindow(), true
}

// OnTimer fails the parked commands whose retry window passed.
func (b *Blk) OnTimer(now time.Duration) {
	n := 0
	for n < len(b.parked) && b.parked[n].at+b.retryWindow() <= now {
		n++
	}
	expired := b.parked[:n]
	b.parked = append([]blkParked(nil), b.parked[n:]...)
	for _, w := range expired {
		b.Stats.RetryExpired.Inc()
		w.r.fail(w.c, nvme.StatusInternalPathError)
	}
}

func (b *Blk) retryWindow() time.Duration {
	if b.cfg.RetryWindow > 0 {
		return b.cfg.RetryWindow
	}
	return blkDefaultRetryWindow
}

// unpark drops c from the parked commands (it is cancelled).
func (b *Blk) unpark(c *nvme.Command) {
	for i, w := range b.parked {
		if w.c == c {
			b.parked = append(b.parked[:i], b.parked[i+1:]...)
			return
		}
	}
}

// fail completes c with st without retries.
func (r *blkReq) fail(c *nvme.Command, st nvme.Status) {
	r.retries = blkMaxRetries
	c.Status = st
	if c.Done != nil {
		c.Done(c)
	}
}
