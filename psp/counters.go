package psp

import (
	"strconv"

	"falconnic/internal/stats"
)

// Drop is why Open refused a datagram. Every cause has its counter.
type Drop uint8

// Drop causes, in the order Open checks them: the header, the SPI and
// its generation, the tag, and only then the replay window (a datagram
// whose tag fails changes no state).
const (
	dropNone Drop = iota
	DropShort
	DropNextHeader
	DropExtLen
	DropCryptOffset
	DropFlags
	DropVersion
	DropUnknownSPI
	DropStaleGen
	DropAuth
	DropReplay
	DropTooOld
	numDrops
)

// drops is the drop table: counter name and help text.
var drops = [numDrops]struct{ name, help string }{
	dropNone:        {"psp_rx_opened", "datagrams authenticated, decrypted and accepted"},
	DropShort:       {"psp_rx_short", "datagrams dropped: shorter than a PSP header, the clear bytes and the ICV"},
	DropNextHeader:  {"psp_rx_bad_next_header", "datagrams dropped: next header is not Falcon (252)"},
	DropExtLen:      {"psp_rx_bad_ext_len", "datagrams dropped: header ext len other than 1 (virtualization cookies are not used)"},
	DropCryptOffset: {"psp_rx_bad_crypt_offset", "datagrams dropped: crypt offset other than Falcon's 4 clear bytes"},
	DropFlags:       {"psp_rx_bad_flags", "datagrams dropped: reserved, S, D or V bit set, or the always-one bit clear"},
	DropVersion:     {"psp_rx_bad_version", "datagrams dropped: PSP version other than the connection's"},
	DropUnknownSPI:  {"psp_rx_unknown_spi", "datagrams dropped: SPI is neither the connection's current nor its previous one"},
	DropStaleGen:    {"psp_rx_stale_generation", "datagrams dropped: the SPI's master-key generation is no longer accepted"},
	DropAuth:        {"psp_rx_auth_failed", "datagrams dropped: ICV (AES-GCM tag) did not verify"},
	DropReplay:      {"psp_rx_replay", "datagrams dropped: authentic, but their IV sequence number was already accepted"},
	DropTooOld:      {"psp_rx_too_old", "datagrams dropped: authentic, but their IV sequence number is behind the replay window"},
}

// String names the cause (its counter's name).
func (d Drop) String() string {
	if d < numDrops {
		return drops[d].name
	}
	return "drop(" + strconv.Itoa(int(d)) + ")"
}

// Error makes a Drop usable as an error value.
func (d Drop) Error() string { return "psp: " + d.String() }

// Counters count one NIC's (or one test's) sealed datagrams and every
// cause of a refused one. Safe for concurrent use.
type Counters struct {
	Rx           [numDrops]stats.Counter // indexed by Drop; [0] counts accepted datagrams
	Sealed       stats.Counter
	SeqExhausted stats.Counter
	BadBuffer    stats.Counter
}

// Set lists the counters with help text.
func (c *Counters) Set() stats.Set {
	s := stats.Set{
		{Name: "psp_tx_sealed", Help: "datagrams encrypted and authenticated", Counter: &c.Sealed},
		{Name: "psp_tx_seq_exhausted", Help: "seals refused: the SPI's 2^32 IV sequence numbers are used up (rekey first)", Counter: &c.SeqExhausted},
		{Name: "psp_tx_bad_buffer", Help: "seals refused: destination too small or overlapping the packet", Counter: &c.BadBuffer},
	}
	for d := range numDrops {
		s = append(s, stats.Desc{Name: drops[d].name, Help: drops[d].help, Counter: &c.Rx[d]})
	}
	return s
}
