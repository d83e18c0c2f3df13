package device

import (
	"errors"
	"fmt"

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

// Fabric security errors.
var (
	ErrNoKeyFile      = errors.New(`fabric: key_file names the fabric's deployment secret; for a plaintext fabric say "insecure": true`)
	ErrKeyAndInsecure = errors.New("fabric: key_file and insecure exclude each other")
)

func (f *FabricSpec) checkSecurity() error {
	switch {
	case f.KeyFile != "" && f.Insecure:
		return ErrKeyAndInsecure
	case f.KeyFile == "" && !f.Insecure:
		return ErrNoKeyFile
	case len(f.ID) > cmauth.MaxIDLen:
		return fmt.Errorf("fabric: id longer than %d bytes", cmauth.MaxIDLen)
	}
	return nil
}
