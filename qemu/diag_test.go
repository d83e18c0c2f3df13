package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestArgsDiagnosisChannels: the agent's diagnosis port sits beside its
// first port, QMP has its socket, and QEMU names its threads.
func TestArgsDiagnosisChannels(t *testing.T) {
	m := base()
	m.DiagSock, m.QMPSock = "/s/A/diag.sock", "/s/A/qmp.sock"
	a, err := m.Args()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a, " ")
	for _, want := range []string{
		"-name A,debug-threads=on",
		"-chardev socket,id=diag,path=/s/A/diag.sock,server=on,wait=off",
		"-device virtserialport,chardev=diag,name=falconnic.diag",
		"-qmp unix:/s/A/qmp.sock,server=on,wait=off",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	m.DiagSock = "/s/A,x/diag.sock"
	if _, err := m.Args(); err == nil {
		t.Error("a diagnosis socket path with a comma was accepted")
	}
}

// fakeQMP serves QMP on path: a greeting, events between answers, and
// human-monitor-command answered from replies.
func fakeQMP(t *testing.T, path string, replies map[string]string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				w := json.NewEncoder(c)
				w.Encode(map[string]any{"QMP": map[string]any{"version": map[string]any{}}})
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					var cmd struct {
						Execute   string `json:"execute"`
						Arguments struct {
							Line string `json:"command-line"`
						} `json:"arguments"`
					}
					if json.Unmarshal(sc.Bytes(), &cmd) != nil {
						w.Encode(map[string]any{"error": map[string]any{"class": "GenericError"}})
						continue
					}
					w.Encode(map[string]any{"event": "NOISE"})
					if cmd.Execute == "qmp_capabilities" {
						w.Encode(map[string]any{"return": map[string]any{}})
						continue
					}
					w.Encode(map[string]any{"return": replies[cmd.Arguments.Line]})
				}
			}()
		}
	}()
}

// TestDiagnoseWalksVirtioQueues: Diagnose lists every virtio device QMP
// reports with the status of each queue the driver set up (and of the
// vhost side for a vhost device), skipping rings never set up.
func TestDiskAddrLines(t *testing.T) {
	qtree := "bus: pcie.0\n  dev: virtio-blk-pci, id \"\"\n    ioeventfd = true\n    addr = 03.0\n" +
		"  dev: virtio-serial-pci, id \"\"\n    addr = 04.0\n  dev: vhost-user-blk-pci, id \"\"\n    addr = 02.0\n"
	want := "dev: virtio-blk-pci, id \"\" addr = 03.0\ndev: vhost-user-blk-pci, id \"\" addr = 02.0"
	if got := diskAddrLines(qtree); got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestDiagnoseWalksVirtioQueues(t *testing.T) {
	dir := t.TempDir()
	v := &VM{Name: "A", Dir: dir}
	if err := os.WriteFile(v.PidFile(), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	blk := "/machine/peripheral-anon/device[1]/virtio-backend"
	fakeQMP(t, v.QMPSock(), map[string]string{
		"info virtio":                                  blk + " [vhost-user-blk]\r\n",
		"info virtio-status " + blk:                    "  vhost_started:           true\n  num_vqs:                 2\n  VHost:\n",
		"info virtio-queue-status " + blk + " 0":       "  last_avail_idx: 7\n  VRing:\n    num: 8\n    desc: 0x0000000012340000\n    avail: 0x0000000012340080\n    used: 0x00000000123400c0\n",
		"info registers -a":                            "CPU#0\r\nRAX=0 RBX=0\r\nRIP=ffffffff81c0d7ab RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1\r\nES =0000\r\n",
		"xp /1hx 0x12340080":                           "0000000012340080: 0x0001\r\n",
		"xp /1hx 0x12340082":                           "0000000012340082: 0x0009\r\n",
		"xp /1hx 0x12340094":                           "0000000012340094: 0x0006\r\n",
		"xp /1hx 0x123400c2":                           "00000000123400c2: 0x0007\r\n",
		"xp /1hx 0x12340104":                           "0000000012340104: 0x0007\r\n",
		"info virtio-vhost-queue-status " + blk + " 0": "  vhost avail_idx: 7\n",
		"info virtio-queue-status " + blk + " 1":       "  desc:         0x0000000000000000\n",
		"info virtio-vhost-queue-status " + blk + " 1": "  vhost unused\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := v.virtioQueues(ctx)
	for _, want := range []string{"[vhost-user-blk], 2 queues", "last_avail_idx: 7", "vhost avail_idx: 7",
		"guest ring words: avail.flags 0x1 avail.idx 9 used_event 6 | used.idx 7 avail_event 7"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if rip := v.ripSamples(ctx, 2, time.Millisecond); strings.Count(rip, "RIP=ffffffff81c0d7ab RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1") != 2 {
		t.Errorf("RIP samples:\n%s", rip)
	}
	if strings.Contains(got, "queue-status "+blk+" 1:") {
		t.Errorf("a ring never set up is listed:\n%s", got)
	}
	// No monitor: the report says so rather than waiting.
	w := &VM{Name: "B", Dir: filepath.Join(dir, "none")}
	if got := w.virtioQueues(ctx); !strings.Contains(got, "qmp:") {
		t.Errorf("without a monitor: %q", got)
	}
}

// threadActivity reads a live process's threads (this test's own): a
// line per thread whose samples add up, and the sampling thread finds
// itself running.
func TestThreadActivityOfALiveProcess(t *testing.T) {
	out := threadActivity(context.Background(), os.Getpid(), 5, 10*time.Millisecond)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	running := false
	for _, l := range lines {
		if !threadLineRE.MatchString(l) {
			t.Fatalf("line %q of:\n%s", l, out)
		}
		n := 0
		for _, m := range sampleRE.FindAllStringSubmatch(l, -1) {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
		if n != 5 && !strings.Contains(l, "gone") {
			t.Fatalf("%d samples in %q, want 5", n, l)
		}
		running = running || strings.Contains(l, "running")
	}
	if len(lines) < 2 || !running {
		t.Fatalf("activity:\n%s", out)
	}
}

var (
	threadLineRE = regexp.MustCompile(`^thread \d+ "[^"]*": (gone|CPU \d+\.\d\d s/s, \d+ voluntary and \d+ involuntary switches/s; .+)$`)
	sampleRE     = regexp.MustCompile(`(?:running|gone|syscall \d+) (\d+)`)
)
