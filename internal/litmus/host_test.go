package litmus

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"falconnic/internal/clock"
	"golang.org/x/sys/unix"
)

// ramFile is a memfd standing for a guest's RAM.
func ramFile(t *testing.T, size int64) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("memory-backend-memfd", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	f := os.NewFile(uintptr(fd), "ram")
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRunHostAgainstAGuestInRAM plays the guest in a page of a RAM file,
// as guest/litmus does in its own page, and the host through RunHost.
func TestRunHostAgainstAGuestInRAM(t *testing.T) {
	for _, test := range []Test{Peterson, StoreBuffering} {
		t.Run(test.String(), func(t *testing.T) {
			const size = 4 << 20
			ram := ramFile(t, size)
			off := int64(3<<20 + 5*PageSize)
			g, unmap, err := MapFile(ram, off)
			if err != nil {
				t.Fatal(err)
			}
			defer unmap()
			const rounds = 20_000
			g.Init(testMagic, rounds, test)
			deadline := clock.Real.Now() + 5*time.Minute // a hang guard
			guest := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				for g.State() < StateAttached {
					runtime.Gosched()
				}
				_, err := test.Play(g, Guest, Options{Rounds: rounds, Clock: clock.Real, Deadline: deadline})
				guest <- err
			}()
			rep, err := RunHost(ram, size, testMagic, test, Options{Clock: clock.Real, Deadline: deadline})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-guest; err != nil {
				t.Fatal(err)
			}
			if rep.Offset != off || rep.Guest.Rounds != rounds || rep.Violations() != 0 {
				t.Fatalf("report %+v", rep)
			}
			if test == Peterson && rep.Lost() != 0 {
				t.Fatalf("report %+v: %d increments lost", rep, rep.Lost())
			}
			if g.State() != StateCollected || !g.Done(Host) || g.Result(Host) != rep.Host {
				t.Fatalf("page after RunHost: state %d, host done %v, published %+v", g.State(), g.Done(Host), g.Result(Host))
			}
		})
	}
}

func TestRunHostWithoutTheGuestPage(t *testing.T) {
	ram := ramFile(t, 2<<20)
	if _, err := RunHost(ram, 2<<20, testMagic, Peterson, Options{Clock: never, Deadline: 1}); !errors.Is(err, ErrNoPage) {
		t.Fatalf("RunHost = %v, want ErrNoPage", err)
	}
}

func TestRunHostRefusesAPageNotReady(t *testing.T) {
	ram := ramFile(t, 2<<20)
	g, unmap, err := MapFile(ram, PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	g.Init(testMagic, 1, Peterson)
	g.Collect() // a page some earlier host left
	if _, err := RunHost(ram, 2<<20, testMagic, Peterson, Options{Clock: never, Deadline: 1}); err == nil {
		t.Fatal("RunHost played on a page in state collected")
	}
}

func TestMapFileRefusesUnalignedOffsets(t *testing.T) {
	ram := ramFile(t, 2<<20)
	if _, _, err := MapFile(ram, 100); err == nil {
		t.Fatal("MapFile at offset 100 succeeded")
	}
}
