package main

import "testing"

// A guest's busy time is every /proc/stat state but idle and iowait;
// guest and guest_nice are inside user and nice already.
func TestProcStatBusy(t *testing.T) {
	got, err := procStatBusy("cpu  100 5 200 9000 50 10 20 0 7 3\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := 3.35; got != want {
		t.Fatalf("busy %v s, want %v", got, want)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := procStatBusy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFioIOsCountsBothDirections(t *testing.T) {
	out := `fio-3.33 banner {"jobs": [{"read": {"total_ios": 30000}, "write": {"total_ios": 12}}]}`
	if got := fioIOs(out); got != 30012 {
		t.Fatalf("fioIOs = %d, want 30012", got)
	}
	if got := fioIOs("no json"); got != 0 {
		t.Fatalf("fioIOs without JSON = %d", got)
	}
}
