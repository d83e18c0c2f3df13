package device

import (
	"bytes"
	"context"
	"testing"
	"time"

	"falconnic/falcon/wire"
)

// TestNVMeCMAnswersREQsAndRefusesTheRest: daemon B's NVMe CM answers a
// REQ for its NIC with a REP (again, byte for byte, for a repeated REQ),
// a REQ for a MAC it lacks with a REJ, and drops stale REPs and messages
// for a ULP no CM handles, each counted.
func TestNVMeCMAnswersREQsAndRefusesTheRest(t *testing.T) {
	a, b := newNode(t, FabricOptions{}), newNode(t, FabricOptions{})
	mesh(t, a, b)
	replies := newInbox()
	if err := a.fab.Handle(KindCM, FabricReceiverFunc(replies.ReceiveFabric)); err != nil {
		t.Fatal(err)
	}
	hub := NewRDMAHub(b.fab)
	cm := NewNVMeCM(hub, b.fab)
	port := NewFalconPort(nil, nil)
	f := NewNVMeFunc(port, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go port.Run(ctx)
	store, host := [6]byte{0x52, 0x54, 0, 0, 0, 2}, [6]byte{0x52, 0x54, 0, 0, 0, 1}
	cm.Add(store, f)
	to := a.fab.Link(b.fab.LocalAddr(), KindCM)
	nvmeProto := uint8(wire.ProtoNVMe)

	to.Send((&cmMsg{typ: cmREQ, proto: nvmeProto, src: host, dst: [6]byte{9}, srcCID: 5}).append(nil), 0)
	if m, err := decodeCM(replies.next(t, "REJ").b); err != nil || m.typ != cmREJ || m.proto != nvmeProto || m.dstCID != 5 {
		t.Fatalf("answer to a REQ for an unknown MAC: %+v %v", m, err)
	}

	to.Send((&cmMsg{typ: cmREP, proto: nvmeProto, src: host, dst: store, srcCID: 3, dstCID: 77}).append(nil), 0)
	to.Send((&cmMsg{typ: cmREQ, proto: 9, src: host, dst: store, srcCID: 3}).append(nil), 0)

	req := (&cmMsg{typ: cmREQ, proto: nvmeProto, src: host, dst: store, srcCID: 6, reqPSN: 100, dataPSN: 200, rsn: 300}).append(nil)
	to.Send(req, 0)
	rep := replies.next(t, "REP").b
	m, err := decodeCM(rep)
	if err != nil || m.typ != cmREP || m.proto != nvmeProto || m.dstCID != 6 || m.srcCID == 0 || m.src != store || m.dst != host {
		t.Fatalf("REP %+v %v", m, err)
	}
	to.Send(req, 0) // as if our REP was lost
	if again := replies.next(t, "repeated REP").b; !bytes.Equal(again, rep) {
		t.Fatalf("repeated REQ drew a different REP: %+v", again)
	}
	deadline := time.Now().Add(waitBound)
	for cm.Stats.Stale.Load() != 1 || hub.Stats.CMNoULP.Load() != 1 || cm.Stats.NoNIC.Load() != 1 || cm.Stats.PathsUp.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("cm %v hub %v", cm.Stats.Set().NonZero(), hub.Stats.Set().NonZero())
		}
		time.Sleep(time.Millisecond)
	}
}
