package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"falconnic/device/port"
	"falconnic/device/vsock"
	"falconnic/falcon"
	"falconnic/guest/agentproto"
	"falconnic/vhostuser"
)

// TestBlkQemuFioVerify boots a real guest (QEMU 7.2, TCG) whose
// vhost-user-blk disk is served by Blk, with its blocks on a memory
// namespace exported by a second NIC over NVMe-over-Falcon, and runs fio
// with verification in the guest (through the guest agent over vsock):
// random 4 KiB and sequential 128 KiB writes, each read back and checked,
// then the same while the back-end session is dropped mid-run (QEMU
// reconnects), while it is dropped with requests stuck at a stalled target
// (detached, then resubmitted from the inflight region), and while the
// whole back-end is torn down and rebuilt, as a daemon restart would
// (the namespace is a file). Set FALCONNIC_BLK_QEMU_IMAGE to a guest
// image directory (the one holding manifest.json); ~1 min under TCG.
func TestBlkQemuFioVerify(t *testing.T) {
	imgDir := os.Getenv("FALCONNIC_BLK_QEMU_IMAGE")
	if imgDir == "" {
		t.Skip("set FALCONNIC_BLK_QEMU_IMAGE to a guest image directory to boot QEMU")
	}
	var man struct{ Kernel, Initrd string }
	b, err := os.ReadFile(filepath.Join(imgDir, "manifest.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &man))
	dir, err := os.MkdirTemp("", "blkq")
	must(t, err)
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	defer cancel()

	// Two NICs: "host" (initiator, serves the disk) and "store" (target,
	// a file namespace so that it outlives a back-end restart).
	const size = 64 << 20
	nsFile := filepath.Join(dir, "ns.img")
	blkSock := filepath.Join(dir, "blk.sock")
	var trace []string
	var traceMu sync.Mutex
	var (
		blk    *Blk
		srv    *vhostuser.Server
		ini    *NVMeFunc
		s      *port.Port
		served chan error
		stop   context.CancelFunc
	)
	// startBackend builds the whole back-end afresh, as a restarted
	// daemon would: ports, NVMe functions, path, Identify, disk, server.
	startBackend := func() {
		bctx, bcancel := context.WithCancel(ctx)
		a, ts := port.New(nil, nil), port.New(nil, nil)
		fi, ft := NewNVMeFunc(a, 1), NewNVMeFunc(ts, 2) // before Run: SetULP
		go a.Run(bctx)
		go ts.Run(bctx)
		var err error
		ts.Call(func(*falcon.Endpoint) {
			_, err = ft.AddNamespace(NamespaceSpec{NSID: 1, Backing: nsFile, Size: size})
		})
		must(t, err)
		var cids atomic.Uint32
		path, _, err := ConnectNVMeLocal(fi, ft, func() uint32 { return cids.Add(1) })
		must(t, err)
		info, err := IdentifyRemote(a, path, 1, 5*time.Second)
		must(t, err)
		b, err := NewBlk(BlkConfig{Port: a, Path: path, NSID: 1, Info: info, Serial: "fnic-qemu-disk"})
		must(t, err)
		b.drain = 300 * time.Millisecond
		sv := &vhostuser.Server{Path: blkSock, Device: b, Trace: func(l string) {
			traceMu.Lock()
			trace = append(trace, time.Now().Format("15:04:05.000")+" "+l)
			traceMu.Unlock()
		}}
		done := make(chan error, 1)
		go func() { done <- sv.Serve(bctx) }()
		blk, srv, ini, s, served, stop = b, sv, fi, ts, done, bcancel
	}
	startBackend()

	v, err := vsock.New(vsock.Config{Name: "vsock0", Socket: filepath.Join(dir, "vs.sock"), GuestCID: 3, UDS: filepath.Join(dir, "v"), Dial: true})
	must(t, err)
	vsServed := make(chan error, 1)
	go func() { vsServed <- v.Serve(ctx) }()
	defer func() { cancel(); <-served; <-vsServed }()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(blkSock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	console := filepath.Join(dir, "console.log")
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64",
		"-accel", "tcg", "-machine", "q35,memory-backend=mem",
		"-object", "memory-backend-memfd,id=mem,size=1024M,share=on", "-m", "1024M",
		"-smp", "1,maxcpus=2", "-cpu", "qemu64", // maxcpus, tsc=reliable: see qemu.smpArg and qemu.Machine.Args
		"-nographic", "-nodefaults", "-no-reboot",
		"-kernel", filepath.Join(imgDir, man.Kernel), "-initrd", filepath.Join(imgDir, man.Initrd),
		"-serial", "file:"+console,
		"-chardev", "socket,id=vs,path="+filepath.Join(dir, "vs.sock")+",server=on",
		"-device", "vhost-user-vsock-pci,chardev=vs",
		"-chardev", "socket,id=d0,path="+blkSock+",reconnect=1",
		"-device", "vhost-user-blk-pci,chardev=d0",
		"-append", "console=ttyS0 panic=-1 loglevel=4 tsc=reliable no_timer_check falconnic.hostname=blkvm")
	var qerr bytes.Buffer
	cmd.Stderr = &qerr
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()
	report := func() string {
		c, _ := os.ReadFile(console)
		if len(c) > 4000 {
			c = c[len(c)-4000:]
		}
		traceMu.Lock()
		tr := trace
		if len(tr) > 60 {
			tr = tr[len(tr)-60:]
		}
		tl := strings.Join(tr, "\n")
		traceMu.Unlock()
		return fmt.Sprintf("console tail:\n%s\nqemu: %s\nblk: %v\nnvme ini: %v\nsession: %+v\nvhost-user trace:\n%s", c, qerr.String(),
			blk.Stats.Set().NonZero(), ini.Engine.Stats.Set().NonZero(), srv.Status(), tl)
	}
	for deadline := time.Now().Add(420 * time.Second); ; {
		c, _ := os.ReadFile(console)
		if bytes.Contains(c, []byte("FALCONNIC-GUEST-READY")) {
			break
		}
		select {
		case <-exited:
			t.Fatalf("QEMU exited\n%s", report())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("guest not ready\n%s", report())
		}
	}
	conn, err := net.Dial("unix", filepath.Join(dir, "v"))
	must(t, err)
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT 1024\n")
	var line []byte
	for {
		var one [1]byte
		if _, err := conn.Read(one[:]); err != nil {
			t.Fatalf("agent: %v\n%s", err, report())
		}
		line = append(line, one[0])
		if one[0] == '\n' {
			break
		}
	}
	cl := agentproto.NewClient(conn)
	_, err = cl.Hello(1)
	must(t, err)
	run := func(sh string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		exit, err := cl.Run(ctx, agentproto.Exec{Argv: []string{"sh", "-c", sh}}, nil, &out, &errOut)
		if err != nil || exit.Code != 0 {
			t.Fatalf("%s: exit %+v err %v\nstdout %s\nstderr %s\n%s", sh, exit, err, out.String(), errOut.String(), report())
		}
		return out.String()
	}
	if got := strings.TrimSpace(run("cat /sys/block/vda/size; cat /sys/block/vda/serial 2>/dev/null || true")); !strings.HasPrefix(got, "131072") {
		t.Fatalf("guest disk: %q", got)
	}
	fio := func(name, rw, bs string, extra string) string {
		return run(fmt.Sprintf("fio --name=%s --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 --rw=%s --bs=%s "+
			"--size=16M --verify=crc32c --do_verify=1 --verify_fatal=1 --group_reporting %s 2>&1", name, rw, bs, extra))
	}
	start := time.Now()
	out := fio("rand4k", "randwrite", "4k", "--offset=0")
	t.Logf("fio randwrite 4k + verify (%v):\n%s", time.Since(start).Round(time.Millisecond), tail(out, 12))
	start = time.Now()
	out = fio("seq128k", "write", "128k", "--offset=16M")
	t.Logf("fio write 128k + verify (%v):\n%s", time.Since(start).Round(time.Millisecond), tail(out, 12))

	// midRun waits until fio is n writes into a run (not before, not after).
	midRun := func(n uint64) {
		t.Helper()
		w0 := blk.Stats.Writes.Load()
		for end := time.Now().Add(2 * time.Minute); blk.Stats.Writes.Load() < w0+n; {
			if time.Now().After(end) {
				t.Fatalf("fio did not get going\n%s", report())
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The back-end drops its session in the middle of a verified run:
	// QEMU reconnects (reconnect=1) and the new session resubmits what the
	// inflight region says was popped and not completed.
	done := make(chan string, 1)
	go func() { done <- fio("restart", "randwrite", "4k", "--offset=32M --size=32M") }()
	midRun(1000)
	before := srv.Counters.Sessions.Load()
	srv.Disconnect()
	select {
	case out = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("fio across the restart did not finish\n%s", report())
	}
	t.Logf("fio randwrite 4k + verify across a back-end disconnect (sessions %d → %d):\n%s", before,
		srv.Counters.Sessions.Load(), tail(out, 12))
	for end := time.Now().Add(10 * time.Second); srv.Counters.Sessions.Load() <= before && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if srv.Counters.Sessions.Load() <= before {
		t.Fatalf("no new session after the disconnect\n%s", report())
	}
	// Harder: the target stalls with requests in flight, the back-end
	// drops its session and gives up on them (detached from guest memory,
	// unanswered); the next session resubmits them from the inflight
	// region and fio's verification still passes.
	go func() { done <- fio("stall", "randwrite", "4k", "--offset=0 --size=32M") }()
	midRun(1000)
	release := make(chan struct{})
	stalled := make(chan struct{})
	s.Do(func(*falcon.Endpoint) { close(stalled); <-release })
	<-stalled
	time.Sleep(200 * time.Millisecond) // requests pile up in flight
	resub := srv.Counters.InflightResub.Load()
	srv.Disconnect()
	time.Sleep(blk.drain + 1500*time.Millisecond) // the old worker gives up; QEMU reconnects
	close(release)
	select {
	case out = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("fio across the stalled restart did not finish\n%s", report())
	}
	t.Logf("fio randwrite 4k + verify across a stalled disconnect (cancelled %d, resubmitted %d):\n%s",
		blk.Stats.Cancelled.Load(), srv.Counters.InflightResub.Load()-resub, tail(out, 6))
	if blk.Stats.Cancelled.Load() == 0 || srv.Counters.InflightResub.Load() == resub {
		t.Fatalf("nothing was in flight across the restart\n%s", report())
	}
	// A back-end restart with requests in flight: the whole back-end
	// (ports, engines, disk, server) goes away while the target is stalled
	// and a new one takes the socket, as a restarted daemon would. QEMU
	// reconnects, the new back-end resubmits what the inflight region
	// holds, and the namespace file keeps what was written.
	go func() { done <- fio("restart-backend", "randwrite", "4k", "--offset=32M --size=32M") }()
	midRun(1000)
	release2 := make(chan struct{})
	stalled2 := make(chan struct{})
	s.Do(func(*falcon.Endpoint) { close(stalled2); <-release2 })
	<-stalled2
	time.Sleep(200 * time.Millisecond)
	oldServed := served
	stop()
	<-oldServed
	startBackend()
	close(release2)
	select {
	case out = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("fio across the back-end restart did not finish\n%s", report())
	}
	t.Logf("fio randwrite 4k + verify across a back-end restart (new back-end resubmitted %d):\n%s",
		srv.Counters.InflightResub.Load(), tail(out, 6))
	if srv.Counters.InflightResub.Load() == 0 {
		t.Fatalf("the new back-end resubmitted nothing\n%s", report())
	}
	t.Logf("blk counters: %v", blk.Stats.Set().NonZero())
	t.Logf("initiator counters: %v", ini.Engine.Stats.Set().NonZero())
	t.Logf("vhost-user counters: %v", nonZero(srv.Counters.Set().Snapshot()))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// nonZero returns m's non-zero entries.
func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
