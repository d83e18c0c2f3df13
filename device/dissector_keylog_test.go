package device

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"falconnic/device/capture"
	"falconnic/device/fabric"
	"falconnic/device/storage"
	"falconnic/falcon/wire"
	"falconnic/psp"
)

// The key log (`falconnic capture --keylog`, device/capture/keylog.go) is
// tested the way a user meets it: a capture of a sealed fabric with its
// key log, spanning a master-key rotation, decrypted by tshark with the
// dissector; the Go side opens every datagram with the same key log to
// know what tshark must show.

// drainKeys reads everything the session buffered, packets and key-log
// lines.
func drainKeys(s *capture.Session) (recs []capture.Record, keys []string) {
	for {
		t := time.NewTimer(50 * time.Millisecond)
		b := s.Read(1<<20, t.C)
		t.Stop()
		recs, keys = append(recs, b.Records...), append(keys, b.Keys...)
		if len(b.Records) == 0 && len(b.Keys) == 0 {
			return recs, keys
		}
	}
}

// goKeyLog is a key log as the Go side reads it (PSP keys by SPI, CM keys).
type goKeyLog struct {
	psp map[uint32][]cipher.AEAD
	cm  []cipher.AEAD
}

func parseKeyLog(t *testing.T, lines []string) goKeyLog {
	t.Helper()
	k := goKeyLog{psp: map[uint32][]cipher.AEAD{}}
	aead := func(h string) cipher.AEAD {
		key, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("key log key %q: %v", h, err)
		}
		b, err := aes.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := cipher.NewGCM(b)
		return a
	}
	for _, l := range lines {
		w := strings.Fields(l)
		switch {
		case len(w) == 6 && w[0] == "PSP" && (w[2] == "rx" || w[2] == "tx") && w[3] == psp.AESGCM128.String():
			spi, err := strconv.ParseUint(w[1], 16, 32)
			if err != nil || len(w[1]) != 8 {
				t.Fatalf("key log line %q: SPI", l)
			}
			k.psp[uint32(spi)] = append(k.psp[uint32(spi)], aead(w[4]))
		case len(w) == 4 && w[0] == "CMAUTH" && w[2] == "aes-256-gcm":
			k.cm = append(k.cm, aead(w[3]))
		default:
			t.Fatalf("key log line %q does not parse", l)
		}
	}
	return k
}

// openPSP returns the Falcon packet of PSP datagram p (clear word and
// plaintext), or nil if no logged key opens it.
func (k goKeyLog) openPSP(p []byte) []byte {
	spi, ok := psp.PeekSPI(p)
	if !ok || len(p) < psp.MinDatagram {
		return nil
	}
	const clearEnd = psp.HeaderLen + psp.CryptOffset
	for _, a := range k.psp[uint32(spi)] {
		if pt, err := a.Open(nil, p[4:psp.HeaderLen], p[clearEnd:], p[:clearEnd]); err == nil {
			return append(append([]byte(nil), p[psp.HeaderLen:clearEnd]...), pt...)
		}
	}
	return nil
}

// openCM returns the CM message of envelope e (psp/cmauth/msg.go), or nil.
func (k goKeyLog) openCM(e []byte) []byte {
	if len(e) < 28+16 || len(e) < 28+int(e[5])+16 {
		return nil
	}
	aad := 28 + int(e[5])
	for _, a := range k.cm {
		if pt, err := a.Open(nil, e[16:28], e[aad:], e[:aad]); err == nil && len(pt) >= 40 {
			return pt[40:]
		}
	}
	return nil
}

// innerRow is what tshark must print of a decrypted Falcon packet pkt
// (no envelope): type, CID, PSN, RSN, NVMe type.
func innerRow(t *testing.T, pkt []byte) string {
	t.Helper()
	s := decodeSent(t, pkt)
	row := fmt.Sprintf("%d|%d|", s.typ, s.cid)
	if s.hasTxn {
		row += fmt.Sprintf("%d|%d|", s.psn, s.rsn)
	} else {
		row += "||"
	}
	p := wire.Packet(pkt)
	if s.hasTxn && s.typ != wire.TypeResync && p.Txn().Protocol() == wire.ProtoNVMe {
		u, err := wire.ParseNVMe(p.Payload(), s.typ)
		if err != nil {
			t.Fatalf("NVMe payload: %v", err)
		}
		row += strconv.Itoa(int(u.Type))
	}
	return row
}

// keylogFields are the fields the key-log tests read, in tshark's order.
var keylogFields = []string{"falconfab.kind", "falcon_psp.spi", "falcon_psp.icv_ok", "falcon.type", "falcon.cid", "falcon.psn",
	"falcon.rsn", "falcon_nvme.type", "falcon_cm.type", "falcon_cmauth.tag_ok", "_ws.malformed", "_ws.expert.message"}

// tsharkKeyLog runs tshark over the capture with the key log at keylog
// ("" for none) and returns one line per packet split into keylogFields
// and tshark's stderr. A Lua error fails the test.
func tsharkKeyLog(t *testing.T, tshark, path, keylog string, want int) ([][]string, string) {
	t.Helper()
	args := []string{"-n", "-r", path, "-X", "lua_script:" + dissector, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"}
	if keylog != "" {
		args = append(args, "-o", "falcon.keylog:"+keylog)
	}
	for _, f := range keylogFields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.Contains(stderr.String(), "Lua") || bytes.Contains(out, []byte("Lua Error")) {
		t.Fatalf("tshark: %v\n%s\n%s", err, stderr.String(), lastLines(out, 20))
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		c := strings.Split(l, "|")
		if len(c) != len(keylogFields) {
			t.Fatalf("tshark line %q", l)
		}
		rows = append(rows, c)
	}
	if len(rows) != want {
		t.Fatalf("tshark printed %d packets, the capture has %d", len(rows), want)
	}
	return rows, stderr.String()
}

func writeKeyLog(t *testing.T, path string, lines []string) {
	t.Helper()
	text := capture.KeyLogHeader + "\n" + strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitCounter waits (up to 10 s) until c() reaches n.
func waitCounter(t *testing.T, what string, c func() uint64, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", what, c(), n)
		}
	}
}

// TestDissectorDecryptsWithKeyLog: a capture of an NVMe exchange over a
// sealed fabric, with its key log, across a master-key rotation on both
// daemons. Every PSP datagram opens with the logged keys; tshark with the
// key log verifies every tag and decodes the inner Falcon and NVMe fields
// (type, CID, PSN, RSN, NVMe type) and the CM messages as the Go side
// reads them, and so it does with the key log's CM key alone (learning
// the SA offers the CM messages carry); without the key log it shows only
// the sealed view; a
// flipped byte is flagged as a tag failure, for a PSP datagram and a CM
// envelope alike.
func TestDissectorDecryptsWithKeyLog(t *testing.T) {
	tshark := needTool(t, "tshark")
	la, lb := freeUDPPort(t), freeUDPPort(t)
	store := startDaemon(t, storeConfig(lb, la, storage.NamespaceMemory, ""))
	host, s := startDaemonWithCaptureOpts(t, hostConfig(la, lb, ""),
		capture.Options{NIC: capture.AllNICs, Buffer: capture.MaxBuffer, KeyLog: true})
	host.logKeys(s, capture.AllNICs) // the CM key, and any connection already up
	r := remoteDisk(t, host)
	r.writeRead(0, 8, 7)
	for _, d := range []*testDaemon{host, store} {
		if _, err := d.rotateKeys(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Each side has the other's new SA before the traffic that follows.
	waitCounter(t, "host REKEYs received", host.cm.Stats.RekeyRecv.Load, 1)
	waitCounter(t, "store REKEYs received", store.cm.Stats.RekeyRecv.Load, 1)
	r.writeRead(64*8, 8, 8)
	recs, keys := drainKeys(s)
	kl := parseKeyLog(t, keys)
	if len(kl.cm) != 1 || len(kl.psp) < 4 {
		t.Fatalf("key log: %d CM keys, %d SPIs; want 1 and ≥ 4 (both directions, before and after the rotation):\n%s",
			len(kl.cm), len(kl.psp), strings.Join(keys, "\n"))
	}

	dir := t.TempDir()
	path, keyPath := filepath.Join(dir, "sealed.pcapng"), filepath.Join(dir, "keys.log")
	writePcap(t, path, recs)
	writeKeyLog(t, keyPath, keys)

	// What tshark must show, from the Go side's reading of the same bytes.
	want := make([]string, len(recs))
	spis := map[uint32]bool{}
	falcons, cms := 0, 0
	for i, rec := range recs {
		h, p, ok := fabric.Decode(rec.Data)
		if !ok {
			t.Fatalf("record %d is no fabric datagram", i)
		}
		switch h.Kind() {
		case fabric.KindFalcon:
			pkt := kl.openPSP(p)
			if pkt == nil {
				t.Fatalf("datagram %d: no key of the key log opens it", i+1)
			}
			spi, _ := psp.PeekSPI(p)
			spis[uint32(spi)] = true
			want[i] = fmt.Sprintf("2|0x%08x|1|%s|||", uint32(spi), innerRow(t, pkt))
			falcons++
		case fabric.KindCM:
			m := kl.openCM(p)
			if m == nil || len(m) < 6 {
				t.Fatalf("CM message %d: the key log's CM key does not open it", i+1)
			}
			want[i] = fmt.Sprintf("3||||||||%d|1|", m[5])
			cms++
		}
	}
	if falcons == 0 || cms == 0 || len(spis) < 4 {
		t.Fatalf("capture: %d Falcon datagrams under %d SPIs, %d CM messages; want some, ≥ 4 SPIs, some", falcons, len(spis), cms)
	}

	t.Logf("%d Falcon datagrams under %d SPIs, %d CM messages, %d key-log lines", falcons, len(spis), cms, len(keys))
	t.Run("with key log", func(t *testing.T) {
		rows, _ := tsharkKeyLog(t, tshark, path, keyPath, len(recs))
		for i, c := range rows {
			if want[i] == "" {
				continue
			}
			if got := strings.Join(c[:len(c)-1], "|"); got != want[i] {
				t.Errorf("packet %d: tshark %s, sent %s", i+1, got, want[i])
			}
			if strings.Contains(c[len(c)-1], "does not verify") {
				t.Errorf("packet %d: tag failure: %s", i+1, c[len(c)-1])
			}
		}
	})
	t.Run("CM key alone", func(t *testing.T) {
		// The capture saw the set-up and the REKEYs: the SA offers inside
		// the CM messages it decrypts key every datagram.
		var cmOnly []string
		for _, l := range keys {
			if strings.HasPrefix(l, "CMAUTH ") {
				cmOnly = append(cmOnly, l)
			}
		}
		cmPath := filepath.Join(dir, "cm.log")
		writeKeyLog(t, cmPath, cmOnly)
		rows, _ := tsharkKeyLog(t, tshark, path, cmPath, len(recs))
		for i, c := range rows {
			if want[i] != "" && strings.Join(c[:len(c)-1], "|") != want[i] {
				t.Errorf("packet %d: tshark %s, sent %s", i+1, strings.Join(c[:len(c)-1], "|"), want[i])
			}
		}
	})
	t.Run("without key log", func(t *testing.T) {
		rows, _ := tsharkKeyLog(t, tshark, path, "", len(recs))
		for i, c := range rows {
			if c[2] != "" || c[5] != "" || c[7] != "" || c[8] != "" || c[9] != "" {
				t.Errorf("packet %d decoded without the key log: %q", i+1, c)
			}
		}
	})
	t.Run("garbage key log", func(t *testing.T) {
		// Every valid line cut short, lines of random bytes, and lines
		// wrong in each field, around the valid lines: each is reported and
		// skipped, tshark does not fail, and the valid lines still decrypt.
		var lines []string
		for _, l := range keys {
			for _, n := range []int{1, 4, 9, len(l) / 3, len(l) / 2, len(l) - 12} {
				lines = append(lines, l[:n])
			}
		}
		rnd := rand.New(rand.NewPCG(20, 1))
		for i := 0; i < 200; i++ {
			b := make([]byte, rnd.IntN(120))
			for j := range b {
				b[j] = byte(rnd.IntN(256))
				if b[j] == '\n' || b[j] == '\r' {
					b[j] = ' '
				}
			}
			if i%2 == 0 && len(b) > 4 { // random words after a valid record type
				copy(b, []byte("PSP "))
			}
			lines = append(lines, string(b))
		}
		key16 := strings.Repeat("ab", 16)
		lines = append(lines,
			"PSP", "CMAUTH", "FOO 1 2 3",
			"PSP 00000000 rx aes-gcm-128 "+key16+" host",      // SPI 0
			"PSP 0000000g rx aes-gcm-128 "+key16+" host",      // not hex
			"PSP 00000001 up aes-gcm-128 "+key16+" host",      // direction
			"PSP 00000001 rx aes-gcm-512 "+key16+" host",      // algorithm
			"PSP 00000001 rx aes-gcm-256 "+key16+" host",      // key length
			"PSP 00000001 rx aes-gcm-128 "+key16+"x host",     // odd hex
			"PSP 00000001 rx aes-gcm-128 "+key16+" host more", // fields
			"CMAUTH fp aes-128-gcm "+key16,
			"CMAUTH fp aes-256-gcm "+key16,
			strings.Repeat("P", 1<<16))
		lines = append(lines, keys...)
		badKeys := filepath.Join(dir, "garbage.log")
		writeKeyLog(t, badKeys, lines)
		rows, stderr := tsharkKeyLog(t, tshark, path, badKeys, len(recs))
		if !strings.Contains(stderr, "key log") || !strings.Contains(stderr, "problem(s)") {
			t.Errorf("tshark's stderr does not report the key log's bad lines: %q", stderr)
		}
		noted := 0
		for i, c := range rows {
			if strings.Contains(c[11], "problem(s)") {
				noted++
			}
			if want[i] != "" && strings.Join(c[:len(c)-1], "|") != want[i] {
				t.Errorf("packet %d: tshark %s, sent %s", i+1, strings.Join(c[:len(c)-1], "|"), want[i])
			}
		}
		if noted != 1 {
			t.Errorf("%d packets carry the key log's problems as expert info, want 1 (the first sealed one)", noted)
		}
		// A key log that is not there: reported, the sealed view shown.
		rows, stderr = tsharkKeyLog(t, tshark, path, filepath.Join(dir, "missing.log"), len(recs))
		if !strings.Contains(stderr, "cannot open") {
			t.Errorf("tshark's stderr does not report the missing key log: %q", stderr)
		}
		for i, c := range rows {
			if c[5] != "" || c[2] == "1" {
				t.Errorf("packet %d decoded without keys: %q", i+1, c)
			}
		}
	})
	t.Run("cut datagrams", func(t *testing.T) {
		// Sealed datagrams and envelopes cut at every few bytes (the fabric
		// header's length kept consistent, so they reach the PSP and CM
		// dissectors): tshark with the key log verifies no tag and raises no
		// Lua error.
		var cut []capture.Record
		for _, rec := range recs[:min(len(recs), 12)] {
			for n := 12; n < len(rec.Data); n += 5 {
				c := rec
				c.Data = append([]byte(nil), rec.Data[:n]...)
				binary.BigEndian.PutUint16(c.Data[8:], uint16(n-12))
				c.Len = n
				cut = append(cut, c)
			}
		}
		cutPath := filepath.Join(dir, "cut.pcapng")
		writePcap(t, cutPath, cut)
		rows, _ := tsharkKeyLog(t, tshark, cutPath, keyPath, len(cut))
		for i, c := range rows {
			if c[2] == "1" || c[9] == "1" {
				t.Errorf("cut packet %d: a tag verified: %q", i+1, c)
			}
		}
	})
	t.Run("flipped byte", func(t *testing.T) {
		bad := append([]capture.Record(nil), recs...)
		flipped := map[int]bool{}
		for i, rec := range bad {
			h, _, _ := fabric.Decode(rec.Data)
			k := h.Kind()
			if (k == fabric.KindFalcon || k == fabric.KindCM) && !flipped[-int(k)] {
				flipped[-int(k)], flipped[i] = true, true
				d := append([]byte(nil), rec.Data...)
				d[len(d)-20] ^= 0x01 // in the ciphertext
				bad[i].Data = d
			}
		}
		badPath := filepath.Join(dir, "flipped.pcapng")
		writePcap(t, badPath, bad)
		rows, _ := tsharkKeyLog(t, tshark, badPath, keyPath, len(bad))
		failures := 0
		for i, c := range rows {
			tagOK := c[2] + c[9]
			switch {
			case want[i] == "":
			case flipped[i]:
				if tagOK != "0" || !strings.Contains(c[11], "does not verify") || c[3] != "" && c[2] == "0" {
					t.Errorf("packet %d (flipped): tag ok %q, expert %q, type %q", i+1, tagOK, c[11], c[3])
				}
				failures++
			case tagOK != "1":
				t.Errorf("packet %d: tag ok %q", i+1, tagOK)
			}
		}
		if failures != 2 {
			t.Errorf("%d tag failures flagged, want 2", failures)
		}
	})
}

// gcmVectors are published vectors: FIPS-197 Appendix C.1 and C.3 (AES),
// and the AES-GCM test cases 1-4 and 13-14 of McGrew and Viega, "The
// Galois/Counter Mode of Operation (GCM)" (the vectors of NIST's GCM
// submission): key, IV, additional data, plaintext, ciphertext, tag.
var gcmVectors = [][6]string{
	{"00000000000000000000000000000000", "000000000000000000000000", "", "", "", "58e2fccefa7e3061367f1d57a4e7455a"},
	{"00000000000000000000000000000000", "000000000000000000000000", "", "00000000000000000000000000000000",
		"0388dace60b6a392f328c2b971b2fe78", "ab6e47d42cec13bdf53a67b21257bddf"},
	{"feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888", "",
		"d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
		"42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
		"4d5c2af327cd64a62cf35abd2ba6fab4"},
	{"feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888", "feedfacedeadbeeffeedfacedeadbeefabaddad2",
		"d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
		"42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
		"5bc94fbc3221a5db94fae95ae7121a47"},
	{"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "", "", "",
		"530f8afbc74536b9a963b4f1c4cb738b"},
	{"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "",
		"00000000000000000000000000000000", "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"},
}

var aesVectors = [][3]string{
	{"000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff", "69c4e0d86a7b0430d8cdb78070b4c55a"},
	{"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "00112233445566778899aabbccddeeff",
		"8ea2b7ca516745bfeafc49904b496089"},
}

func dashed(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	return hex.EncodeToString(b)
}

// TestDissectorGCMMatchesGo: falcon_gcm.lua, run in tshark's Lua, agrees
// with the published AES and AES-GCM vectors, with Go's crypto/cipher over
// random keys, IVs, additional data and lengths around the block size, and
// opens datagrams sealed by package psp (both PSP versions); it refuses
// each vector with a flipped tag, ciphertext byte, additional-data byte or
// IV byte.
func TestDissectorGCMMatchesGo(t *testing.T) {
	tshark := needTool(t, "tshark")
	var lines []string
	for _, v := range aesVectors {
		lines = append(lines, "aes "+v[0]+" "+v[1]+" "+v[2])
	}
	for i, v := range gcmVectors {
		// The published vectors are checked against Go too, so a typo here
		// cannot hide behind the Lua.
		key, _ := hex.DecodeString(v[0])
		iv, _ := hex.DecodeString(v[1])
		aad, _ := hex.DecodeString(v[2])
		pt, _ := hex.DecodeString(v[3])
		blk, _ := aes.NewCipher(key)
		a, _ := cipher.NewGCM(blk)
		if got := hex.EncodeToString(a.Seal(nil, iv, pt, aad)); got != v[4]+v[5] {
			t.Fatalf("published vector %d: Go seals %s", i, got)
		}
		lines = append(lines, strings.Join([]string{v[0], v[1], dashed(aad), dashed(pt), dashedHex(v[4]), v[5]}, " "))
	}
	rnd := rand.New(rand.NewPCG(18, 20))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.IntN(256))
		}
		return b
	}
	for i, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 1000, 4096} {
		for _, keyLen := range []int{16, 32} {
			key, iv, aad, pt := random(keyLen), random(12), random((i*7)%41), random(n)
			blk, _ := aes.NewCipher(key)
			a, _ := cipher.NewGCM(blk)
			sealed := a.Seal(nil, iv, pt, aad)
			ct, tag := sealed[:n], sealed[n:]
			lines = append(lines, strings.Join([]string{hex.EncodeToString(key), hex.EncodeToString(iv), dashed(aad), dashed(pt),
				dashed(ct), hex.EncodeToString(tag)}, " "))
		}
	}
	// Datagrams sealed by package psp: nonce SPI || IV, additional data the
	// header and the clear word (psp/header.go).
	for _, v := range []psp.Version{psp.AESGCM128, psp.AESGCM256} {
		key := random(v.KeyLen())
		tx, err := psp.NewTxSA(v, 0x8000_1234, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{32, 61, 4096 + 32} {
			pkt := random(n)
			d, err := tx.Seal(make([]byte, 0, n+psp.Overhead), pkt, 0x01020304)
			if err != nil {
				t.Fatal(err)
			}
			const clearEnd = psp.HeaderLen + psp.CryptOffset
			lines = append(lines, strings.Join([]string{hex.EncodeToString(key), hex.EncodeToString(d[4:psp.HeaderLen]),
				hex.EncodeToString(d[:clearEnd]), hex.EncodeToString(pkt[psp.CryptOffset:]),
				hex.EncodeToString(d[clearEnd : len(d)-psp.ICVLen]), hex.EncodeToString(d[len(d)-psp.ICVLen:])}, " "))
		}
	}
	dir := t.TempDir()
	vectors, empty := filepath.Join(dir, "vectors.txt"), filepath.Join(dir, "empty.pcapng")
	if err := os.WriteFile(vectors, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writePcap(t, empty, nil)
	gcmLua, _ := filepath.Abs(filepath.Join(filepath.Dir(dissector), "falcon_gcm.lua"))
	out, err := exec.Command(tshark, "-X", "lua_script:testdata/falcon_gcm_test.lua", "-X", "lua_script1:"+gcmLua,
		"-X", "lua_script1:"+vectors, "-r", empty).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	want := fmt.Sprintf("falcon_gcm: %d vectors passed", len(lines))
	if !bytes.Contains(out, []byte(want)) || bytes.Contains(out, []byte("FAIL")) || bytes.Contains(out, []byte("Lua")) {
		t.Errorf("tshark printed:\n%s\nwant %q", out, want)
	}
}

func dashedHex(h string) string {
	if h == "" {
		return "-"
	}
	return h
}

// TestKeyLogListsConnectionsUpBeforeTheCapture: a capture started over
// the control socket's method with "keylog" after the connection is up —
// and after a rotation, so its receive SA holds a current and a previous
// SPI — gets the CM key and the keys of that connection at once, and they
// open every datagram it then records. A capture without "keylog" gets no
// key.
func TestKeyLogListsConnectionsUpBeforeTheCapture(t *testing.T) {
	la, lb := freeUDPPort(t), freeUDPPort(t)
	startDaemon(t, storeConfig(lb, la, storage.NamespaceMemory, ""))
	host := startDaemon(t, hostConfig(la, lb, ""))
	r := remoteDisk(t, host)
	r.writeRead(0, 4, 1)
	if _, err := host.rotateKeys(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	start := func(params string) *capture.Session {
		res, err := host.captureMethods()["capture.start"](context.Background(), json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		s, err := host.capture.Session(res.(CaptureStarted).ID)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plain := start(`{}`)
	s := start(`{"keylog": true, "nic": "host"}`)
	r.writeRead(64*8, 4, 2)
	recs, keys := drainKeys(s)
	kl := parseKeyLog(t, keys)
	// rx: the current and previous SPI; tx: the peer's SPI.
	if len(kl.cm) != 1 || len(kl.psp) < 3 {
		t.Errorf("key log: %d CM keys, %d SPIs; want 1 and ≥ 3:\n%s", len(kl.cm), len(kl.psp), strings.Join(keys, "\n"))
	}
	n := 0
	for i, rec := range recs {
		if h, p, ok := fabric.Decode(rec.Data); ok && h.Kind() == fabric.KindFalcon {
			n++
			if kl.openPSP(p) == nil {
				t.Errorf("datagram %d: no logged key opens it", i+1)
			}
		}
	}
	if n == 0 {
		t.Error("no Falcon datagram captured")
	}
	if _, k := drainKeys(plain); len(k) != 0 {
		t.Errorf("a capture without a key log got %d keys", len(k))
	}
}
