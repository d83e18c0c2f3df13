package main

import (
	"strings"
	"testing"
	"time"
)

// An iperf3 -J client report (trimmed from iperf3 3.12) yields the
// receiver's and sender's rates and the sender's retransmits.
const iperf3Report = `{
	"start": {"connected": [{"socket": 5}], "version": "iperf 3.12"},
	"intervals": [],
	"end": {
		"streams": [],
		"sum_sent": {"start": 0, "end": 10.0, "seconds": 10.0, "bytes": 812646400, "bits_per_second": 650117120.0, "retransmits": 12, "sender": true},
		"sum_received": {"start": 0, "end": 10.04, "seconds": 10.04, "bytes": 810000000, "bits_per_second": 645418326.7, "sender": true},
		"cpu_utilization_percent": {"host_total": 80.1}
	}
}
`

func TestIperf3ReportGivesReceiverRateSenderRateAndRetransmits(t *testing.T) {
	r, err := parseVMNetIperf3([]byte(iperf3Report))
	if err != nil {
		t.Fatal(err)
	}
	if r.receiverBps != 645418326.7 || r.senderBps != 650117120.0 || r.retransmits != 12 {
		t.Fatalf("got %+v", r)
	}
}

func TestIperf3ReportWithStderrAroundItIsRead(t *testing.T) {
	out := "warning: something\n" + iperf3Report + "\n"
	if _, err := parseVMNetIperf3([]byte(out)); err != nil {
		t.Fatal(err)
	}
}

func TestIperf3ReportsThatAreNotMeasurementsAreErrors(t *testing.T) {
	for name, in := range map[string]string{
		"empty":         "",
		"not json":      "iperf3: error - unable to connect to server: Connection refused",
		"error field":   `{"start": {}, "end": {}, "error": "unable to connect to server: Connection refused"}`,
		"no end":        `{"start": {}}`,
		"zero receiver": `{"end": {"sum_sent": {"bits_per_second": 5}, "sum_received": {"bits_per_second": 0}}}`,
		"negative":      `{"end": {"sum_sent": {"bits_per_second": -1}, "sum_received": {"bits_per_second": 10}}}`,
		"truncated":     iperf3Report[:200] + "}",
	} {
		if r, err := parseVMNetIperf3([]byte(in)); err == nil {
			t.Errorf("%s: accepted as %+v", name, r)
		}
	}
}

// u-root's ping prints Go durations; the reply lines give the times in
// order, and anything else is skipped.
func TestPingRepliesGiveRoundTripTimesInOrder(t *testing.T) {
	out := strings.Join([]string{
		"64 bytes from 10.0.0.2: icmp_seq=1 time=2.5ms",
		"64 bytes from 10.0.0.2: icmp_seq=2 time=512.25µs",
		"64 bytes from 10.0.0.2: icmp_seq=3 time=900us",
		"64 bytes from 10.0.0.2: icmp_seq=4 time=bogus",
		"64 bytes from 10.0.0.2: icmp_seq=5 time=-3ms",
		"ping: ping failed: conn.Read failed: i/o timeout",
		"",
	}, "\n")
	got := parseVMNetPingTimes(out)
	want := []time.Duration{2500 * time.Microsecond, 512250 * time.Nanosecond, 900 * time.Microsecond}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestVMNetMedianOfOddAndEvenCounts(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := vmnetMedian(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestVMNetQuantileByNearestRank(t *testing.T) {
	xs := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	for _, c := range []struct{ q, want float64 }{{0.9, 9}, {0.5, 5}, {1, 10}, {0, 1}} {
		if got := vmnetQuantile(xs, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if vmnetQuantile(nil, 0.9) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

// Two links measured in adjacent pairs: medians of each link, ratios of
// the medians, per-pair ratios and their median, and the goals.
func TestCompareLinksGivesMedianAndPairedRatios(t *testing.T) {
	series := func(tput, rtt []float64) *vmnetSeries {
		s := &vmnetSeries{}
		for i := range tput {
			s.add(vmnetOne{mbps: tput[i], rttMed: rtt[i], rtts: []float64{rtt[i]}})
		}
		s.summarize()
		return s
	}
	f := series([]float64{400, 300, 500}, []float64{3000, 2000, 4000})
	s := series([]float64{200, 300, 250}, []float64{3000, 4000, 2000})
	r := vmnetCompareLinks(f, s)
	if f.MedianThroughput != 400 || s.MedianThroughput != 250 || f.MedianRTT != 3000 || s.MedianRTT != 3000 {
		t.Fatalf("medians: falconnic %v/%v, stream %v/%v", f.MedianThroughput, f.MedianRTT, s.MedianThroughput, s.MedianRTT)
	}
	if r.Throughput != 1.6 || r.RTT != 1 || r.PooledRTT != 1 {
		t.Fatalf("ratios %+v", r)
	}
	wantT, wantR := []float64{2, 1, 2}, []float64{1, 0.5, 2}
	for i := range wantT {
		if r.PairedThroughput[i] != wantT[i] || r.PairedRTT[i] != wantR[i] {
			t.Fatalf("paired %v %v, want %v %v", r.PairedThroughput, r.PairedRTT, wantT, wantR)
		}
	}
	if r.PairedTputMedian != 2 || r.PairedRTTMedian != 1 || !r.GoalTput || !r.GoalRTT {
		t.Fatalf("paired medians and goals %+v", r)
	}
	if vmnetCompareLinks(f, &vmnetSeries{}) != nil || vmnetCompareLinks(nil, s) != nil {
		t.Fatal("ratios without samples on both links")
	}
}

// /proc/PID/stat: utime and stime are fields 14 and 15, after a comm that
// may hold spaces and parentheses.
func TestProcStatCPUReadsUtimePlusStime(t *testing.T) {
	line := "4242 (qemu-system-x86 (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 5 0 100 0 0\n"
	if got := vmnetProcStatCPU([]byte(line)); got != 3.8 {
		t.Fatalf("got %v, want 3.8", got)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x y"} {
		if got := vmnetProcStatCPU([]byte(bad)); got != 0 {
			t.Errorf("%q: got %v, want 0", bad, got)
		}
	}
}

func FuzzParseVMNetIperf3(f *testing.F) {
	f.Add([]byte(iperf3Report))
	f.Add([]byte(`{"error": "x"}`))
	f.Add([]byte(`}{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseVMNetIperf3(b)
		if err == nil && !(r.receiverBps > 0) {
			t.Fatalf("accepted a non-positive rate: %+v", r)
		}
	})
}

func FuzzParseVMNetPingTimes(f *testing.F) {
	f.Add("64 bytes from 10.0.0.2: icmp_seq=1 time=2.5ms\n")
	f.Add("64 bytes from 10.0.0.2: icmp_seq=1 time=1h\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, d := range parseVMNetPingTimes(s) {
			if d <= 0 {
				t.Fatalf("non-positive time %v from %q", d, s)
			}
		}
	})
}

func FuzzVMNetProcStatCPU(f *testing.F) {
	f.Add([]byte("4242 (qemu) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := vmnetProcStatCPU(b); got < 0 {
			t.Fatalf("negative CPU time %v", got)
		}
	})
}
