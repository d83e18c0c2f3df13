package psp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

// pair returns a receiving NIC's keys, an RxSA for spi and the peer's
// TxSA holding the key the receiver derived for it.
func pair(t testing.TB, v Version, index uint32) (*MasterKeys, *RxSA, *TxSA) {
	t.Helper()
	m := goldenKeys(t, 0)
	spi := m.NewSPI(index)
	rx, err := NewRxSA(m, v, spi, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := m.Derive(nil, spi, v)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := NewTxSA(v, spi, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, rx, tx
}

// falconPkt returns a packet whose first word names cid and whose body
// is n bytes of pattern.
func falconPkt(cid uint32, n int, pattern byte) []byte {
	p := make([]byte, 4+n)
	binary.BigEndian.PutUint32(p, 1<<28|cid)
	for i := range n {
		p[4+i] = pattern + byte(i)
	}
	return p
}

func seal(t testing.TB, tx *TxSA, pkt []byte, ts uint32) []byte {
	t.Helper()
	d, err := tx.Seal(make([]byte, 0, len(pkt)+Overhead), pkt, ts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSealOpenRoundTrip(t *testing.T) {
	for _, v := range []Version{AESGCM128, AESGCM256} {
		_, rx, tx := pair(t, v, 7)
		for _, n := range []int{0, 1, 20, 4096, 9000} {
			pkt := falconPkt(0xabcdef, n, byte(n))
			d := seal(t, tx, pkt, 99)
			clearPart, ok := PeekClear(d)
			if !ok || !bytes.Equal(clearPart, pkt[:CryptOffset]) {
				t.Fatalf("clear bytes %x, want %x", clearPart, pkt[:CryptOffset])
			}
			if n > 8 && bytes.Contains(d, pkt[8:]) {
				t.Fatalf("%v n=%d: plaintext visible in the datagram", v, n)
			}
			got, iv, drop := rx.Open(d)
			if drop != dropNone || !bytes.Equal(got, pkt) || iv.Timestamp() != 99 {
				t.Fatalf("%v n=%d: open: %v, iv %x", v, n, drop, iv)
			}
		}
	}
}

// TestSealInPlace seals a packet laid out at dst[HeaderLen:].
func TestSealInPlace(t *testing.T) {
	_, rx, tx := pair(t, AESGCM128, 1)
	pkt := falconPkt(5, 100, 1)
	buf := make([]byte, len(pkt)+Overhead)
	copy(buf[HeaderLen:], pkt)
	d, err := tx.Seal(buf[:0], buf[HeaderLen:HeaderLen+len(pkt)], 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _, drop := rx.Open(d)
	if drop != dropNone || !bytes.Equal(got, pkt) {
		t.Fatalf("in place: %v", drop)
	}
}

func TestSealRefusesBadBuffers(t *testing.T) {
	_, _, tx := pair(t, AESGCM128, 1)
	pkt := falconPkt(5, 100, 1)
	if _, err := tx.Seal(make([]byte, 0, len(pkt)+Overhead-1), pkt, 0); !errors.Is(err, ErrBuffer) {
		t.Errorf("small dst: %v", err)
	}
	buf := make([]byte, 2*len(pkt)+Overhead)
	copy(buf[HeaderLen+1:], pkt)
	if _, err := tx.Seal(buf[:0], buf[HeaderLen+1:HeaderLen+1+len(pkt)], 0); !errors.Is(err, ErrBuffer) {
		t.Errorf("inexact overlap: %v", err)
	}
	if _, err := tx.Seal(buf[:0], pkt[:3], 0); !errors.Is(err, ErrShortPacket) {
		t.Errorf("3-byte packet: %v", err)
	}
	if tx.stats.BadBuffer.Load() != 3 || tx.stats.Sealed.Load() != 0 {
		t.Errorf("counters: bad %d sealed %d", tx.stats.BadBuffer.Load(), tx.stats.Sealed.Load())
	}
}

// TestSealSeqExhausted: a TxSA never reuses a nonce; it refuses once its
// SPI's sequence numbers are used up, until rekeyed.
func TestSealSeqExhausted(t *testing.T) {
	m, _, tx := pair(t, AESGCM128, 1)
	tx.seq = 1<<32 - 2
	pkt := falconPkt(5, 10, 1)
	seal(t, tx, pkt, 0)
	if _, err := tx.Seal(make([]byte, 0, 100), pkt, 0); !errors.Is(err, ErrSeqExhausted) {
		t.Fatalf("after the last sequence number: %v", err)
	}
	spi := m.NewSPI(2)
	key, _, _ := m.Derive(nil, spi, AESGCM128)
	if err := tx.Rekey(spi, key); err != nil {
		t.Fatal(err)
	}
	if d := seal(t, tx, pkt, 0); Header(d).IV().Seq() != 1 {
		t.Fatalf("after rekey: seq %d", Header(d).IV().Seq())
	}
}

// TestOpenHeaderChecks: each malformed header field has its own cause.
func TestOpenHeaderChecks(t *testing.T) {
	_, rx, tx := pair(t, AESGCM128, 1)
	good := seal(t, tx, falconPkt(5, 40, 1), 0)
	for _, c := range []struct {
		name string
		mut  func(b []byte) []byte
		want Drop
	}{
		{"short", func(b []byte) []byte { return b[:MinDatagram-1] }, DropShort},
		{"next header", func(b []byte) []byte { b[0] = 17; return b }, DropNextHeader},
		{"ext len", func(b []byte) []byte { b[1] = 2; return b }, DropExtLen},
		{"crypt offset", func(b []byte) []byte { b[2] = 2; return b }, DropCryptOffset},
		{"R bits", func(b []byte) []byte { b[2] |= 0x40; return b }, DropFlags},
		{"V bit", func(b []byte) []byte { b[3] |= 0x02; return b }, DropFlags},
		{"S bit", func(b []byte) []byte { b[3] |= 0x80; return b }, DropFlags},
		{"always-one clear", func(b []byte) []byte { b[3] &^= 1; return b }, DropFlags},
		{"version", func(b []byte) []byte { b[3] = 1<<2 | 1; return b }, DropVersion},
		{"unknown SPI", func(b []byte) []byte { b[7] ^= 0x10; return b }, DropUnknownSPI},
		{"SPI zero", func(b []byte) []byte { clear(b[4:8]); return b }, DropUnknownSPI},
		{"IV", func(b []byte) []byte { b[12] ^= 1; return b }, DropAuth},
		{"clear bytes", func(b []byte) []byte { b[HeaderLen+3] ^= 1; return b }, DropAuth},
		{"ciphertext", func(b []byte) []byte { b[HeaderLen+10] ^= 1; return b }, DropAuth},
		{"tag", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, DropAuth},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, DropAuth},
	} {
		if _, _, d := rx.Open(c.mut(bytes.Clone(good))); d != c.want {
			t.Errorf("%s: %v, want %v", c.name, d, c.want)
		}
		if rx.stats.Rx[c.want].Load() == 0 {
			t.Errorf("%s: %v not counted", c.name, c.want)
		}
	}
	if _, _, d := rx.Open(bytes.Clone(good)); d != dropNone {
		t.Fatalf("good datagram after the bad ones: %v", d)
	}
}

// TestReplayCheckedAfterTag: a replayed datagram is dropped; a forged one
// with a far-ahead sequence number fails its tag and does not move the
// window, so later genuine datagrams still open.
func TestReplayCheckedAfterTag(t *testing.T) {
	_, rx, tx := pair(t, AESGCM128, 1)
	d1 := seal(t, tx, falconPkt(5, 40, 1), 10)
	keep := bytes.Clone(d1)
	if _, _, d := rx.Open(d1); d != dropNone {
		t.Fatal(d)
	}
	if _, _, d := rx.Open(bytes.Clone(keep)); d != DropReplay {
		t.Fatalf("replay: %v", d)
	}
	forged := bytes.Clone(keep)
	binary.BigEndian.PutUint64(forged[8:], uint64(MakeIV(1<<30, 1<<31)))
	if _, _, d := rx.Open(forged); d != DropAuth {
		t.Fatalf("forged IV: %v", d)
	}
	for i := range 10 {
		if _, _, d := rx.Open(seal(t, tx, falconPkt(5, 40, byte(i)), 11)); d != dropNone {
			t.Fatalf("genuine datagram %d after the forgery: %v", i, d)
		}
	}
}

// TestReplayWindowReorder: datagrams reordered within the window open
// once each; one behind it is too old.
func TestReplayWindowReorder(t *testing.T) {
	_, rx, tx := pair(t, AESGCM128, 1)
	const n = ReplayWindow + 100
	ds := make([][]byte, n)
	for i := range ds {
		ds[i] = seal(t, tx, falconPkt(5, 8, byte(i)), uint32(i))
	}
	// Deliver 1..n-1 in reverse blocks of 64, then the first one.
	for hi := n; hi > 1; hi -= 64 {
		lo := max(hi-64, 1)
		for i := hi - 1; i >= lo; i-- {
			if _, _, d := rx.Open(bytes.Clone(ds[i])); d != dropNone && !(d == DropTooOld && n-1-i >= ReplayWindow) {
				t.Fatalf("datagram %d: %v", i, d)
			}
		}
	}
	if _, _, d := rx.Open(bytes.Clone(ds[0])); d != DropTooOld {
		t.Fatalf("datagram 0, %d behind: %v", n-1, d)
	}
	if _, _, d := rx.Open(bytes.Clone(ds[n-1])); d != DropReplay {
		t.Fatalf("newest again: %v", d)
	}
}

func TestReplayWindowWords(t *testing.T) {
	var w replay
	for _, s := range []uint32{1, 2, 64, 65, 2000, 1985, 4000, 4000 - ReplayWindow + 1} {
		if d := w.check(s); d != dropNone {
			t.Fatalf("seq %d: %v", s, d)
		}
		w.mark(s)
	}
	for _, c := range []struct {
		seq  uint32
		want Drop
	}{{4000, DropReplay}, {4000 - ReplayWindow + 1, DropReplay}, {4000 - ReplayWindow, DropTooOld}, {3999, dropNone}, {2018, dropNone}, {0, DropTooOld}} {
		if d := w.check(c.seq); d != c.want {
			t.Errorf("seq %d: %v, want %v", c.seq, d, c.want)
		}
	}
}

func TestDropTableComplete(t *testing.T) {
	seen := map[string]bool{}
	for d := range numDrops {
		r := drops[d]
		if r.name == "" || r.help == "" || seen[r.name] {
			t.Errorf("drop %d: row %+v", d, r)
		}
		seen[r.name] = true
	}
	var c Counters
	if got := len(c.Set()); got != int(numDrops)+3 {
		t.Errorf("counter set has %d rows", got)
	}
}

func TestMasterKeyErrors(t *testing.T) {
	if _, err := NewMasterKeys([MasterKeyLen]byte{}); !errors.Is(err, ErrZeroKey) {
		t.Errorf("zero master key: %v", err)
	}
	m := goldenKeys(t, 0)
	if _, _, err := m.Derive(nil, 0x80000001, AESGCM128); !errors.Is(err, ErrNoKey) {
		t.Errorf("empty slot: %v", err)
	}
	if _, _, err := m.Derive(nil, 1, Version(3)); !errors.Is(err, ErrVersion) {
		t.Errorf("version 3: %v", err)
	}
	if _, err := NewRxSA(m, AESGCM128, 0, nil); !errors.Is(err, ErrZeroSPI) {
		t.Errorf("SPI 0: %v", err)
	}
	if _, err := NewTxSA(AESGCM256, 1, make([]byte, 16), nil); !errors.Is(err, ErrKeyLen) {
		t.Errorf("short key: %v", err)
	}
}

// TestSAMemory reports what one connection's SAs hold (both halves, an
// RxSA with a previous SPI too) and bounds it.
func TestSAMemory(t *testing.T) {
	m := goldenKeys(t, 0)
	key, _, _ := m.Derive(nil, 5, AESGCM128)
	const n = 200
	keep := make([]any, 0, 2*n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		rx, _ := NewRxSA(m, AESGCM128, m.NewSPI(uint32(i+1)), nil)
		_ = rx.Rekey(m.NewSPI(uint32(i + 1000)))
		tx, _ := NewTxSA(AESGCM128, 5, key, nil)
		keep = append(keep, rx, tx)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes per connection (RxSA with two SPIs, TxSA)", per)
	if per > 8<<10 {
		t.Fatalf("%d bytes per connection", per)
	}
	runtime.KeepAlive(keep)
}

// TestSealOpenDoNotAllocate: the per-datagram path allocates nothing
// (caller buffers, keys derived at install).
func TestSealOpenDoNotAllocate(t *testing.T) {
	_, rx, tx := pair(t, AESGCM128, 1)
	pkt := falconPkt(3, 4092, 0)
	dst := make([]byte, 0, len(pkt)+Overhead)
	buf := make([]byte, len(pkt)+Overhead)
	if n := testing.AllocsPerRun(100, func() {
		d, err := tx.Seal(dst, pkt, 1)
		if err != nil {
			t.Fatal(err)
		}
		copy(buf, d)
		if _, _, drop := rx.Open(buf); drop != dropNone {
			t.Fatal(drop)
		}
		_, _, _ = rx.Open(buf[:10]) // a refusal allocates nothing either
	}); n != 0 {
		t.Fatalf("%v allocations per seal and open", n)
	}
}
