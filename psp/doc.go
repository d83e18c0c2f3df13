// Package psp is falconnic's PSP-style encapsulation of Falcon datagrams
// between daemons [digest §2.1, §10.1; F-WIRE-9, F-SEC-1..3]: AES-GCM
// authenticated encryption of each packet, keys derived per SPI from the
// receiving NIC's master key, master-key rotation without loss, and a
// replay window. Like package falcon it is sans-I/O: it takes and returns
// caller buffers, reads no clock and starts nothing.
//
// Roles. The receiving NIC owns MasterKeys (two slots; an SPI's top bit
// picks one) and, per connection, an RxSA with the connection's current
// and previous SPI. It gives each connection an SPI (NewSPI) and hands
// the key derived for it (Derive) to the sending NIC through the
// authenticated connection manager (package psp/cmauth), which seals
// with a TxSA. Keys are derived when an SPI is installed, never per
// packet.
//
//	sender                                   receiver
//	TxSA.Seal(pkt, ts) ── datagram ────────▶ PeekClear → connection → RxSA.Open
//	                                          header → SPI → generation → tag → replay
//
// Datagram (header.go): PSP header (16) | Falcon packet, its first word
// (version, destination CID) clear and authenticated, the rest encrypted |
// ICV (16). The IV is the transmit timestamp (Falcon's T1/T3) and a
// sequence number that never repeats under one SPI, so a nonce is never
// reused; a TxSA refuses to seal once its sequence numbers run out.
//
// Receive order and invariants: Open checks the header fields, that the
// SPI is the connection's current or previous one, that its master-key
// generation is still accepted, then the tag; only a datagram whose tag
// verifies reaches the replay window (replay.go) or changes any state.
// Every refusal is a Drop with its own counter (counters.go) and never a
// panic. Neither Seal nor Open allocates.
//
// Rotation (keys.go, F-SEC-3):
//
//	MasterKeys.Rotate(k)        new generation in the other slot, current; previous still accepted
//	RxSA.Rekey(NewSPI(i))       per connection: previous = current, current = new SPI
//	CM: Derive → peer           REKEY; peer's TxSA.Rekey: later datagrams use the new SPI
//	peer → CM                   REKEY_ACK (the REKEY is resent until it comes, device/cm)
//	RxSA.DropPrevious()         at the next rotation
//	MasterKeys.DisallowPrevious before the next rotation, once every REKEY is confirmed or given up
//
// Decisions where the spec is silent: the IV layout (timestamp high,
// sequence low); an anti-replay bitmap over the sequence number
// (ReplayWindow datagrams of reordering) in addition to Falcon's PAWS
// check on the timestamp; AES-GCM-128 and -256 only (PSP versions 0 and 1,
// no GMAC-only modes); no virtualization cookie; the CMAC of the KDF is
// implemented here (cmac.go, RFC 4493) on crypto/aes.
package psp
