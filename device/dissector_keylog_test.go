package device

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
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
// reads them; without the key log it shows only the sealed view; a
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
