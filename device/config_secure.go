package device

import (
	"errors"
	"fmt"
	"time"

	"falconnic/psp/cmauth"
)

// A fabric is secure by default [issue 18]: the daemons of one fabric
// share a deployment secret, a key file of hex digits (at least 32 bytes,
// mode 0600 or stricter, owned by the daemon's user; `falconnic keygen`
// writes one) named by fabric.key_file. With it every CM message between
// daemons is authenticated and encrypted (psp/cmauth) and every Falcon
// datagram PSP-sealed per connection (package psp). Plaintext takes an
// explicit "insecure": true instead, which the daemon warns about in its
// log and in `falconnic status`.
//
// fabric.id names the daemon in the fabric (the ID its CM messages carry
// and MACs are bound to); default the listen address, which is unique
// among daemons whose configs list each other by address. Daemons that
// all listen on 0.0.0.0 with one port must set it.

// fabric.rotate_every rotates every NIC's master keys periodically,
// through the same path as the control method fabric.rotate_keys: a Go
// duration of at least MinRotateEvery, or "off"; default
// DefaultRotateEvery. A rotation moves every sealed connection to a fresh
// SPI, so it also bounds how long one SPI's 2^32 IV sequence numbers
// must last (psp.ErrSeqExhausted).
//
// DefaultRotateEvery is one hour. PSP deployments rotate master keys
// about daily, but there the IV is 64 bits of sequence; ours is a 32-bit
// timestamp and a 32-bit sequence number (psp/doc.go), and one SPI's
// sequence numbers last 2^32 datagrams: a day at 50 k datagrams/s, an
// hour at 1.19 M/s. An hour keeps a connection sealing through any rate
// one emulated NIC reaches with a wide margin, and costs one REKEY and
// REKEY_ACK per connection per hour.
//
// MinRotateEvery is a minute: a rotation waits for every REKEY of the
// previous one to be confirmed or given up (≈ 21 s, device/cm), and more
// often than that the old generation would be dropped while a REKEY to
// move off it is still being resent.
const (
	DefaultRotateEvery = time.Hour
	MinRotateEvery     = time.Minute
)

// rotateEvery is fabric.rotate_every: 0 when off.
func (f *FabricSpec) rotateEvery() (time.Duration, error) {
	switch f.RotateEvery {
	case "":
		return DefaultRotateEvery, nil
	case "off":
		return 0, nil
	}
	d, err := time.ParseDuration(f.RotateEvery)
	if err != nil {
		return 0, fmt.Errorf("fabric: rotate_every: %w (a duration like \"1h\", or \"off\")", err)
	}
	if d < MinRotateEvery {
		return 0, fmt.Errorf("fabric: rotate_every %v is shorter than %v (or say \"off\")", d, MinRotateEvery)
	}
	return d, nil
}

// Fabric security errors.
var (
	ErrNoKeyFile      = errors.New(`fabric: key_file names the fabric's deployment secret; for a plaintext fabric say "insecure": true`)
	ErrKeyAndInsecure = errors.New("fabric: key_file and insecure exclude each other")
	ErrRotateInsecure = errors.New("fabric: rotate_every rotates the keys of a secured fabric; an insecure one has none")
)

func (f *FabricSpec) checkSecurity() error {
	switch {
	case f.KeyFile != "" && f.Insecure:
		return ErrKeyAndInsecure
	case f.KeyFile == "" && !f.Insecure:
		return ErrNoKeyFile
	case len(f.ID) > cmauth.MaxIDLen:
		return fmt.Errorf("fabric: id longer than %d bytes", cmauth.MaxIDLen)
	case f.Insecure && f.RotateEvery != "" && f.RotateEvery != "off":
		return ErrRotateInsecure
	}
	_, err := f.rotateEvery()
	return err
}
