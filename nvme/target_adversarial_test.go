package nvme

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"falconnic/falcon"
	"falconnic/falcon/wire"
)

// TestAdversarialNamespaceTheft [issue 18, finding 2]: a daemon that
// names the store NIC in its disk config reaches the target, but a
// namespace whose access list names only the tenant answers its read
// with Access Denied, and no byte of the tenant's data leaves.
func TestAdversarialNamespaceTheft(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: aclNS(&ACL{MACs: [][6]byte{macTenant}}),
		from: &Initiator{MAC: macOther, Owner: "daemon-evil"}})
	tenantData := pattern(64*512, 4)
	copy(r.mem[1].Bytes(), tenantData)
	stolen := make([]byte, 64*512)
	if st := r.do(readCmd(stolen)); st != StatusAccessDenied {
		t.Fatalf("stolen read: %v, want access-denied", st)
	}
	if !bytes.Equal(stolen, make([]byte, len(stolen))) {
		t.Fatal("tenant data reached the thief")
	}
}

// TestAdversarialPathHijack [issue 18, finding 2]: a daemon claiming the
// tenant's own MAC cannot replace the tenant's live path: its path is
// refused and the tenant's commands keep being served on its own.
func TestAdversarialPathHijack(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: aclNS(&ACL{MACs: [][6]byte{macTenant}}),
		from: &Initiator{MAC: macTenant, Owner: "daemon-tenant"}})
	_, b, err := r.pair.Connect(falcon.ConnConfig{SCID: 100, DCID: 1100, Protocol: wire.ProtoNVMe})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.tgt.AddPathFrom(b, Initiator{MAC: macTenant, Owner: "daemon-evil"}); !errors.Is(err, ErrPathOwned) {
		t.Fatalf("hijacking path: %v", err)
	}
	for i := range 10 {
		if st := r.do(readCmd(make([]byte, 4096))); !st.OK() {
			t.Fatalf("tenant read %d after the hijack attempt: %v", i, st)
		}
	}
	if r.back.Down() {
		t.Fatal("the tenant's path went down")
	}
}

// TestAdversarialForgedPathsBounded [issue 18, finding 5]: paths a peer
// opens and never uses hold no initiator tables; their engine-side cost
// is bounded (the Falcon connection under each is the device's to bound).
func TestAdversarialForgedPathsBounded(t *testing.T) {
	r := newRig(t, rigConfig{namespaces: aclNS(nil)})
	const n = 500
	conns := make([]*falcon.Conn, n)
	for i := range conns {
		_, b, err := r.pair.Connect(falcon.ConnConfig{SCID: uint32(100 + i), DCID: uint32(5000 + i), Protocol: wire.ProtoNVMe})
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = b
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, c := range conns {
		if _, err := r.tgt.AddPath(c); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	const bound = 2048 // bytes per path; the initiator tables alone are > 100 KiB
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes of heap per unused path", per)
	if per > bound {
		t.Fatalf("%d bytes of heap per unused path, bound %d", per, bound)
	}
	if share := r.tgt.pathShare(); share < minPathShare || share > maxTargets/(n+1)+minPathShare {
		t.Fatalf("share per path %d", share)
	}
}
