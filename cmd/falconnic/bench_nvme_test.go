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
}
