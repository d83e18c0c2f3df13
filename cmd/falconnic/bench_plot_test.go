package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"falconnic/internal/svgplot"
)

// TestVMBenchChartsDrawEverySample: the JSON of each VM bench becomes one
// panel per test with every sample of both sides and their medians.
func TestVMBenchChartsDrawEverySample(t *testing.T) {
	nvme, _ := json.Marshal(nvmeBenchReport{Tests: []nvmeBenchResult{
		{Name: "read_128k", Metric: "MiB/s", NVMe: 397, Local: 401, Ratio: 0.99, NVMeSamples: []float64{390, 397, 410}, LocalSamples: []float64{401, 380, 420}},
		{Name: "randread_4k_qd32", Metric: "iops", NVMe: 3276, Local: 3191, NVMeSamples: []float64{3276}, LocalSamples: []float64{3191}},
	}})
	perf, _ := json.Marshal(benchPerftestResult{Rows: []benchRow{
		{Test: "ib_write_bw -s 65536", Unit: "MB/s", Falconnic: benchSeries{Samples: []float64{700, 725, 750}, Median: 725}, RXE: benchSeries{Samples: []float64{9, 9.6, 10}, Median: 9.6}},
	}})
	vmnet, _ := json.Marshal(vmnetResult{Links: map[string]*vmnetSeries{
		"falconnic": {ThroughputMbps: []float64{900, 1000}, RTTMicros: []float64{300, 320}},
		"stream":    {ThroughputMbps: []float64{1200, 1100}, RTTMicros: []float64{250, 260}},
	}})
	for _, c := range []struct {
		name   string
		json   []byte
		panels int
		first  svgplot.Series
	}{
		{"nvme", nvme, 2, svgplot.Series{Name: "falconnic", X: []float64{1, 1, 1}, Y: []float64{390, 397, 410}, Dots: true, Color: "#1f77b4"}},
		{"perftest", perf, 1, svgplot.Series{Name: "falconnic", X: []float64{1, 1, 1}, Y: []float64{700, 725, 750}, Dots: true, Color: "#1f77b4"}},
		{"vm-net", vmnet, 2, svgplot.Series{Name: "falconnic", X: []float64{1, 1}, Y: []float64{900, 1000}, Dots: true, Color: "#1f77b4"}},
	} {
		title, charts, err := vmBenchCharts(c.json)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(title, "bench "+c.name) || len(charts) != c.panels {
			t.Errorf("%s: %q, %d panels", c.name, title, len(charts))
			continue
		}
		if got := charts[0].Series[0]; !reflect.DeepEqual(got, c.first) || len(charts[0].Series) != 4 {
			t.Errorf("%s: first series %+v (%d series)", c.name, got, len(charts[0].Series))
		}
		if svg := string(svgplot.Render(title, charts, 2)); !strings.Contains(svg, "<circle") || !strings.Contains(svg, "median") {
			t.Errorf("%s: SVG without samples or medians", c.name)
		}
	}
	if _, _, err := vmBenchCharts([]byte(`{"other": 1}`)); err == nil {
		t.Error("a JSON of no VM bench was drawn")
	}
}

func TestTakePlotFlag(t *testing.T) {
	for _, c := range []struct {
		in         []string
		rest, plot string
	}{
		{[]string{"--samples", "3", "--plot", "a.svg"}, "--samples 3", "a.svg"},
		{[]string{"--plot=b.svg", "--quick"}, "--quick", "b.svg"},
		{[]string{"--", "ib_write_bw", "--plot", "x"}, "-- ib_write_bw --plot x", ""},
	} {
		rest, plot, err := takePlotFlag(c.in)
		if err != nil || strings.Join(rest, " ") != c.rest || plot != c.plot {
			t.Errorf("%v: %v %q %v", c.in, rest, plot, err)
		}
	}
	if _, _, err := takePlotFlag([]string{"--plot"}); err == nil {
		t.Error("--plot without a file accepted")
	}
}
