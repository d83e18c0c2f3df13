// Package cmauth authenticates the connection manager's messages between
// daemons [ARCHITECTURE §5 CM; issue 18, build item 2]. It is sans-I/O
// but for LoadSecret, which reads the fabric's key file.
//
// Roles. Every daemon of a fabric loads the same deployment secret
// (LoadSecret: a key file named in its config, mode 0600 checked) and
// derives the fabric's CM key from it. A Sealer wraps each outgoing CM
// message (device/cm/wire.go) in an envelope sealed with AES-256-GCM
// (msg.go): sender daemon ID and time in the clear but authenticated, the
// CM message and the SA offer (the SPI and PSP key of the connection,
// package psp) encrypted. An Opener checks the envelope, then the tag,
// then freshness (Window) and a bounded replay cache of nonces per sender
// daemon: a captured REQ replayed later is refused. Owners then binds the sender
// daemon to the source MAC the CM message claims: a MAC of this daemon's
// own NICs, or one another daemon speaks for, is refused.
//
// How the device's CM uses it (device/cm/secure.go, device/daemon_secure.go):
//
//	send:    env := sealer.Seal(buf, wallNow, &sa, cmMsg)       every send, retries too
//	receive: m, drop := opener.Open(datagram, wallNow)          drop ≠ 0: count, ignore
//	         msg := decodeCM(m.Body)
//	         owners.Authorize(m.From, msg.src)                   error: count, ignore
//	         m.SA → psp.NewTxSA(m.SA.Version, m.SA.SPI, m.SA.KeyBytes(), …)
//
// Invariants: nothing a message says is used before its tag verified; a
// refused message changes no state (the cache takes only accepted
// nonces); every refusal has its counter (Counters); the cache is bounded
// (CacheSize) and a full one refuses old messages rather than forgetting
// them.
//
// Trust: the deployment secret makes a daemon a member of the fabric.
// Every member can seal, so the ID in an envelope is only as honest as
// the members; the source address check the fabric already makes (peers
// by address) and Owners' bindings stop a member or a stranger from
// taking over another daemon's MACs, and a stranger without the secret
// can send nothing the CM accepts. Per-daemon asymmetric keys would make
// IDs unforgeable among members; the issue asks for one secret per
// fabric.
package cmauth
