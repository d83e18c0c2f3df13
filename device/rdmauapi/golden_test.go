package rdmauapi

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// driverRequests reads testdata/driver_requests.txt: real requests the C
// driver sent while stock librxe ran pingpong and perftest programs.
func driverRequests(t testing.TB) [][]byte {
	f, err := os.Open("testdata/driver_requests.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		b, err := hex.DecodeString(line)
		if err != nil {
			t.Fatalf("bad hex %q: %v", line, err)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatal("no driver requests")
	}
	return out
}

// The C driver and the Go decoder agree: every request the driver really
// sent decodes, and every body passes the checks the NIC applies.
func TestDriverRequestsDecodeAndCheck(t *testing.T) {
	seen := map[Opcode]bool{}
	for i, b := range driverRequests(t) {
		m, err := DecodeRequest(b)
		if err != nil {
			t.Errorf("request %d (%v): %v", i, Hdr(b).Opcode(), err)
			continue
		}
		seen[m.Hdr.Opcode()] = true
		var st Status
		switch m.Hdr.Opcode() {
		case OpRegMR:
			st = RegMR(m.Body).Check()
		case OpCreateCQ:
			st = CreateCQ(m.Body).Check()
		case OpCreateQP:
			st = CreateQP(m.Body).Check()
		case OpCreateSRQ:
			st = CreateSRQ(m.Body).Check()
		case OpModifyQP:
			st = QPAttr(m.Body).Check()
		case OpCreateAH:
			st = CreateAH(m.Body).AV().Check()
		}
		if st != StatusOK {
			t.Errorf("request %d (%v): check says %v", i, m.Hdr.Opcode(), st)
		}
	}
	for _, op := range []Opcode{OpProbe, OpOpen, OpClose, OpQueryPort, OpCreatePD, OpRegMR,
		OpCreateCQ, OpArmCQ, OpCreateQP, OpModifyQP, OpQueryQP, OpDestroyQP, OpCreateSRQ,
		OpCreateAH, OpDBSQ} {
		if !seen[op] {
			t.Errorf("no %v among the recorded requests", op)
		}
	}
}

// A two-level page list, as the driver sends for an 8 MB MR.
func TestDriverRegMRTwoLevel(t *testing.T) {
	for _, b := range driverRequests(t) {
		m, err := DecodeRequest(b)
		if err != nil || m.Hdr.Opcode() != OpRegMR {
			continue
		}
		if p := RegMR(m.Body).PBL(); p.Levels() == 2 {
			if p.Npages() <= PBLEntries {
				t.Errorf("two levels for %d pages", p.Npages())
			}
			return
		}
	}
	t.Error("no two-level REG_MR recorded")
}
