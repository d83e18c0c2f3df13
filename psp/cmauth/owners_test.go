package cmauth

import (
	"errors"
	"testing"
)

var (
	macA1 = [6]byte{2, 0, 0, 0, 0xa, 1}
	macB1 = [6]byte{2, 0, 0, 0, 0xb, 1}
	macB2 = [6]byte{2, 0, 0, 0, 0xb, 2}
	macX  = [6]byte{2, 0, 0, 0, 0xe, 1}
)

// TestOwnersRefuseOwnMAC: a message from the fabric naming a NIC of this
// daemon as its source is refused, whoever sealed it.
func TestOwnersRefuseOwnMAC(t *testing.T) {
	o := NewOwners("daemon-a", OwnersConfig{Local: [][6]byte{macA1}, Learn: true})
	if err := o.Authorize("daemon-b", macA1); !errors.Is(err, ErrOwnMAC) {
		t.Fatalf("own MAC from daemon-b: %v", err)
	}
	if err := o.Bind("daemon-b", macA1); !errors.Is(err, ErrOwnMAC) {
		t.Fatalf("binding an own MAC to daemon-b: %v", err)
	}
}

// TestOwnersFirstSpeakerKeeps: with learning, the first daemon to speak
// for a MAC keeps it; another daemon claiming it is refused.
func TestOwnersFirstSpeakerKeeps(t *testing.T) {
	var c Counters
	o := NewOwners("daemon-a", OwnersConfig{Learn: true, Counters: &c})
	if err := o.Authorize("daemon-b", macB1); err != nil {
		t.Fatal(err)
	}
	if err := o.Authorize("daemon-b", macB1); err != nil {
		t.Fatal(err)
	}
	if err := o.Authorize("daemon-evil", macB1); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("another daemon claiming B's MAC: %v", err)
	}
	if id, _ := o.Owner(macB1); id != "daemon-b" || c.NotOwner.Load() != 1 || c.Learnt.Load() != 1 {
		t.Fatalf("owner %q, counters %d %d", id, c.NotOwner.Load(), c.Learnt.Load())
	}
	o.Forget("daemon-b")
	if err := o.Authorize("daemon-c", macB1); err != nil {
		t.Fatalf("after daemon-b left: %v", err)
	}
}

func TestOwnersStatic(t *testing.T) {
	o := NewOwners("daemon-a", OwnersConfig{})
	if err := o.Bind("daemon-b", macB1); err != nil {
		t.Fatal(err)
	}
	if err := o.Authorize("daemon-b", macB1); err != nil {
		t.Fatal(err)
	}
	if err := o.Authorize("daemon-b", macB2); !errors.Is(err, ErrUnknownMAC) {
		t.Fatalf("unbound MAC without learning: %v", err)
	}
	if err := o.Bind("", macX); !errors.Is(err, ErrID) {
		t.Fatalf("empty ID: %v", err)
	}
}

func TestOwnersBoundedPerPeer(t *testing.T) {
	o := NewOwners("daemon-a", OwnersConfig{Learn: true, MaxPerPeer: 3})
	for i := range 3 {
		if err := o.Authorize("daemon-evil", [6]byte{2, 0, 0, 1, 0, byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Authorize("daemon-evil", macX); !errors.Is(err, ErrTooManyMACs) {
		t.Fatalf("fourth MAC: %v", err)
	}
	if err := o.Authorize("daemon-b", macB1); err != nil {
		t.Fatalf("another daemon after the flood: %v", err)
	}
}
