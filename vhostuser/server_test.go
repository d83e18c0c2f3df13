package vhostuser_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"falconnic/vhostuser"
	"falconnic/vhostuser/vhostusertest"
)

func dialRetry(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	deadline := time.Now().Add(failsafe)
	for {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestListenModeSurvivesReconnectAndResumesFromUsedIdx(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 2}
	mem, err := vhostusertest.NewGuestMemory(vhostusertest.OneRegion(1 << 20))
	must(t, err)
	defer mem.Close()
	var qs []*vhostusertest.DriverQueue
	for i := 0; i < 2; i++ {
		q, err := vhostusertest.NewDriverQueue(mem, i, 32, 0, 2048)
		must(t, err)
		defer q.Close()
		qs = append(qs, q)
	}
	srv := &vhostuser.Server{Path: filepath.Join(t.TempDir(), "net.sock"), Device: dev}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()

	fe, err := vhostusertest.NewFrontend(dialRetry(t, srv.Path), mem, qs)
	must(t, err)
	defer fe.Close()
	acked := vhostuser.FeatureVersion1 | vhostuser.FeatureProtocolFeatures
	must(t, fe.NetInit(1))
	must(t, fe.NetStart(acked, 1, nil))
	for i := 0; i < 3; i++ {
		post(t, qs[1], []byte{byte(i)})
	}
	qs[1].Publish()
	qs[1].Kick()
	if !qs[1].WaitUsed(3, failsafe) {
		t.Fatal("traffic before reconnect")
	}
	// The back-end drops the session (as if restarted); QEMU reconnects
	// and replays init + start with base = used idx.
	srv.Disconnect()
	fe.Reconnect(dialRetry(t, srv.Path))
	must(t, fe.NetInit(1))
	must(t, fe.NetStart(acked, 1, fe.UsedBases()))
	post(t, qs[1], []byte{9})
	qs[1].Publish()
	qs[1].Kick()
	if !qs[1].WaitUsed(4, failsafe) {
		t.Fatal("traffic after reconnect")
	}
	if got := dev.received(); len(got) != 4 || got[3][0] != 9 {
		t.Fatalf("device got %v", got)
	}
	if n := srv.Counters.Sessions.Load(); n != 2 {
		t.Fatalf("sessions %d", n)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func TestDialModeConnectsToFrontEndServer(t *testing.T) {
	dev := &echoDev{features: vhostuser.FeatureVersion1, queues: 2}
	path := filepath.Join(t.TempDir(), "qemu.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	must(t, err)
	defer l.Close()
	srv := &vhostuser.Server{Path: path, Dial: true, Device: dev, RedialInterval: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	c, err := l.AcceptUnix()
	must(t, err)
	fe, err := vhostusertest.NewFrontend(c, nil, nil)
	must(t, err)
	f, err := fe.GetU64(vhostuser.ReqGetFeatures)
	must(t, err)
	if f&vhostuser.FeatureVersion1 == 0 {
		t.Fatalf("features %#x", f)
	}
	// QEMU (server) drops the connection: the back-end dials again.
	fe.Close()
	c2, err := l.AcceptUnix()
	must(t, err)
	c2.Close()
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
