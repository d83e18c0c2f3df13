package device

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"falconnic/device/fabric"
	"falconnic/device/storage"
	"falconnic/internal/clock"
)

// pumpClock moves clk forward a millisecond per millisecond of real time
// until the test ends, so the daemons' Falcon and disk timers run while
// the test owns the larger steps (Advance). What the tests assert is
// counted per step they take, never timed.
func pumpClock(t *testing.T, clk *clock.Manual) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				clk.Advance(time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() { close(done); wg.Wait() })
}

// rotatingPair is securePair on one manual clock, both daemons with
// fabric.rotate_every (extra is added to both fabric sections).
func rotatingPair(t *testing.T, extra string) (store, host *testDaemon, r *diskDriver, clk *clock.Manual) {
	clk = clock.NewManual(time.Second)
	pumpClock(t, clk)
	la, lb := freeUDPPort(t), freeUDPPort(t)
	opts := DaemonOptions{Clock: clk}
	store = startDaemonOpts(t, storeConfig(lb, la, storage.NamespaceMemory, extra), opts)
	host = startDaemonOpts(t, hostConfig(la, lb, extra), opts)
	r = remoteDisk(t, host)
	r.writeRead(0, 8, 1)
	return store, host, r, clk
}

// TestFabricRotatesKeysEveryPeriod (fabric.rotate_every): after each of
// k periods on the daemons' clock each daemon has rotated once more —
// through rotate_keys' path: a new generation, every connection rekeyed
// and confirmed — and verified disk I/O between rounds loses nothing;
// status shows the period and the count.
func TestFabricRotatesKeysEveryPeriod(t *testing.T) {
	const period = 10 * time.Minute
	store, host, r, clk := rotatingPair(t, `, "rotate_every": "10m"`)
	both := []*testDaemon{store, host}
	const k = 3
	for round := 1; round <= k; round++ {
		clk.Advance(period)
		for _, d := range both {
			waitFor(t, "the period's rotation, confirmed", func() bool {
				return d.sec.rotations.Load() == uint64(round) && d.cm.Stats.RekeyConfirmed.Load() == uint64(round)
			})
		}
		r.writeRead(uint64(round)*1024, 16, byte(round))
	}
	for _, d := range both {
		st := d.status(t).Security
		if st == nil || st.RotateEvery != period.String() || st.Rotations != k || st.RotationsDeferred != 0 || st.RotationsFailed != 0 {
			t.Fatalf("status security %+v", st)
		}
		if len(st.NICs) != 1 || st.NICs[0].Generation != k+1 || st.NICs[0].RekeysPending != 0 || st.NICs[0].RekeysFailed != 0 {
			t.Fatalf("status NICs %+v", st.NICs)
		}
		for _, drop := range []string{"psp_rx_auth_failed", "psp_rx_unknown_spi", "psp_rx_stale_generation", "psp_rx_replay"} {
			if n := d.nicPSP(drop); n != 0 {
				t.Errorf("%s = %d across rotations", drop, n)
			}
		}
		if d.cm.Stats.Replaced.Load() != 0 || d.cm.Stats.RekeyFailed.Load() != 0 {
			t.Errorf("cm %v", d.cm.Stats.Set().NonZero())
		}
	}
}

// TestFabricRotationOff: "rotate_every": "off" rotates nothing however
// long the daemons run, and status says so; fabric.rotate_keys still
// works.
func TestFabricRotationOff(t *testing.T) {
	store, _, r, clk := rotatingPair(t, `, "rotate_every": "off"`)
	clk.Advance(48 * time.Hour)
	r.writeRead(64, 8, 7)
	st := store.status(t).Security
	if st.RotateEvery != "off" || st.Rotations != 0 || st.NICs[0].Generation != 1 {
		t.Fatalf("status security %+v", st)
	}
	if _, err := store.rotateKeys(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if st := store.status(t).Security; st.Rotations != 1 || st.NICs[0].Generation != 2 {
		t.Fatalf("after rotate_keys: %+v", st)
	}
}

// TestFabricRotationWaitsForPendingRekeys: while a REKEY of the last
// rotation awaits its REKEY_ACK, another rotation is refused and changes
// nothing (it would drop the SA the peer still seals with).
func TestFabricRotationWaitsForPendingRekeys(t *testing.T) {
	store, host, _, _ := rotatingPair(t, `, "rotate_every": "off"`)
	host.Fabric().Close() // the REKEY is never answered
	if _, err := store.rotate(); err != nil {
		t.Fatal(err)
	}
	_, err := store.rotate()
	if !errors.Is(err, ErrRekeyPending) {
		t.Fatalf("second rotation: %v", err)
	}
	st := store.status(t).Security
	if st.Rotations != 1 || st.NICs[0].Generation != 2 || st.NICs[0].RekeysPending != 1 {
		t.Fatalf("status security %+v", st)
	}
}

// TestRotateEveryConfig: default an hour; "off"; a duration of at least
// a minute; nothing else, and not on an insecure fabric.
func TestRotateEveryConfig(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{{"", DefaultRotateEvery, ""}, {"off", 0, ""}, {"24h", 24 * time.Hour, ""}, {"1m", time.Minute, ""},
		{"30s", 0, "shorter than"}, {"0s", 0, "shorter than"}, {"daily", 0, "rotate_every"}} {
		f := FabricSpec{Listen: "127.0.0.1:1", KeyFile: "k", RotateEvery: tc.in}
		got, err := f.rotateEvery()
		cerr := f.checkSecurity()
		switch {
		case tc.err == "" && (err != nil || cerr != nil || got != tc.want):
			t.Errorf("%q: %v, %v, %v", tc.in, got, err, cerr)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || cerr == nil):
			t.Errorf("%q: want an error with %q, got %v / %v", tc.in, tc.err, err, cerr)
		}
	}
	f := FabricSpec{Listen: "127.0.0.1:1", Insecure: true, RotateEvery: "1h"}
	if err := f.checkSecurity(); !errors.Is(err, ErrRotateInsecure) {
		t.Fatalf("insecure with rotate_every: %v", err)
	}
	f.RotateEvery = "off"
	if err := f.checkSecurity(); err != nil {
		t.Fatalf("insecure with rotate_every off: %v", err)
	}
}

// dropCM is a fabric receiver that drops CM messages while armed, up to
// limit (negative: every one), and hands the rest to the daemon's CM.
type dropCM struct {
	mu      sync.Mutex
	armed   bool
	limit   int
	dropped int
	inner   fabric.Receiver
}

func (d *dropCM) ReceiveFabric(from netip.AddrPort, flow uint32, payload []byte) {
	d.mu.Lock()
	drop := d.armed && (d.limit < 0 || d.dropped < d.limit)
	if drop {
		d.dropped++
	}
	d.mu.Unlock()
	if !drop {
		d.inner.ReceiveFabric(from, flow, payload)
	}
}

func (d *dropCM) arm(limit int) {
	d.mu.Lock()
	d.armed, d.limit, d.dropped = true, limit, 0
	d.mu.Unlock()
}

func (d *dropCM) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

// lossyCM has host's fabric port hand its CM messages through a dropCM.
func lossyCM(t *testing.T, host *testDaemon) *dropCM {
	d := &dropCM{inner: fabric.ReceiverFunc(host.cm.ReceiveCM)}
	if err := host.Fabric().Handle(fabric.KindCM, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFabricLostRekeysAreResent: the first three REKEYs of a rotation
// are lost between the daemons' real fabric ports. The rotating daemon
// resends each after its backoff; the fourth is confirmed, the host moves
// to the new generation, and verified disk I/O before, during and after
// loses nothing.
func TestFabricLostRekeysAreResent(t *testing.T) {
	store, host, r, clk := rotatingPair(t, `, "rotate_every": "off"`)
	loss := lossyCM(t, host)
	loss.arm(3)
	if _, err := store.rotate(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		waitFor(t, "a REKEY lost", func() bool { return loss.count() >= i })
		r.writeRead(uint64(i)*256, 8, byte(i)) // the host still seals with the previous SA
		clk.Advance(5 * time.Second)           // past any backoff: the next send
	}
	waitFor(t, "the REKEY confirmed", func() bool { return store.cm.Stats.RekeyConfirmed.Load() == 1 })
	if got := store.cm.Stats.RekeyResent.Load(); got < 3 || loss.count() != 3 || host.cm.Stats.RekeyRecv.Load() == 0 {
		t.Fatalf("resent %d, lost %d; store cm %v", got, loss.count(), store.cm.Stats.Set().NonZero())
	}
	r.writeRead(4096, 16, 9)
	st := store.status(t).Security
	if st.NICs[0].Generation != 2 || st.NICs[0].RekeysPending != 0 || st.NICs[0].RekeysFailed != 0 || store.cm.Stats.RekeyFailed.Load() != 0 {
		t.Fatalf("status %+v", st.NICs)
	}
	for _, d := range []*testDaemon{store, host} {
		for _, drop := range []string{"psp_rx_auth_failed", "psp_rx_unknown_spi", "psp_rx_stale_generation"} {
			if n := d.nicPSP(drop); n != 0 {
				t.Errorf("%s = %d", drop, n)
			}
		}
	}
}

// TestFabricUnansweredRekeyFails: every REKEY is lost. After its last
// send the rotation's REKEY is reported failed (counter, status), and the
// connection keeps working on the previous generation.
func TestFabricUnansweredRekeyFails(t *testing.T) {
	store, host, r, clk := rotatingPair(t, `, "rotate_every": "off"`)
	loss := lossyCM(t, host)
	loss.arm(-1)
	if _, err := store.rotate(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20 && store.cm.Stats.RekeyFailed.Load() == 0; i++ {
		clk.Advance(5 * time.Second)
		waitFor(t, "a REKEY lost", func() bool { return loss.count() > i || store.cm.Stats.RekeyFailed.Load() != 0 })
	}
	waitFor(t, "the REKEY given up", func() bool { return store.cm.Stats.RekeyFailed.Load() == 1 })
	st := store.status(t).Security
	if st.NICs[0].RekeysFailed != 1 || st.NICs[0].RekeysPending != 0 || store.cm.Stats.RekeyConfirmed.Load() != 0 {
		t.Fatalf("status %+v, cm %v", st.NICs, store.cm.Stats.Set().NonZero())
	}
	if n := loss.count(); n != 8 {
		t.Fatalf("%d REKEYs sent, want cmRekeyMaxTries (8)", n)
	}
	r.writeRead(512, 16, 5) // on the previous generation, still accepted
	if n := store.nicPSP("psp_rx_stale_generation") + store.nicPSP("psp_rx_unknown_spi"); n != 0 {
		t.Fatalf("%d datagrams refused", n)
	}
}
