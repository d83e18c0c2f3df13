package device

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"falconnic/device/cm"
	"falconnic/falcon"
	"falconnic/internal/clock"
	"falconnic/internal/control"
	"falconnic/psp"
	"falconnic/psp/cmauth"
)

// daemonSecurity is how the daemon secures its fabric (config_secure.go).
type daemonSecurity struct {
	on          bool // the CM seals (a fabric with a key file)
	insecure    bool // a fabric configured "insecure": true
	id          cmauth.ID
	fingerprint string
	secret      *cmauth.Secret  // the CM key, for a capture's key log
	auth        cmauth.Counters // the CM envelopes' and MAC bindings' refusals
	owners      *cmauth.Owners
	rotate      sync.Mutex // one rotation at a time
	// every is fabric.rotate_every (0: off); the counts are rotations
	// made (by either path), automatic ones put off because REKEYs of
	// the previous one were still pending, and rotations that failed.
	every                       time.Duration
	rotations, deferred, failed atomic.Uint64
	lastErr                     atomic.Pointer[string]
}

// nicPSP is a NIC's part: its master keys (never leave the NIC) and the
// counters of its SAs.
type nicPSP struct {
	keys  *psp.MasterKeys
	stats psp.Counters
}

// insecureWarning is what the log and `falconnic status` say of a
// plaintext fabric.
const insecureWarning = "the fabric is INSECURE: CM messages and Falcon datagrams between daemons are neither authenticated nor encrypted (fabric.insecure); any host that reaches the fabric port can hijack connections and read or write guest memory exposed to RDMA and NVMe"

// secureFabric loads the fabric's deployment secret and has the CM seal
// its work between daemons with it (before the NICs are built).
func (d *Daemon) secureFabric() error {
	fs := d.cfg.Fabric
	if fs == nil || d.fabric == nil {
		return nil
	}
	if fs.Insecure {
		d.sec.insecure = true
		d.log.Warn(insecureWarning)
		return nil
	}
	secret, err := cmauth.LoadSecret(fs.KeyFile)
	if err != nil {
		return fmt.Errorf("%w: fabric key_file: %v", ErrConfig, err)
	}
	id := cmauth.ID(fs.ID)
	if id == "" {
		id = cmauth.ID(d.fabric.LocalAddr().String())
	}
	sealer, err := cmauth.NewSealer(secret, id, rand.Reader)
	if err != nil {
		return err
	}
	opener, err := cmauth.NewOpener(secret, id, cmauth.OpenerConfig{Counters: &d.sec.auth})
	if err != nil {
		return err
	}
	var local [][6]byte
	for _, n := range d.cfg.NICs {
		var m [6]byte
		copy(m[:], n.hwAddr())
		local = append(local, m)
	}
	d.sec.owners = cmauth.NewOwners(id, cmauth.OwnersConfig{Local: local, Learn: true, Counters: &d.sec.auth})
	d.sec.on, d.sec.id, d.sec.fingerprint, d.sec.secret = true, id, secret.Fingerprint(), secret
	if d.sec.every, err = fs.rotateEvery(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	d.cm.SetSecurity(&cm.Security{Sealer: sealer, Opener: opener, Owners: d.sec.owners, Version: psp.AESGCM128})
	d.ctl.Handle("fabric.rotate_keys", d.rotateKeys)
	d.ctl.Handle("fabric.forget_daemon", d.forgetDaemon)
	d.log.Info("fabric secured", "id", id, "secret", d.sec.fingerprint, "psp", psp.AESGCM128, "rotate_every", d.sec.every)
	return nil
}

// secureNIC gives a NIC of a secure fabric its master keys, from
// crypto/rand.
func (d *Daemon) secureNIC(n *daemonNIC) error {
	if !d.sec.on {
		return nil
	}
	k, err := randomMasterKey()
	if err != nil {
		return err
	}
	if n.psp.keys, err = psp.NewMasterKeys(k); err != nil {
		return err
	}
	n.cm.SetKeys(n.psp.keys, &n.psp.stats)
	return nil
}

func randomMasterKey() (k [psp.MasterKeyLen]byte, err error) {
	_, err = rand.Read(k[:])
	return k, err
}

// RotateResult is one NIC's master-key rotation.
type RotateResult struct {
	NIC        string `json:"nic"`
	Generation uint32 `json:"generation"`
	Rekeyed    int    `json:"rekeyed"`
}

// ErrRekeyPending refuses a rotation while a NIC's connections still
// await REKEY_ACKs of the previous one: it would stop accepting the SPIs
// their peers still seal with (cm.Agent.PendingRekeys).
var ErrRekeyPending = errors.New("the previous key rotation is still being confirmed by the peers (REKEYs pending); try again shortly")

// rotateKeys is the control method fabric.rotate_keys (see rotate).
func (d *Daemon) rotateKeys(ctx context.Context, _ json.RawMessage) (any, error) {
	if !d.sec.on {
		return nil, errors.New("the fabric is not secured (no key_file)")
	}
	res, err := d.rotate()
	if err != nil {
		return nil, err
	}
	return res, nil
}

// rotate gives every NIC's master keys a new generation from crypto/rand
// and moves every sealed connection to it (cm.Agent.Rekey): the path of
// fabric.rotate_keys and of fabric.rotate_every. The generation before
// the previous one is refused from then on; datagrams of the previous one
// are still accepted, so traffic in flight is not lost. While a REKEY of
// the previous rotation is pending it refuses (ErrRekeyPending) and
// changes nothing.
func (d *Daemon) rotate() ([]RotateResult, error) {
	d.sec.rotate.Lock()
	defer d.sec.rotate.Unlock()
	for _, n := range d.nics {
		pending := 0
		if !n.falcon.Call(func(*falcon.Endpoint) { pending, _ = n.cm.PendingRekeys() }) {
			return nil, fmt.Errorf("nic %s: its Falcon port is not running", n.spec.Name)
		}
		if pending > 0 {
			return nil, fmt.Errorf("nic %s: %d connections: %w", n.spec.Name, pending, ErrRekeyPending)
		}
	}
	var out []RotateResult
	for _, n := range d.nics {
		k, err := randomMasterKey()
		if err != nil {
			return nil, err
		}
		r := RotateResult{NIC: n.spec.Name}
		var rerr error
		ok := n.falcon.Call(func(*falcon.Endpoint) {
			n.psp.keys.DisallowPrevious()
			if r.Generation, rerr = n.psp.keys.Rotate(k); rerr == nil {
				r.Rekeyed = n.cm.Rekey()
			}
		})
		if !ok {
			return nil, fmt.Errorf("nic %s: its Falcon port is not running", n.spec.Name)
		}
		if rerr != nil {
			return nil, rerr
		}
		d.log.Info("fabric master key rotated", "nic", n.spec.Name, "generation", r.Generation, "rekeyed", r.Rekeyed)
		out = append(out, r)
	}
	d.sec.rotations.Add(1)
	return out, nil
}

// rotateRetry is how soon an automatic rotation put off by pending
// REKEYs is tried again: past the ≈ 21 s a REKEY is resent for before
// it is confirmed or given up (device/cm).
const rotateRetry = 30 * time.Second

// rotator rotates the fabric's keys every fabric.rotate_every on the
// daemon's clock.
type rotator struct {
	mu      sync.Mutex
	t       clock.Timer
	stopped bool
}

// startRotation starts the automatic rotation (nil: off).
func (d *Daemon) startRotation() *rotator {
	if !d.sec.on || d.sec.every <= 0 {
		return nil
	}
	r := &rotator{}
	var arm func(time.Duration)
	arm = func(after time.Duration) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopped {
			return
		}
		r.t = d.clk.AfterFunc(after, func() {
			_, err := d.rotate()
			switch {
			case errors.Is(err, ErrRekeyPending):
				d.sec.deferred.Add(1)
				d.log.Warn("automatic key rotation put off", "err", err, "retry_in", rotateRetry)
				arm(rotateRetry)
				return
			case err != nil:
				d.sec.failed.Add(1)
				msg := err.Error()
				d.sec.lastErr.Store(&msg)
				d.log.Error("automatic key rotation failed", "err", err)
			}
			arm(d.sec.every)
		})
	}
	arm(d.sec.every)
	return r
}

func (r *rotator) stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.t != nil {
		r.t.Stop()
	}
}

// SecurityStatus is how the fabric is secured, in `falconnic status`.
type SecurityStatus struct {
	// Mode is "psp" (key file) or "insecure".
	Mode        string `json:"mode"`
	Warning     string `json:"warning,omitempty"`
	ID          string `json:"id,omitempty"`
	Fingerprint string `json:"secret_fingerprint,omitempty"`
	// Auth counts the CM envelopes' and MAC bindings' refusals.
	Auth map[string]uint64 `json:"cm_auth,omitempty"`
	// RotateEvery is fabric.rotate_every ("off", or a duration);
	// Rotations counts the rotations made (automatic and by
	// fabric.rotate_keys), RotationsDeferred the automatic ones put off
	// while REKEYs were pending, RotationsFailed those that failed, the
	// last with LastRotationError.
	RotateEvery       string `json:"rotate_every"`
	Rotations         uint64 `json:"rotations"`
	RotationsDeferred uint64 `json:"rotations_deferred"`
	RotationsFailed   uint64 `json:"rotations_failed"`
	LastRotationError string `json:"last_rotation_error,omitempty"`
	// NICs are the NICs' master-key generations and SA counters.
	NICs []NICSecurity `json:"nics,omitempty"`
}

// NICSecurity is one NIC's PSP state.
type NICSecurity struct {
	Name       string `json:"name"`
	Generation uint32 `json:"generation"`
	// RekeysPending are connections whose REKEY awaits the peer's
	// REKEY_ACK; RekeysFailed those whose last REKEY went unanswered
	// after every resend (still sealed with the previous generation,
	// accepted until the next rotation).
	RekeysPending int               `json:"rekeys_pending"`
	RekeysFailed  int               `json:"rekeys_failed"`
	Counters      map[string]uint64 `json:"psp"`
}

func (d *Daemon) securityStatus() *SecurityStatus {
	switch {
	case d.sec.insecure:
		return &SecurityStatus{Mode: "insecure", Warning: insecureWarning}
	case !d.sec.on:
		return nil
	}
	st := &SecurityStatus{Mode: "psp", ID: string(d.sec.id), Fingerprint: d.sec.fingerprint, Auth: d.sec.auth.Set().Snapshot(),
		RotateEvery: "off", Rotations: d.sec.rotations.Load(), RotationsDeferred: d.sec.deferred.Load(), RotationsFailed: d.sec.failed.Load()}
	if d.sec.every > 0 {
		st.RotateEvery = d.sec.every.String()
	}
	if e := d.sec.lastErr.Load(); e != nil {
		st.LastRotationError = *e
	}
	for _, n := range d.nics {
		if n.psp.keys == nil {
			continue
		}
		ns := NICSecurity{Name: n.spec.Name, Generation: n.psp.keys.Generation(), Counters: n.psp.stats.Set().Snapshot()}
		n.falcon.Call(func(*falcon.Endpoint) { ns.RekeysPending, ns.RekeysFailed = n.cm.PendingRekeys() })
		st.NICs = append(st.NICs, ns)
	}
	return st
}

// forgetDaemon is the control method fabric.forget_daemon {"id": ID}: the
// MACs daemon ID spoke for are bound to no daemon any more (MAC bindings
// are learnt on first use and otherwise last for this daemon's life), so
// a NIC that moved to another daemon, or a daemon that came back under
// another ID, can set up connections again.
func (d *Daemon) forgetDaemon(_ context.Context, p json.RawMessage) (any, error) {
	if !d.sec.on {
		return nil, errors.New("the fabric is not secured (no key_file)")
	}
	var req struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(p, &req); err != nil || req.ID == "" {
		return nil, fmt.Errorf("%w: want {\"id\": DAEMON-ID}", control.ErrBadParams)
	}
	if cmauth.ID(req.ID) == d.sec.id {
		return nil, fmt.Errorf("%w: %s is this daemon", control.ErrBadParams, req.ID)
	}
	d.sec.owners.Forget(cmauth.ID(req.ID))
	d.log.Info("fabric daemon forgotten: its MACs are bound to no daemon", "id", req.ID)
	return map[string]string{"forgotten": req.ID}, nil
}
