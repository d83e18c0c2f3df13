package nvme

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"falconnic/falcon"
	"falconnic/falcon/wire"
)

var (
	macTenant = [6]byte{2, 0, 0, 0, 1, 1}
	macOther  = [6]byte{2, 0, 0, 0, 6, 6}
)

func aclNS(allow *ACL) []NamespaceConfig {
	return []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: 64, Allow: allow}}
}

func readCmd(buf []byte) *Command {
	return &Command{Op: OpRead, NSID: 1, SLBA: 0, Blocks: uint32(len(buf) / 512), Data: [][]byte{buf}}
}

func TestACLAllowsListedMAC(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: aclNS(&ACL{MACs: [][6]byte{macTenant}}), from: &Initiator{MAC: macTenant}})
	data := pattern(4096, 3)
	if st := r.do(&Command{Op: OpWrite, NSID: 1, Blocks: 8, Data: [][]byte{data}}); !st.OK() {
		t.Fatalf("write: %v", st)
	}
	got := make([]byte, 4096)
	if st := r.do(readCmd(got)); !st.OK() || !bytes.Equal(got, data) {
		t.Fatalf("read: %v", st)
	}
}

func TestACLAllowsListedNQN(t *testing.T) {
	const nqn = "nqn.2014-08.org.example:host-a"
	r := newRig(t, rigConfig{namespaces: aclNS(&ACL{NQNs: []string{nqn}}), from: &Initiator{MAC: macOther, NQN: nqn}})
	if st := r.do(readCmd(make([]byte, 512))); !st.OK() {
		t.Fatalf("read: %v", st)
	}
}

// TestACLDeniesOthers: every command of an initiator not on the list
// fails with Access Denied and the backend is not touched.
func TestACLDeniesOthers(t *testing.T) {
	for _, c := range []struct {
		name string
		from *Initiator
	}{
		{"other MAC", &Initiator{MAC: macOther, NQN: "nqn.2014-08.org.example:other"}},
		{"unidentified path", nil},
		{"zero MAC", &Initiator{}},
	} {
		r := newRig(t, rigConfig{namespaces: aclNS(&ACL{MACs: [][6]byte{macTenant, {}}}), from: c.from})
		secret := pattern(64*512, 9)
		copy(r.mem[1].Bytes(), secret)
		got := make([]byte, 4096)
		for _, cmd := range []*Command{
			readCmd(got),
			{Op: OpWrite, NSID: 1, Blocks: 8, Data: [][]byte{make([]byte, 4096)}},
			{Op: OpIdentify, NSID: 1, Data: [][]byte{make([]byte, IdentifyLen)}},
			{Op: OpWriteZeroes, NSID: 1, Blocks: 8},
			{Op: OpFlush, NSID: 1},
		} {
			if st := r.do(cmd); st != StatusAccessDenied {
				t.Fatalf("%s: %v: %v, want access-denied", c.name, cmd.Op, st)
			}
		}
		if !bytes.Equal(r.mem[1].Bytes(), secret) || bytes.Count(got, []byte{0}) != len(got) {
			t.Fatalf("%s: the namespace was read or written", c.name)
		}
		if n := r.tgt.Namespace(1).Stats.AccessDenied.Load(); n != 5 {
			t.Fatalf("%s: AccessDenied = %d", c.name, n)
		}
	}
}

func TestAccessDeniedStatus(t *testing.T) {
	if s := StatusAccessDenied; s.SCT() != SCTMedia || s.SC() != 0x86 || !s.DNR() || s.String() != "access-denied" {
		t.Fatalf("status %v sct %d sc %#x", s, s.SCT(), s.SC())
	}
}

// TestAddPathFromOwned: while the tenant's path is live, a path for the
// same initiator MAC owned by another daemon is refused; the owner may
// replace it, and once it is gone anyone may add one.
func TestAddPathFromOwned(t *testing.T) {
	tenant := Initiator{MAC: macTenant, Owner: "daemon-t"}
	r := newRig(t, rigConfig{namespaces: aclNS(&ACL{MACs: [][6]byte{macTenant}}), from: &tenant})
	conn := func(scid uint32) *falcon.Conn {
		_, b, err := r.pair.Connect(falcon.ConnConfig{SCID: scid, DCID: scid + 1000, Protocol: wire.ProtoNVMe})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := r.tgt.AddPathFrom(conn(100), Initiator{MAC: macTenant, Owner: "daemon-evil"}); !errors.Is(err, ErrPathOwned) {
		t.Fatalf("another daemon's path for the tenant's MAC: %v", err)
	}
	if r.tgt.Stats.PathOwned.Load() != 1 {
		t.Fatal("PathOwned not counted")
	}
	if st := r.do(readCmd(make([]byte, 512))); !st.OK() {
		t.Fatalf("tenant after the attempt: %v", st)
	}
	p2, err := r.tgt.AddPathFrom(conn(200), tenant)
	if err != nil {
		t.Fatalf("the owner replacing its path: %v", err)
	}
	r.tgt.RemovePath(r.back)
	r.tgt.RemovePath(p2)
	if _, err := r.tgt.AddPathFrom(conn(300), Initiator{MAC: macTenant, Owner: "daemon-new"}); err != nil {
		t.Fatalf("after the tenant's paths are gone: %v", err)
	}
}

// TestTargetSlotsShared: a path holding its share of the target table is
// RNR-NACKed for more, so another path still gets slots.
func TestTargetSlotsShared(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: aclNS(nil)})
	_, b, err := r.pair.Connect(falcon.ConnConfig{SCID: 100, DCID: 1100, Protocol: wire.ProtoNVMe})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.tgt.AddPath(b); err != nil {
		t.Fatal(err)
	}
	if got := r.tgt.pathShare(); got != maxTargets/2 {
		t.Fatalf("share of two paths: %d", got)
	}
	r.back.held = r.tgt.pathShare() // the first path holds its share
	c := r.submit(readCmd(make([]byte, 512)))
	if !r.pair.RunUntil(func() bool { return r.tgt.Stats.PathShareFull.Load() > 0 }, time.Second) {
		t.Fatal("a path over its share was not refused")
	}
	r.back.held = 0 // its slots come back: the RNR retry is served
	r.run(1)
	if !c.Status.OK() {
		t.Fatalf("read after the RNR: %v", c.Status)
	}
}

// TestIdlePathIsSmall: a path that never initiates has no initiator
// tables (a forged or target-only path costs little).
func TestIdlePathIsSmall(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: aclNS(nil)})
	if r.back.icmds != nil || r.back.ncmds != nil {
		t.Fatal("target-side path allocated initiator tables")
	}
	r.back.onPushFailed(0xfff) // hostile tags on a table-less path
	if ni := r.back.lookup(0xfff, 0, 0); ni != -1 {
		t.Fatal("lookup on a table-less path")
	}
	if r.back.Outstanding() != 0 {
		t.Fatal("outstanding on an idle path")
	}
}
