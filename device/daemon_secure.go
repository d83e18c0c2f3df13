package device

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"falconnic/device/cm"
	"falconnic/falcon"
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
	auth        cmauth.Counters // the CM envelopes' and MAC bindings' refusals
	owners      *cmauth.Owners
	rotate      sync.Mutex // one rotation at a time
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
	d.sec.on, d.sec.id, d.sec.fingerprint = true, id, secret.Fingerprint()
	d.cm.SetSecurity(&cm.Security{Sealer: sealer, Opener: opener, Owners: d.sec.owners, Version: psp.AESGCM128})
	d.ctl.Handle("fabric.rotate_keys", d.rotateKeys)
	d.ctl.Handle("fabric.forget_daemon", d.forgetDaemon)
	d.log.Info("fabric secured", "id", id, "secret", d.sec.fingerprint, "psp", psp.AESGCM128)
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

// rotateKeys is the control method fabric.rotate_keys: every NIC's master
// keys get a new generation from crypto/rand and every sealed connection
// moves to it (cm.Agent.Rekey). The generation before the previous one is
// refused from then on; datagrams of the previous one are still accepted,
// so traffic in flight is not lost.
func (d *Daemon) rotateKeys(ctx context.Context, _ json.RawMessage) (any, error) {
	if !d.sec.on {
		return nil, errors.New("the fabric is not secured (no key_file)")
	}
	d.sec.rotate.Lock()
	defer d.sec.rotate.Unlock()
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
	return out, nil
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
	// NICs are the NICs' master-key generations and SA counters.
	NICs []NICSecurity `json:"nics,omitempty"`
}

// NICSecurity is one NIC's PSP state.
type NICSecurity struct {
	Name       string            `json:"name"`
	Generation uint32            `json:"generation"`
	Counters   map[string]uint64 `json:"psp"`
}

func (d *Daemon) securityStatus() *SecurityStatus {
	switch {
	case d.sec.insecure:
		return &SecurityStatus{Mode: "insecure", Warning: insecureWarning}
	case !d.sec.on:
		return nil
	}
	st := &SecurityStatus{Mode: "psp", ID: string(d.sec.id), Fingerprint: d.sec.fingerprint, Auth: d.sec.auth.Set().Snapshot()}
	for _, n := range d.nics {
		if n.psp.keys == nil {
			continue
		}
		st.NICs = append(st.NICs, NICSecurity{Name: n.spec.Name, Generation: n.psp.keys.Generation(), Counters: n.psp.stats.Set().Snapshot()})
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
