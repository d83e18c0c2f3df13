package litmus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// PageSize is the size of the shared page.
const PageSize = 4096

// Version is the layout version in the header.
const Version = 1

// Side is one player of the lock.
type Side int

// The two sides.
const (
	Guest Side = 0
	Host  Side = 1
)

func (s Side) String() string {
	switch s {
	case Guest:
		return "guest"
	case Host:
		return "host"
	}
	return fmt.Sprintf("side(%d)", int(s))
}

func (s Side) other() Side { return 1 - s }

// State values of the header's state word.
const (
	StateReady    = 1 // the guest has written the header
	StateAttached = 2 // the host has mapped the page and will play
	// StateCollected: the host has read the results and will not touch
	// the page again; only now may the guest exit and free it.
	StateCollected = 3
)

// Word offsets in the page (see the package comment).
const (
	offMagic      = 0
	offNotMagic   = 8
	offVersion    = 16
	offRounds     = 24
	offState      = 32
	offFlag       = 64  // + 64*side
	offTurn       = 192 // shares nothing with the flags
	offOccupant   = 256
	offCounter    = 320
	offDone       = 384 // + 8*side
	offSideRounds = 400 // + 8*side
	offViolations = 416 // + 8*side
	offOld        = 432 // + 8*side
	offTest       = 40
	headerSize    = 48
	// The store-buffering test's words, each on its own cache line.
	offGo  = 512
	offX   = 576 // + 64*side
	offAck = 704
)

// Test is which litmus the page is played with.
type Test uint64

// The tests.
const (
	// Peterson is Peterson's lock: violations are rounds in which a
	// side found the other inside the critical section.
	Peterson Test = 1
	// StoreBuffering is the classic SB litmus, one round at a time
	// (PlaySB): each side stores to its own word and loads the other's;
	// both loading the other's old value is the forbidden outcome.
	StoreBuffering Test = 2
)

func (t Test) String() string {
	switch t {
	case Peterson:
		return "peterson"
	case StoreBuffering:
		return "sb"
	}
	return fmt.Sprintf("test(%d)", uint64(t))
}

// Play plays side's part of test t on p.
func (t Test) Play(p *Page, side Side, o Options) (Result, error) {
	switch t {
	case Peterson:
		return Play(p, side, o)
	case StoreBuffering:
		return PlaySB(p, side, o)
	}
	return Result{}, fmt.Errorf("litmus: unknown test %v", t)
}

// ParseTest reads a Test's name.
func ParseTest(s string) (Test, error) {
	for _, t := range []Test{Peterson, StoreBuffering} {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("litmus: unknown test %q (peterson or sb)", s)
}

// Errors.
var (
	ErrPage     = errors.New("litmus: page must be 4096 bytes, 8-byte aligned")
	ErrNoPage   = errors.New("litmus: no page with the magic in guest RAM")
	ErrTwoPages = errors.New("litmus: more than one page with the magic in guest RAM")
	ErrTimeout  = errors.New("litmus: deadline passed")
)

// Page is the shared page.
type Page struct {
	b []byte
}

// NewPage wraps b, which must be PageSize bytes and 8-byte aligned (an
// mmap'd page is).
func NewPage(b []byte) (*Page, error) {
	if len(b) != PageSize || uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		return nil, ErrPage
	}
	return &Page{b: b}, nil
}

func (p *Page) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&p.b[off])) }

func (p *Page) load(off int) uint64     { return atomic.LoadUint64(p.word(off)) }
func (p *Page) store(off int, v uint64) { atomic.StoreUint64(p.word(off), v) }

// Init writes the guest's header: everything but the magic is cleared
// first, then the magic is written last so a scan never matches a page
// whose header is half written.
func (p *Page) Init(magic, rounds uint64, t Test) {
	for off := 8; off < PageSize; off += 8 {
		p.store(off, 0)
	}
	p.store(offVersion, Version)
	p.store(offRounds, rounds)
	p.store(offTest, uint64(t))
	p.store(offTurn, uint64(Guest))
	p.store(offNotMagic, ^magic)
	p.store(offMagic, magic)
	p.store(offState, StateReady)
}

// Matches reports whether b (at least headerSize bytes) starts with the
// header of a page Init wrote for magic.
func Matches(b []byte, magic uint64) bool {
	return len(b) >= headerSize &&
		binary.LittleEndian.Uint64(b[offMagic:]) == magic &&
		binary.LittleEndian.Uint64(b[offNotMagic:]) == ^magic &&
		binary.LittleEndian.Uint64(b[offVersion:]) == Version
}

// Test returns the test the guest set up the page for.
func (p *Page) Test() Test { return Test(p.load(offTest)) }

// State returns the header's state word.
func (p *Page) State() uint64 { return p.load(offState) }

// Attach marks the page attached: the host is mapped and plays.
func (p *Page) Attach() { p.store(offState, StateAttached) }

// Collect marks the page collected: the host has read the results and
// unmaps it.
func (p *Page) Collect() { p.store(offState, StateCollected) }

// Rounds returns the round count the guest asked for.
func (p *Page) Rounds() uint64 { return p.load(offRounds) }

// Counter returns the shared counter.
func (p *Page) Counter() uint64 { return p.load(offCounter) }

// Done reports whether side has finished and published its result.
func (p *Page) Done(s Side) bool { return p.load(offDone+8*int(s)) != 0 }

// Result returns what side published when it finished.
func (p *Page) Result(s Side) Result {
	return Result{
		Rounds:     p.load(offSideRounds + 8*int(s)),
		Violations: p.load(offViolations + 8*int(s)),
		Old:        p.load(offOld + 8*int(s)),
	}
}

func (p *Page) publish(s Side, r Result) {
	p.store(offSideRounds+8*int(s), r.Rounds)
	p.store(offViolations+8*int(s), r.Violations)
	p.store(offOld+8*int(s), r.Old)
	p.store(offDone+8*int(s), 1)
}
