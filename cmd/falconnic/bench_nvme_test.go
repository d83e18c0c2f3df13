package main

import "testing"

// fioJSON is fio 3.33's --output-format=json, trimmed, after a line fio
// may print first.
const fioJSON = `note: both iodepth >= 1 and synchronous I/O engine are selected
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "randread_4k_qd32",
      "error" : 0,
      "read" : {"io_bytes" : 41943040, "bw" : 5120, "iops" : 1280.5, "total_ios" : 10240},
      "write" : {"io_bytes" : 0, "bw" : 0, "iops" : 0.0, "total_ios" : 0}
    }
  ]
}`

func TestFioResult(t *testing.T) {
	if v, err := fioResult(fioJSON, nvmeBenchTests[0]); err != nil || v != 1280.5 {
		t.Errorf("randread IOPS %v %v, want 1280.5", v, err)
	}
	if v, err := fioResult(fioJSON, nvmeBenchTest{RW: "read", Metric: "MiB/s"}); err != nil || v != 5 {
		t.Errorf("read bandwidth %v %v, want 5 MiB/s", v, err)
	}
	// The write side did no I/O: an error, not a zero.
	if _, err := fioResult(fioJSON, nvmeBenchTests[1]); err == nil {
		t.Error("a run without writes gave a write figure")
	}
	for _, bad := range []string{"", "fio: no such file", `{"jobs": []}`, `{"jobs": [{"error": 5}]}`, `{"jobs": [`} {
		if _, err := fioResult(bad, nvmeBenchTests[0]); err == nil {
			t.Errorf("fio output %q accepted", bad)
		}
	}
}

func TestFioMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := fioMedian(c.in); got != c.want {
			t.Errorf("fioMedian(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	// Pairs 0.5, 1.0 (slow host), 0.8 → 0.8; a zero local figure is skipped.
	if got := pairedRatio([]float64{100, 100, 80, 5}, []float64{200, 100, 100, 0}); got != 0.8 {
		t.Errorf("pairedRatio = %v, want 0.8", got)
	}
}

// FuzzFioResult: fio's output comes from the guest; no input panics, and
// a figure is never negative.
func FuzzFioResult(f *testing.F) {
	f.Add(fioJSON, 0)
	f.Add(`{"jobs": [{"error": 0, "write": {"bw": -5, "iops": -1, "total_ios": 1}}]}`, 1)
	f.Add(`{"jobs": [{"error": 0, "read": {"bw": 1, "iops": 1e308, "total_ios": 1}}]}`, 2)
	f.Fuzz(func(t *testing.T, out string, i int) {
		tc := nvmeBenchTests[uint(i)%uint(len(nvmeBenchTests))]
		if v, err := fioResult(out, tc); err == nil && !(v >= 0) {
			t.Fatalf("figure %v from %q", v, out)
		}
	})
}

func TestPickNVMeTests(t *testing.T) {
	all, err := pickNVMeTests("")
	if err != nil || len(all) != len(nvmeBenchTests) {
		t.Fatalf("default: %d tests, %v", len(all), err)
	}
	got, err := pickNVMeTests("write_128k,randread_4k")
	if err != nil || len(got) != 2 || got[0].Name != "write_128k" || got[1].Name != "randread_4k_qd32" {
		t.Fatalf("picked %v, %v", got, err)
	}
	if _, err := pickNVMeTests("nosuch"); err == nil {
		t.Error("an unknown test name was accepted")
	}
}

func TestNVMeBenchCPU(t *testing.T) {
	var c nvmeBenchCPU
	// 11 s at 100 MiB/s for 11 s of fio time (12 s wall): the daemon's
	// 2.2 s are 2 ms per MiB, QEMU's 4.4 s 4 ms per MiB; 6.6 s over 12 s
	// of wall time kept 0.55 cores busy. 1,100 to 3,300 context switches
	// over the 1,100 MiB are 1 to 3 per MiB, and 2,200 to 6,600 guest
	// interrupts 2 to 6.
	c.add(true, 2.2, 4.4, 1100, 2200, 12, 11, 100, true)
	c.add(true, 3.3, 4.4, 2200, 4400, 12, 11, 100, true)
	c.add(true, 4.4, 4.4, 3300, 6600, 12, 11, 100, true)
	c.add(false, 0, 3.3, 0, 550, 11, 11, 100, true)
	c.add(false, 0, 1, 0, 0, 0, 11, 100, true) // no wall time: left out
	c.add(false, 0, 1, 0, 0, 11, 11, 0, true)  // no work done: left out
	c.summarize(true)
	got := [...]any{c.Unit, c.NVMeDaemon, c.NVMeQEMU, c.LocalQEMU, c.NVMeCores, c.LocalCores, c.NVMeDaemonSwitches, c.NVMeGuestIRQs, c.LocalGuestIRQs}
	if want := [...]any{"cpu ms per MiB", 3.0, 4.0, 3.0, 0.642, 0.3, 2.0, 4.0, 0.5}; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	// IOPS tests: µs per IO.
	var d nvmeBenchCPU
	d.add(true, 1, 2, 5000, 7500, 10, 10, 1000, false)
	d.summarize(false)
	if d.Unit != "cpu µs per IO" || d.NVMeDaemon != 100 || d.NVMeQEMU != 200 || d.NVMeDaemonSwitches != 0.5 || d.NVMeGuestIRQs != 0.75 {
		t.Errorf("per IO: %+v", d)
	}
}

func TestQueueIRQs(t *testing.T) {
	const procInterrupts = `           CPU0       CPU1
  0:        109          3   IO-APIC   2-edge      timer
 24:          0          0   PCI-MSI 16384-edge      virtio1-config
 25:       7023         10   PCI-MSI 16385-edge      virtio1-req.0
 26:          5          1   PCI-MSI 16386-edge      virtio1-req.1
 27:          4          0   PCI-MSI 32769-edge      virtio10-req.0
 28:         14          0   PCI-MSI 49153-edge      virtio2-virtqueues
NMI:          0          0   Non-maskable interrupts
`
	for name, want := range map[string]uint64{"virtio1": 7039, "virtio10": 4, "virtio2": 14, "virtio3": 0} {
		if got := queueIRQs(procInterrupts, name); got != want {
			t.Errorf("%s: %d interrupts, want %d", name, got, want)
		}
	}
}
