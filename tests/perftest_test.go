package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Unmodified Debian perftest and the libibverbs pingpong examples between
// two guests whose falconnic.ko drives the NIC's RDMA function (falcon0).
// perftest itself does not check payloads; ibv_rc_pingpong -c does.
// With -R perftest sets up its QPs through rdma_cm: the kernel's ib_cm
// exchanges MADs between the guests' GSI QPs (QP1), which the NICs run.

var (
	// bwResult is perftest's bandwidth line: bytes, iterations, peak, average.
	bwResult = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+\s*$`)
	// latResult is perftest's latency line: bytes, iterations, t_min, t_max, t_typical.
	latResult = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+`)
	// pingpongResult is the libibverbs examples' summary line.
	pingpongResult = regexp.MustCompile(`(?m)^(\d+) bytes in ([0-9.]+) seconds = ([0-9.]+) Mbit/sec`)
	// notListening is a client's report that the server is not listening
	// yet: TCP (perftest, pingpong) or an rdma_cm reject (-R, rping).
	notListening = regexp.MustCompile(`Couldn't connect to|` + cmRejectedRE)
	// rpingResult is one of rping -v's verified ping lines.
	rpingResult = regexp.MustCompile(`(?m)^ping data: rdma-ping-\d+: `)
)

// rdmaGuests boots A and B on one daemon and waits until falcon0 is
// ACTIVE in both.
func rdmaGuests(t *testing.T) (a, b *vm) {
	t.Helper()
	guestImage(t)
	state := stateDir(t)
	startDaemon(t, state, daemonConfig{
		Control: "control.sock",
		NICs: []nicSpec{
			{Name: "a0", Socket: "a0.sock", MAC: "52:54:00:fd:00:0a"},
			{Name: "b0", Socket: "b0.sock", MAC: "52:54:00:fd:00:0b"},
		},
	})
	a = boot(t, state, "A", "--nic", filepath.Join(state, "a0.sock")+",mac=52:54:00:fd:00:0a,ip=10.0.0.1/24")
	b = boot(t, state, "B", "--nic", filepath.Join(state, "b0.sock")+",mac=52:54:00:fd:00:0b,ip=10.0.0.2/24")
	for _, v := range []*vm{a, b} {
		deadline := time.Now().Add(90 * time.Second)
		for {
			out, err := v.tryExec(context.Background(), "ibv_devinfo", "-d", "falcon0")
			if err == nil && strings.Contains(out, "PORT_ACTIVE") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("vm %s: falcon0 not ACTIVE after 90s: %v\n%s", v.name, err, out)
			}
			time.Sleep(time.Second)
		}
	}
	return a, b
}

// badData is the pingpong examples' report (with -c, on the server side,
// exit status 0) of a received buffer that differs from what was sent.
var badData = regexp.MustCompile(`(?i)invalid data in page`)

// clientServer runs argv as the server in b and argv + bIP as the client
// in a (retried while the server does not listen yet) and returns the
// client's output; either side failing or reporting bad data fails the
// test.
func clientServer(t *testing.T, a, b *vm, bIP string, argv ...string) string {
	t.Helper()
	for try := 1; ; try++ {
		out, failure, lost := tryClientServer(a, b, bIP, argv...)
		if failure == "" {
			return out
		}
		// perftest measures the CPU's frequency itself (TSC against
		// gettimeofday) and exits when its samples disagree; a TCG vCPU
		// that the loaded host deschedules spoils them. That is the
		// benchmark's calibration, not the NIC: run it again, at most twice.
		// So is a pair that perftest's rdma_cm bug lost (lost): run both
		// sides again.
		if !(lost || perftestCalibration.MatchString(failure)) || try == 3 {
			t.Fatal(failure)
		}
		why := "perftest's CPU-frequency calibration failed (a loaded host)"
		if lost {
			why = "perftest lost its rdma_cm connection (its -R bug): both sides"
		}
		t.Logf("%s: %s, again", strings.Join(argv, " "), why)
	}
}

// cmDataError is perftest's report of a failed RDMA CM event on its -R
// test connection: its client's request reached B before B's server
// listened. perftest 4.5 then retries with the rdma_cm IDs it has just
// freed, and B's server waits for a connection that cannot come, refusing
// every new client (falconnic's perftest command, cmd/falconnic/perftest.go,
// handles it the same way: both sides run again).
var cmDataError = regexp.MustCompile(`RDMA CM event error:`)

// serverLost is how many rdma_cm rejects in a row (cmRejected), with B's
// server still running, mean the server no longer listens (the bug above,
// whose first symptom the client may not print) rather than that it has
// yet to start: a server listens within a few seconds of starting.
const serverLost = 10

// cmRejected is an rdma_cm client's report that nothing listened (-R).
var cmRejected = regexp.MustCompile(cmRejectedRE)

const cmRejectedRE = `Unexpected CM event bl blka 8\b|RDMA_CM_EVENT_REJECTED`

// perftestCalibration is perftest's message when its CPU-frequency samples
// disagree.
var perftestCalibration = regexp.MustCompile(`Correlation coefficient r\^2: [0-9.e-]+ < 0\.9`)

// tryClientServer runs argv as server in b and client in a (to bIP); it
// returns the client's output, or a description of the failure and
// whether the pair was lost to perftest's rdma_cm bug (both sides killed).
func tryClientServer(a, b *vm, bIP string, argv ...string) (string, string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	type result struct {
		out string
		err error
	}
	srv := make(chan result, 1)
	go func() {
		out, err := b.tryExec(ctx, argv...)
		srv <- result{out, err}
	}()
	client := append(append([]string(nil), argv...), bIP)
	var out string
	var err error
	var server *result
	lost := false
	for try := 0; ; try++ {
		time.Sleep(time.Second)
		out, err = a.tryExec(ctx, client...)
		if err != nil && (cmDataError.MatchString(out) || cmRejected.MatchString(out) && try+1 >= serverLost) {
			lost = true
			break
		}
		if err == nil || !notListening.MatchString(out) || try == 30 {
			break
		}
		select {
		case r := <-srv:
			server = &r
		default:
		}
		if server != nil {
			break
		}
	}
	if lost && server == nil {
		cancel()
		r := <-srv
		server = &r
	}
	if server == nil {
		select {
		case r := <-srv:
			server = &r
		case <-time.After(30 * time.Second):
			cancel()
			r := <-srv
			server = &r
		}
	}
	if err != nil || server.err != nil || badData.MatchString(server.out+out) {
		return out, fmt.Sprintf("%s: client (A): %v\n%s\nserver (B): %v\n%s", strings.Join(argv, " "), err, out, server.err, server.out), lost
	}
	return out, "", false
}

// checkPerftest checks a run's output by the program's kind and logs the
// figure perftest measured.
func checkPerftest(t *testing.T, argv []string, out string) {
	t.Helper()
	name := strings.Join(argv, " ")
	switch {
	case strings.HasSuffix(argv[0], "_bw"):
		m := bwResult.FindAllStringSubmatch(out, -1)
		if m == nil {
			t.Fatalf("%s: no bandwidth line:\n%s", name, out)
		}
		for _, l := range m {
			if avg, _ := strconv.ParseFloat(l[4], 64); avg <= 0 {
				t.Errorf("%s: zero bandwidth at %s bytes:\n%s", name, l[1], out)
			}
		}
		last := m[len(m)-1]
		t.Logf("%s: %d size(s); %s bytes: peak %s, average %s MB/s", name, len(m), last[1], last[3], last[4])
	case strings.HasSuffix(argv[0], "_lat"):
		m := latResult.FindAllStringSubmatch(out, -1)
		if m == nil {
			t.Fatalf("%s: no latency line:\n%s", name, out)
		}
		last := m[len(m)-1]
		t.Logf("%s: %d size(s); %s bytes: t_min %s, t_typical %s µs", name, len(m), last[1], last[3], last[5])
	default: // ibv_*_pingpong
		m := pingpongResult.FindStringSubmatch(out)
		if m == nil || strings.Contains(strings.ToLower(out), "mismatch") {
			t.Fatalf("%s: no clean summary:\n%s", name, out)
		}
		t.Logf("%s: %s bytes in %s s = %s Mbit/s", name, m[1], m[2], m[3])
	}
}

// ciPrograms is the CI subset; perftest's defaults otherwise.
var ciPrograms = [][]string{
	{"ib_write_bw", "-s", "65536"},
	{"ib_read_bw", "-s", "65536"},
	{"ib_send_bw", "-s", "65536", "-c", "RC"},
	{"ib_write_lat"},
	{"ib_send_lat", "-c", "UD"},
	{"ib_atomic_bw"},
	{"ibv_rc_pingpong", "-g", "1", "-c"},
	{"ib_write_bw", "-R", "-s", "65536"},
	{"ib_send_lat", "-R", "-c", "UD"},
}

// fullPrograms is the matrix: every program with its defaults,
// a large message, every size (-a, iterations bounded so it ends), and
// four QPs where the program takes -q; UD for send; both pingpongs.
func fullPrograms() [][]string {
	var out [][]string
	for _, p := range []string{"ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat", "ib_atomic_lat"} {
		out = append(out, []string{p})
		atomic := strings.HasPrefix(p, "ib_atomic")
		bw := strings.HasSuffix(p, "_bw")
		if !atomic {
			out = append(out, []string{p, "-s", "1048576", "-n", "200"}, []string{p, "-a", "-n", "100"})
		}
		if bw {
			out = append(out, []string{p, "-q", "4"})
		}
		out = append(out, []string{p, "-R"}) // rdma_cm
	}
	out = append(out,
		[]string{"ib_send_bw", "-c", "UD"},
		[]string{"ib_send_lat", "-c", "UD"},
		[]string{"ib_send_bw", "-R", "-c", "UD"},
		[]string{"ib_send_lat", "-R", "-c", "UD"},
		[]string{"ibv_rc_pingpong", "-g", "1", "-c"},
		[]string{"ibv_rc_pingpong", "-g", "1", "-c", "-s", "65536"},
		[]string{"ibv_ud_pingpong", "-g", "1", "-s", "512"},
	)
	return out
}

func TestPerftestBetweenTwoGuestsOnOneDaemon(t *testing.T) {
	requireE2E(t)
	progs := ciPrograms
	if mode == "full" {
		progs = fullPrograms()
	}
	guestImage(t)
	start := time.Now()
	a, b := rdmaGuests(t)
	t.Logf("two guests with falcon0 ACTIVE in %.1fs", time.Since(start).Seconds())
	for _, argv := range progs {
		t.Run(strings.Join(argv, "_"), func(t *testing.T) {
			s := time.Now()
			out := clientServer(t, a, b, "10.0.0.2", argv...)
			checkPerftest(t, argv, out)
			t.Logf("took %.1fs", time.Since(s).Seconds())
		})
	}
	// A doorbell the netdev refused is sent again, never lost (doorbell_retry).
	for i, g := range []*vm{a, b} {
		name, c := string(rune('A'+i)), driverCounters(t, g)
		t.Logf("guest %s driver: tx_doorbell %d, doorbell_retry %d, doorbell_suppressed %d, tx_err %d",
			name, c["tx_doorbell"], c["doorbell_retry"], c["doorbell_suppressed"], c["tx_err"])
	}
}

// sealedFabric is perftest's report of a daemon whose fabric sealed and
// opened datagrams and refused none.
var sealedFabric = regexp.MustCompile(`fabric psp: [1-9][0-9]* datagrams sealed, [1-9][0-9]* opened, 0 refused`)

// perftestCommand runs `falconnic perftest FLAGS -- PROGRAMS` and returns
// its standard output (the clients' outputs in order).
func perftestCommand(t *testing.T, flags []string, progs ...[]string) string {
	t.Helper()
	args := append([]string{"perftest"}, flags...)
	for _, p := range progs {
		args = append(append(args, "--"), p...)
	}
	stdout, stderr := pairCommand(t, 15*time.Minute, args)
	if i := slices.Index(flags, "--daemons"); i >= 0 && i+1 < len(flags) && flags[i+1] == "2" &&
		!slices.Contains(flags, "--insecure") && !sealedFabric.MatchString(stderr) {
		t.Errorf("two daemons' fabric did not carry sealed datagrams:\n%s", stderr)
	}
	return stdout
}

// One command over two daemons whose fabric drops 1 % of the datagrams
// each way: perftest completes, and ibv_rc_pingpong -c finds every
// received buffer intact.
func TestPerftestCommandOverALossyFabric(t *testing.T) {
	requireE2E(t)
	write := []string{"ib_write_bw", "-s", "65536", "-n", "1000"}
	check := []string{"ibv_rc_pingpong", "-g", "1", "-c", "-s", "16384", "-n", "200"}
	out := perftestCommand(t, []string{"--daemons", "2", "--loss", "1"}, write, check)
	checkPerftest(t, write, out)
	checkPerftest(t, check, out)
}

// The full matrix on two daemons, and the bandwidth programs with loss.
func TestPerftestMatrixOnTwoDaemons(t *testing.T) {
	requireE2E(t)
	if mode != "full" {
		t.Skip("the two-daemon matrix runs with FALCONNIC_E2E=full")
	}
	for _, loss := range []string{"0", "1"} {
		progs := fullPrograms()
		if loss != "0" {
			progs = [][]string{{"ib_write_bw", "-s", "65536"}, {"ib_read_bw", "-s", "65536"}, {"ib_send_bw", "-s", "65536"}}
		}
		t.Run("loss"+loss, func(t *testing.T) {
			out := perftestCommand(t, []string{"--daemons", "2", "--loss", loss}, progs...)
			// The command fails if any side of any program failed; each
			// program printed its one result table or summary.
			got := strings.Count(out, "#bytes") + len(pingpongResult.FindAllString(out, -1))
			if got != len(progs) {
				t.Fatalf("%d result tables for %d programs:\n%s", got, len(progs), out)
			}
		})
	}
}

// rdma_cm across two daemons: perftest -R's connection setup (ib_cm MADs
// between the guests' QP1s over the fabric) and data path, and rping, whose
// -v output shows every ping's payload as the server received it.
func TestPerftestRDMACMOnTwoDaemons(t *testing.T) {
	requireE2E(t)
	write := []string{"ib_write_bw", "-R", "-s", "65536"}
	send := []string{"ib_send_bw", "-R", "-s", "65536"}
	rping := []string{"rping", "-C", "10", "-v", "-V"}
	out := perftestCommand(t, []string{"--daemons", "2"}, write, send, rping)
	tables := strings.Split(out, "#bytes")
	if len(tables) != 3 {
		t.Fatalf("%d result tables, want 2:\n%s", len(tables)-1, out)
	}
	checkPerftest(t, write, tables[1])
	checkPerftest(t, send, tables[2])
	if n := len(rpingResult.FindAllString(out, -1)); n != 10 {
		t.Fatalf("rping: %d verified pings, want 10:\n%s", n, out)
	}
}
