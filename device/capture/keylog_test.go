package capture

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"falconnic/internal/clock"
)

// TestKeysGoOnlyToSessionsThatAskForThem: key-log lines reach the
// sessions with KeyLog that select the key's NIC, once each, in the
// batches their reader takes (without any packet); the hub reports a key
// log as wanted only while such a session runs.
func TestKeysGoOnlyToSessionsThatAskForThem(t *testing.T) {
	h := NewHub(clock.NewManual(0))
	plain, _ := h.Start(Options{NIC: AllNICs})
	if h.KeyLogActive() {
		t.Fatal("a key log is wanted, but no session asked for one")
	}
	one, _ := h.Start(Options{NIC: 1, KeyLog: true})
	all, _ := h.Start(Options{NIC: AllNICs, KeyLog: true})
	if !h.KeyLogActive() {
		t.Fatal("no key log wanted")
	}
	h.ReportKey(NIC(1), "k1")
	h.ReportKey(NIC(2), "k2")
	h.ReportKey(NIC(1), "k1") // again: not repeated
	h.ReportKey(0, "nobody's")
	for _, c := range []struct {
		s    *Session
		want string
	}{{plain, ""}, {one, "k1"}, {all, "k1|k2|nobody's"}} {
		b := now(c.s)
		if got := joined(b.Keys); got != c.want || len(b.Records) != 0 {
			t.Errorf("session %d: keys %q, %d packets; want %q, 0", c.s.ID(), got, len(b.Records), c.want)
		}
	}
	if got := h.Stats.KeysLogged.Load(); got != 4 {
		t.Errorf("keys_logged %d, want 4", got)
	}
	h.Stop(one.ID())
	if !h.KeyLogActive() {
		t.Fatal("a key-log session still runs")
	}
	h.Stop(all.ID())
	if h.KeyLogActive() {
		t.Fatal("a key log is wanted after its sessions stopped")
	}
}

// TestKeysWakeAWaitingReader: a reader waiting for packets returns with a
// key-log line as soon as one arrives.
func TestKeysWakeAWaitingReader(t *testing.T) {
	h := NewHub(clock.NewManual(0))
	s, _ := h.Start(Options{NIC: AllNICs, KeyLog: true})
	got := make(chan Batch)
	go func() { got <- s.Read(1<<20, nil) }() // waits for a packet or a key
	h.ReportKey(NIC(0), "k")
	select {
	case b := <-got:
		if joined(b.Keys) != "k" {
			t.Errorf("keys %q", b.Keys)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not wake for a key")
	}
}

// TestSessionKeysAreBounded: past MaxKeyLines distinct lines a session
// drops keys and counts them (keys_dropped).
func TestSessionKeysAreBounded(t *testing.T) {
	h := NewHub(clock.NewManual(0))
	s, _ := h.Start(Options{NIC: AllNICs, KeyLog: true})
	for i := 0; i < MaxKeyLines+3; i++ {
		h.ReportKey(NIC(0), "k"+strconv.Itoa(i))
	}
	if n := len(now(s).Keys); n != MaxKeyLines {
		t.Errorf("%d keys buffered, want %d", n, MaxKeyLines)
	}
	if d := h.Stats.KeysDropped.Load(); d != 3 {
		t.Errorf("keys_dropped %d, want 3", d)
	}
}

// TestKeyLogLines: the lines' format (keylog.go).
func TestKeyLogLines(t *testing.T) {
	key := []byte{0, 1, 2, 0xab, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff}
	if got, want := PSPKeyLine(0x8000002a, "rx", "aes-gcm-128", key, "host 1"),
		"PSP 8000002a rx aes-gcm-128 000102ab0405060708090a0b0c0d0eff host_1"; got != want {
		t.Errorf("PSP line %q, want %q", got, want)
	}
	if got := PSPKeyLine(1, "tx", "aes-gcm-128", key, ""); !strings.HasPrefix(got, "PSP 00000001 tx ") || !strings.HasSuffix(got, " -") {
		t.Errorf("PSP line %q", got)
	}
	if got, want := CMAuthKeyLine("f00d", key), "CMAUTH f00d aes-256-gcm 000102ab0405060708090a0b0c0d0eff"; got != want {
		t.Errorf("CMAUTH line %q, want %q", got, want)
	}
}
