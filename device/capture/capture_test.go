package capture

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"falconnic/internal/clock"
)

var (
	a = netip.MustParseAddrPort("127.0.0.1:1")
	b = netip.MustParseAddrPort("127.0.0.1:2")
)

// now reads without waiting.
func now(s *Session) Batch {
	c := make(chan time.Time)
	close(c)
	return s.Read(1<<20, c)
}

func TestSessionTakesItsNICsPackets(t *testing.T) {
	h := NewHub(clock.NewManual(0))
	if h.Active() {
		t.Fatal("active without a session")
	}
	one, _ := h.Start(Options{NIC: 1})
	all, _ := h.Start(Options{NIC: AllNICs})
	h.Report(NIC(1)|Wire, PortLink, Out, a, b, 0, []byte("out of 1"))
	h.Report(NIC(2), PortLink, In, a, b, 0, []byte("into 2"))
	h.Report(NIC(1), PortLink, In, b, a, 0, []byte("into 1"))
	h.Report(Wire, Fabric, In, b, a, 0, []byte("nobody's"))
	h.Report(EveryNIC|Wire, Fabric, In, b, a, 0, []byte("broadcast"))
	var got []string
	for _, r := range now(one).Records {
		got = append(got, string(r.Data))
	}
	if want := "out of 1|into 1|broadcast"; joined(got) != want {
		t.Errorf("NIC 1's session: %s, want %s", joined(got), want)
	}
	got = nil
	for _, r := range now(all).Records {
		got = append(got, string(r.Data))
	}
	if want := "out of 1|nobody's|broadcast"; joined(got) != want {
		t.Errorf("every NIC's session: %s, want %s", joined(got), want)
	}
}

func joined(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(x)
	}
	return b.String()
}

func TestSessionBoundsAndCounts(t *testing.T) {
	clk := clock.NewManual(0)
	h := NewHub(clk)
	s, _ := h.Start(Options{NIC: AllNICs, Buffer: 100, Snap: 40})
	pkt := bytes.Repeat([]byte{1}, 50)
	for range 4 {
		h.Report(Wire, Fabric, Out, a, b, 0, pkt) // cut to 40: two fit in 100 bytes
	}
	batch := now(s)
	if len(batch.Records) != 2 || batch.Dropped != 2 || batch.Truncated != 4 || batch.Records[0].Len != 50 || len(batch.Records[0].Data) != 40 {
		t.Errorf("records %d, dropped %d, truncated %d", len(batch.Records), batch.Dropped, batch.Truncated)
	}
	if h.Stats.DroppedFull.Load() != 2 || h.Stats.Truncated.Load() != 4 || h.Stats.Captured.Load() != 2 {
		t.Errorf("hub counters %v", h.Stats.Set().Snapshot())
	}
	// Read emptied the buffer: room again.
	h.Report(Wire, Fabric, Out, a, b, 0, pkt)
	if n := len(now(s).Records); n != 1 {
		t.Errorf("%d records after the buffer drained", n)
	}
	// A client that stops reading: the session ends at the next packet.
	clk.Advance(IdleTimeout + time.Second)
	h.Report(Wire, Fabric, Out, a, b, 0, pkt)
	if h.Active() || h.Stats.Abandoned.Load() != 1 {
		t.Errorf("abandoned session still running (abandoned %d)", h.Stats.Abandoned.Load())
	}
	if _, err := h.Session(s.ID()); !errors.Is(err, ErrNoSession) {
		t.Errorf("Session after abandon: %v", err)
	}
}

func TestSessionCountEndsIt(t *testing.T) {
	h := NewHub(clock.NewManual(0))
	s, _ := h.Start(Options{NIC: AllNICs, Count: 2})
	for range 3 {
		h.Report(Wire, Fabric, Out, a, b, 0, []byte{1})
	}
	if got := now(s); len(got.Records) != 2 || !got.Done {
		t.Errorf("%d records, done %v", len(got.Records), got.Done)
	}
}

func TestHubRefusesPastMaxSessions(t *testing.T) {
	h := NewHub(clock.NewManual(0))
	for range MaxSessions {
		if _, err := h.Start(Options{NIC: AllNICs}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Start(Options{NIC: AllNICs}); !errors.Is(err, ErrTooMany) || h.Stats.Refused.Load() != 1 {
		t.Errorf("session %d: %v", MaxSessions+1, err)
	}
	if err := h.Stop(1); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Start(Options{NIC: AllNICs}); err != nil {
		t.Errorf("after a stop: %v", err)
	}
}

// TestReadWaitsForAPacket: a read with nothing buffered returns when a
// packet arrives (bounded: the test would hang only on a bug).
func TestReadWaitsForAPacket(t *testing.T) {
	h := NewHub(clock.NewManual(0))
	s, _ := h.Start(Options{NIC: AllNICs})
	got := make(chan Batch)
	go func() { got <- s.Read(1<<20, time.After(time.Minute)) }()
	h.Report(Wire, Fabric, Out, a, b, 0, []byte("x"))
	if r := <-got; len(r.Records) != 1 {
		t.Errorf("read returned %d records", len(r.Records))
	}
}
