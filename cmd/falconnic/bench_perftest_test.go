package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"falconnic/device"
)

const bwOutput = ` #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      5000             594.98             408.61 		   0.006538
---------------------------------------------------------------------------------------
`

const latOutput = ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       1000          61.64          3850.27      172.95   	       279.80      	347.71 		1920.47 		3850.27
`

func TestParsePerftestReadsBandwidthAverageAndTypicalLatency(t *testing.T) {
	if v, err := parsePerftest(perftestCases[0], bwOutput); err != nil || v != 408.61 {
		t.Fatalf("bandwidth = %v, %v; want 408.61", v, err)
	}
	if v, err := parsePerftest(perftestCases[2], latOutput); err != nil || v != 172.95 {
		t.Fatalf("latency = %v, %v; want 172.95", v, err)
	}
	if _, err := parsePerftest(perftestCases[0], "Couldn't connect to 10.0.0.2:18515\n"); err == nil {
		t.Fatal("no result line was accepted")
	}
	if _, err := parsePerftest(perftestCases[0], latOutput); err == nil {
		t.Fatal("a latency table was read as bandwidth")
	}
}

func TestPerftestMiBIsBytesTimesIterations(t *testing.T) {
	if got := perftestMiB(bwOutput); got != 65536*5000.0/(1<<20) {
		t.Fatalf("MiB = %v, want %v", got, 65536*5000.0/(1<<20))
	}
	if got := perftestMiB(latOutput); got != 0 {
		t.Fatalf("a latency table moved %v MiB, want 0", got)
	}
}

func TestWithItersAddsTheCountToBandwidthProgramsOnly(t *testing.T) {
	if got := withIters(perftestCases, 0); &got[0] != &perftestCases[0] {
		t.Fatal("iters 0 should leave the cases as they are")
	}
	got := withIters(perftestCases, 30000)
	for i, c := range got {
		want := strings.Join(perftestCases[i].argv, " ")
		if c.bandwidth {
			want += " -n 30000"
		}
		if s := strings.Join(c.argv, " "); s != want {
			t.Errorf("case %d: %q, want %q", i, s, want)
		}
	}
	if s := strings.Join(perftestCases[0].argv, " "); s != "ib_write_bw -s 65536" {
		t.Fatalf("withIters changed the table: %q", s)
	}
}

// A run the harness repeated for perftest's calibration moved its data
// each time: the daemon's CPU is per MiB of all of them.
func TestMovedRunsCountsCalibrationReruns(t *testing.T) {
	if n := movedRuns(perftestResult{}); n != 1 {
		t.Fatalf("one run: %v", n)
	}
	if n := movedRuns(perftestResult{Calibrations: 2, CMRestarts: 3}); n != 3 {
		t.Fatalf("two calibration reruns (CM restarts move no data): %v", n)
	}
}

func TestMedianOfOddAndEvenSamples(t *testing.T) {
	if m := perftestMedian([]float64{3, 1, 2}); m != 2 {
		t.Fatalf("median = %v, want 2", m)
	}
	if m := perftestMedian([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Fatalf("median = %v, want 2.5", m)
	}
}

func TestSplitPrograms(t *testing.T) {
	got := splitPrograms([]string{"ib_write_bw", "-s", "65536", "--", "--", "ib_write_lat"})
	if len(got) != 2 || strings.Join(got[0], " ") != "ib_write_bw -s 65536" || strings.Join(got[1], " ") != "ib_write_lat" {
		t.Fatalf("splitPrograms = %q", got)
	}
}

func FuzzParsePerftest(f *testing.F) {
	f.Add(bwOutput)
	f.Add(latOutput)
	f.Add(" 65536 5000 nan inf 1\n")
	f.Fuzz(func(t *testing.T, out string) {
		for _, c := range perftestCases {
			if v, err := parsePerftest(c, out); err == nil && !(v > 0) {
				t.Fatalf("accepted non-positive figure %v", v)
			}
		}
	})
}

func TestARunFailsWhenThePingpongServerReportsBadData(t *testing.T) {
	ok := perftestResult{Client: "8192000 bytes in 0.75 seconds = 87.19 Mbit/sec\n", Server: "8192000 bytes in 0.75 seconds = 87.19 Mbit/sec\n"}
	if err := ok.Err(); err != nil {
		t.Fatalf("clean run failed: %v", err)
	}
	bad := ok
	bad.Server = "invalid data in page 3\n" + ok.Server
	if bad.Err() == nil {
		t.Fatal("a server reporting invalid data passed")
	}
}

// A client that reached no listener is retried; other failures are not.
func TestNotListeningMatchesTheNoListenerReports(t *testing.T) {
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"Couldn't connect to 10.0.0.2:18515", true},
		{"Unexpected CM event bl blka 8 (RDMA_CM_EVENT_REJECTED)", true},
		// ib_send_lat -R -c UD against a server not listening yet: the
		// SIDR REP's status 1, IB_SIDR_UNSUPPORTED (seen in CI).
		{"RDMA CM event error:\nEvent: RDMA_CM_EVENT_UNREACHABLE; error: 1.\n\nERRNO: Operation not supported.", true},
		{"Event: RDMA_CM_EVENT_UNREACHABLE; error: -110.", false}, // a timeout: no retry
		{"Event: RDMA_CM_EVENT_UNREACHABLE; error: 12.", false},
		{"Failed to modify QP to RTR", false},
	} {
		if got := notListening(c.out); got != c.want {
			t.Errorf("notListening(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}

// perftest's failed CPU-frequency calibration, as a loaded host's guest
// printed it in CI, is what rdmaPair.run runs again for.
func TestPerftestCalibrationMatchesItsReport(t *testing.T) {
	if !perftestCalibration.MatchString("Correlation coefficient r^2: 0.785613 < 0.9\nCan't produce a report\n") {
		t.Error("the calibration failure is not recognized")
	}
	if perftestCalibration.MatchString("Couldn't connect to 10.0.0.2:18515") {
		t.Error("a connection failure is taken for a calibration failure")
	}
	// ib_send_lat under a loaded host (session 31): exit status 0, the
	// warning, and a report of inf that no parser can use.
	inf := perftestResult{Client: "Correlation coefficient r^2: 0.800849 < 0.9\n" +
		" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n 8       1000          inf            inf          inf\n"}
	if !calibrationFailed(inf) {
		t.Error("a report after a failed calibration, exit status 0, is not run again")
	}
	if calibrationFailed(perftestResult{Client: " 8       1000          2.10           9.80         3.05\n"}) {
		t.Error("a good report is taken for a calibration failure")
	}
	// The server's calibration failed (session 32, ib_write_bw over a
	// lossy fabric): the run is the benchmark's clock, not the NIC's.
	if !calibrationFailed(perftestResult{Server: "Correlation coefficient r^2: 0.67 < 0.9\nCan't produce a report\n",
		ServerErr: errors.New("exited with status 1")}) {
		t.Error("the server's calibration failure is not run again")
	}
}

func TestPairNICsCarryPollingAndFirmwareIntoTheDaemonsConfig(t *testing.T) {
	o := pairOptions{doorbellPolling: true, pollWindowCap: time.Millisecond, firmware: "fixed"}
	b, err := json.Marshal(daemonConfig{Control: "control.sock", NICs: o.nics()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := device.ParseConfig(b)
	if err != nil {
		t.Fatalf("the daemon refuses the pair's config: %v\n%s", err, b)
	}
	for _, n := range cfg.NICs {
		if n.RDMA == nil || n.RDMA.DoorbellPolling != "on" || time.Duration(n.RDMA.PollWindowCap) != time.Millisecond ||
			n.Firmware == nil || n.Firmware.Name != "fixed" {
			t.Fatalf("NIC %s: rdma %+v firmware %+v", n.Name, n.RDMA, n.Firmware)
		}
	}
	// The defaults write neither, so that an older daemon (--daemon-bin)
	// reads the same config it always did.
	b, _ = json.Marshal(daemonConfig{Control: "control.sock", NICs: pairOptions{}.nics()})
	if strings.Contains(string(b), "rdma") || strings.Contains(string(b), "firmware") {
		t.Fatalf("default pair config names settings: %s", b)
	}
}

func TestPollDeltasListsTheCountersThatMoved(t *testing.T) {
	a := doorbellCount{poll: map[string]uint64{"rdma.verbs.poll_found": 3, "rdma.verbs.poll_late": 1, "rdma.rdma_doorbells": 9}}
	b := doorbellCount{poll: map[string]uint64{"rdma.verbs.poll_found": 10, "rdma.verbs.poll_late": 1, "rdma.rdma_doorbells": 12,
		"rdma.verbs.poll_starved_off": 2}}
	if got, want := pollDeltas(a, b), "found +7, starved_off +2"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	// The firmware's counters, as daemonCounters names them.
	fa := map[string]uint64{"retx_rto": 1, firmwareCounterPrefix + "decreases": 4, firmwareCounterPrefix + "events": 10}
	fb := map[string]uint64{"retx_rto": 3, firmwareCounterPrefix + "decreases": 4, firmwareCounterPrefix + "events": 25,
		firmwareCounterPrefix + "paced": 2}
	if got, want := movedCounters(fa, fb, firmwareCounterPrefix), "events +15, paced +2"; got != want {
		t.Fatalf("firmware: got %q, want %q", got, want)
	}
}

// perftest 4.5's report of a rejected rdma_cm test connection trips the
// watch (once, even when the message spans writes); the handshake's own
// rejection, which the client's plain retry handles, does not.
func TestCMDataErrorTripsTheWatchOnce(t *testing.T) {
	trips := 0
	w := &watchWriter{re: cmDataError, trip: func() { trips++ }}
	for _, part := range []string{" local address: LID 0000 QPN 0x0011\n", "RDMA CM event", " error:\nEvent: RDMA_CM_EVENT_REJECTED; error: 8.\n",
		"Failed to handle RDMA CM event.\nRDMA CM event error:\n"} {
		w.Write([]byte(part))
	}
	if trips != 1 {
		t.Fatalf("%d trips, want 1", trips)
	}
	if !strings.HasSuffix(w.buf.String(), "RDMA CM event error:\n") {
		t.Fatalf("output not kept: %q", w.buf.String())
	}
	if cmDataError.MatchString("Unexpected CM event bl blka 8\n") {
		t.Fatal("the handshake's rejection is taken for the test connection's")
	}
}
