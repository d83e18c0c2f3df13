package litmus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"falconnic/internal/clock"
)

const testMagic = 0x6c69746d75732121

// newPage maps a fresh page with the guest's header for rounds.
func newPage(t testing.TB, rounds uint64) *Page {
	t.Helper()
	p, unmap, err := MapAnon()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmap() })
	p.Init(testMagic, rounds, Peterson)
	return p
}

// stepClock's time moves by step at every read: a spin loop reaches any
// deadline after a known number of clock reads, whatever the machine.
type stepClock struct {
	now, step clock.Time
}

func (c *stepClock) Now() clock.Time {
	t := c.now
	c.now += c.step
	return t
}

func (c *stepClock) AfterFunc(time.Duration, func()) clock.Timer { panic("unused") }

// never is a clock that stays at 0, for runs with a far deadline.
var never = &stepClock{}

func TestInitWritesAHeaderThatMatches(t *testing.T) {
	p := newPage(t, 1000)
	if !Matches(p.b, testMagic) {
		t.Fatal("header does not match its own magic")
	}
	if Matches(p.b, testMagic+1) {
		t.Fatal("header matches another magic")
	}
	if p.Rounds() != 1000 || p.State() != StateReady || p.Done(Guest) || p.Done(Host) || p.Counter() != 0 {
		t.Fatalf("header: rounds %d state %d done %v/%v counter %d", p.Rounds(), p.State(), p.Done(Guest), p.Done(Host), p.Counter())
	}
	p.Attach()
	if p.State() != StateAttached {
		t.Fatalf("state %d after Attach", p.State())
	}
}

func TestNewPageRejectsBadBuffers(t *testing.T) {
	words := make([]uint64, PageSize/8+1)
	b := unsafeBytes(words)
	for _, bad := range [][]byte{b[:PageSize-8], b[:PageSize+8], b[1 : PageSize+1]} {
		if _, err := NewPage(bad); !errors.Is(err, ErrPage) {
			t.Errorf("NewPage(len %d) = %v, want ErrPage", len(bad), err)
		}
	}
	if _, err := NewPage(b[:PageSize]); err != nil {
		t.Errorf("NewPage of an aligned page: %v", err)
	}
}

// header returns the bytes of a page Init wrote for magic.
func header(t *testing.T, magic uint64) []byte {
	p, unmap, err := MapAnon()
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	p.Init(magic, 5, Peterson)
	return bytes.Clone(p.b)
}

func TestScanFindsThePage(t *testing.T) {
	ram := make([]byte, 3*scanChunk+5*PageSize)
	off := int64(2*scanChunk + 7*PageSize)
	copy(ram[off:], header(t, testMagic))
	// Near misses: the magic alone, the header off a page boundary, the
	// header of another magic, the header with another version.
	binary.LittleEndian.PutUint64(ram[PageSize:], testMagic)
	copy(ram[3*PageSize+8:], header(t, testMagic))
	copy(ram[5*PageSize:], header(t, testMagic^1))
	copy(ram[9*PageSize:], header(t, testMagic))
	binary.LittleEndian.PutUint64(ram[9*PageSize+offVersion:], Version+1)
	got, err := Scan(bytes.NewReader(ram), int64(len(ram)), testMagic)
	if err != nil || got != off {
		t.Fatalf("Scan = %#x, %v; want %#x", got, err, off)
	}
}

func TestScanWithoutThePage(t *testing.T) {
	ram := make([]byte, 2*scanChunk)
	if _, err := Scan(bytes.NewReader(ram), int64(len(ram)), testMagic); !errors.Is(err, ErrNoPage) {
		t.Fatalf("Scan = %v, want ErrNoPage", err)
	}
}

func TestScanRefusesTwoPages(t *testing.T) {
	ram := make([]byte, 2*scanChunk)
	copy(ram[PageSize:], header(t, testMagic))
	copy(ram[scanChunk+PageSize:], header(t, testMagic))
	if _, err := Scan(bytes.NewReader(ram), int64(len(ram)), testMagic); !errors.Is(err, ErrTwoPages) {
		t.Fatalf("Scan = %v, want ErrTwoPages", err)
	}
}

func TestScanStopsAtAShortFile(t *testing.T) {
	ram := make([]byte, scanChunk+3*PageSize)
	off := int64(scanChunk + 2*PageSize)
	copy(ram[off:], header(t, testMagic))
	got, err := Scan(bytes.NewReader(ram), 4*scanChunk, testMagic)
	if err != nil || got != off {
		t.Fatalf("Scan = %#x, %v; want %#x", got, err, off)
	}
}

type failingReader struct{}

func (failingReader) ReadAt([]byte, int64) (int, error) { return 0, errors.New("EIO") }

func TestScanReportsReadErrors(t *testing.T) {
	if _, err := Scan(failingReader{}, scanChunk, testMagic); err == nil || errors.Is(err, ErrNoPage) {
		t.Fatalf("Scan = %v, want the read error", err)
	}
}

// TestLockExcludesOnRealHardware plays both sides on two goroutines, each
// on its own OS thread, the host pausing between rounds. Real hardware keeps XCHG's barrier, so neither side
// ever finds the other inside and no increment is lost.
func TestLockExcludesOnRealHardware(t *testing.T) {
	rounds := uint64(200_000)
	if testing.Short() {
		rounds = 20_000
	}
	p := newPage(t, rounds)
	p.Attach()
	res := playBoth(t, p, Peterson, rounds, false, 64)
	for _, s := range []Side{Guest, Host} {
		if res[s].Violations != 0 {
			t.Errorf("%s: %d violations in %d rounds", s, res[s].Violations, res[s].Rounds)
		}
		if !p.Done(s) || p.Result(s) != res[s] {
			t.Errorf("%s: published %+v (done %v), returned %+v", s, p.Result(s), p.Done(s), res[s])
		}
	}
	if res[Guest].Rounds != rounds {
		t.Errorf("guest played %d rounds, want %d", res[Guest].Rounds, rounds)
	}
	if sum := res[Guest].Rounds + res[Host].Rounds; p.Counter() != sum {
		t.Errorf("counter %d, want %d (both sides' rounds): %d increments lost", p.Counter(), sum, sum-p.Counter())
	}
	t.Logf("guest %+v, host %+v, counter %d", res[Guest], res[Host], p.Counter())
}

func TestEnteringBesideTheOtherSideIsAViolation(t *testing.T) {
	p := newPage(t, 1)
	// The host sits in the critical section without its flag up: what a
	// lost flag store looks like to the guest.
	p.store(offOccupant, uint64(Host)+1)
	r, err := Play(p, Guest, Options{Rounds: 1, Clock: never, Deadline: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r != (Result{Rounds: 1, Violations: 1}) || p.Counter() != 1 {
		t.Fatalf("result %+v counter %d; want 1 round, 1 violation, counter 1", r, p.Counter())
	}
}

func TestHostStopsWhenTheGuestIsDone(t *testing.T) {
	p := newPage(t, 1)
	if _, err := Play(p, Guest, Options{Rounds: 3, Clock: never, Deadline: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := Play(p, Host, Options{Clock: never, Deadline: 1})
	if err != nil || r.Rounds != 0 || !p.Done(Host) {
		t.Fatalf("host after the guest finished: %+v, %v, done %v", r, err, p.Done(Host))
	}
	if p.Result(Guest) != (Result{Rounds: 3}) || p.Counter() != 3 {
		t.Fatalf("guest published %+v, counter %d", p.Result(Guest), p.Counter())
	}
}

func TestSpinningPastTheDeadlineTimesOut(t *testing.T) {
	p := newPage(t, 1)
	// The host wants the lock and holds the turn, and never moves.
	p.store(offFlag+64*int(Host), 1)
	c := &stepClock{step: time.Millisecond}
	r, err := Play(p, Guest, Options{Rounds: 10, Clock: c, Deadline: time.Millisecond})
	if !errors.Is(err, ErrTimeout) || r.Rounds != 0 {
		t.Fatalf("Play = %+v, %v; want ErrTimeout after 0 rounds", r, err)
	}
	if p.load(offFlag+64*int(Guest)) != 0 || p.Done(Guest) {
		t.Fatal("a timed-out side must lower its flag and publish nothing")
	}
}

func TestRunningPastTheDeadlineTimesOut(t *testing.T) {
	p := newPage(t, 1)
	c := &stepClock{step: time.Millisecond}
	r, err := Play(p, Host, Options{Clock: c, Deadline: time.Millisecond})
	if !errors.Is(err, ErrTimeout) || p.Done(Host) {
		t.Fatalf("Play = %+v, %v; want ErrTimeout", r, err)
	}
	if r.Rounds != checkEvery {
		t.Fatalf("%d rounds before the clock was read again, want %d", r.Rounds, checkEvery)
	}
}

func TestSideNames(t *testing.T) {
	for s, want := range map[Side]string{Guest: "guest", Host: "host", 7: "side(7)"} {
		if s.String() != want {
			t.Errorf("Side(%d) = %q, want %q", int(s), s.String(), want)
		}
	}
}

func FuzzScan(f *testing.F) {
	f.Add(make([]byte, PageSize), uint64(testMagic))
	h := make([]byte, 2*PageSize)
	binary.LittleEndian.PutUint64(h[PageSize:], testMagic)
	binary.LittleEndian.PutUint64(h[PageSize+8:], ^uint64(testMagic))
	binary.LittleEndian.PutUint64(h[PageSize+16:], Version)
	f.Add(h, uint64(testMagic))
	f.Fuzz(func(t *testing.T, ram []byte, magic uint64) {
		off, err := Scan(bytes.NewReader(ram), int64(len(ram))+PageSize, magic)
		if err != nil {
			if !errors.Is(err, ErrNoPage) && !errors.Is(err, ErrTwoPages) {
				t.Fatalf("Scan: %v", err)
			}
			return
		}
		if off%PageSize != 0 || !Matches(ram[off:], magic) {
			t.Fatalf("Scan = %#x, which holds no header for %#x", off, magic)
		}
	})
}
