package capture

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// The key log (`falconnic capture --keylog FILE`): a text file of the keys
// the daemon used while it captured, which tools/wireshark/falcon.lua reads
// (preference falcon.keylog) to decrypt the capture's PSP datagrams and
// CM envelopes, as SSLKEYLOGFILE does for TLS. One key per line, fields
// separated by one space, hex in lower case:
//
//	# comment
//	PSP <spi> <dir> <alg> <key> <nic>
//	CMAUTH <fingerprint> aes-256-gcm <key>
//
// PSP lines: spi is the SPI (8 hex digits, psp/header.go), dir "rx" (the
// NIC opens datagrams under it) or "tx" (the NIC seals with it), alg the
// PSP version's cipher ("aes-gcm-128" or "aes-gcm-256") and key its
// derived key (32 or 64 hex digits); nic names the NIC. The same SPI may
// come back with another key after master-key rotations: a reader tries
// each key logged for an SPI and takes the one whose tag verifies.
//
// The CMAUTH line is the fabric's CM key (psp/cmauth: AES-256-GCM over
// each CM envelope) with its secret's fingerprint. It opens every CM
// message of the fabric, and the SA offers inside them hold PSP keys: the
// whole file is as secret as the fabric's key file.

// KeyLogHeader is the key log's first line.
const KeyLogHeader = "# falconnic key log v1 (SECRET: it decrypts and forges this fabric's traffic; see README)"

// MaxKeyLines bounds the key-log lines a session buffers for its reader;
// lines past it are dropped and counted (keys_dropped).
const MaxKeyLines = 4096

// PSPKeyLine returns the key-log line of a PSP key.
func PSPKeyLine(spi uint32, dir, alg string, key []byte, nic string) string {
	var b strings.Builder
	b.WriteString("PSP ")
	s := strconv.FormatUint(uint64(spi), 16)
	b.WriteString(strings.Repeat("0", 8-len(s)))
	b.WriteString(s)
	b.WriteString(" " + dir + " " + alg + " " + hex.EncodeToString(key) + " " + keyLogWord(nic))
	return b.String()
}

// CMAuthKeyLine returns the key-log line of a fabric's CM key.
func CMAuthKeyLine(fingerprint string, key []byte) string {
	return "CMAUTH " + keyLogWord(fingerprint) + " aes-256-gcm " + hex.EncodeToString(key)
}

// keyLogWord makes s one word of a line: no spaces or control bytes.
func keyLogWord(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}
