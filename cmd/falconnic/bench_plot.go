package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"falconnic/internal/svgplot"
)

// The VM benches (nvme, perftest, vm-net) print JSON with every sample;
// `--plot FILE.svg` on them, or `falconnic bench plot` on their JSON
// later, draws falconnic against its baseline: one panel per test, each
// sample a dot, the medians as dashed lines. The fabric benches draw their
// own (--plot) with the same library, internal/svgplot.

func init() {
	benchmarks["plot"] = benchmark{"draw a VM bench's JSON (nvme, perftest, vm-net) as SVG: plot --from FILE.json -o FILE.svg", benchPlot}
}

// vmPlotBenches are the benches whose --plot runBench handles.
var vmPlotBenches = map[string]bool{"nvme": true, "perftest": true, "vm-net": true}

// takePlotFlag removes --plot FILE (or --plot=FILE) from args.
func takePlotFlag(args []string) (rest []string, plot string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--plot" || a == "-plot":
			if i+1 == len(args) {
				return nil, "", fmt.Errorf("%w: --plot needs a FILE", errUsage)
			}
			plot = args[i+1]
			i++
		case strings.HasPrefix(a, "--plot=") || strings.HasPrefix(a, "-plot="):
			plot = a[strings.Index(a, "=")+1:]
		case a == "--":
			return append(rest, args[i:]...), plot, nil
		default:
			rest = append(rest, a)
		}
	}
	return rest, plot, nil
}

// runWithPlot runs a VM bench, then draws its JSON to plot.
func runWithPlot(ctx context.Context, b benchmark, args []string, plot string, stdout, stderr io.Writer) error {
	var buf bytes.Buffer
	err := b.run(ctx, args, io.MultiWriter(stdout, &buf), stderr)
	if buf.Len() > 0 {
		if perr := writePlot(buf.Bytes(), plot); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

func benchPlot(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "a VM bench's JSON output `FILE`")
	out := fs.String("o", "", "write the SVG to `FILE`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *from == "" || *out == "" || fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("%w: bench plot --from FILE.json -o FILE.svg", errUsage)
	}
	b, err := os.ReadFile(*from)
	if err != nil {
		return err
	}
	if err := writePlot(b, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

func writePlot(result []byte, path string) error {
	title, charts, err := vmBenchCharts(result)
	if err != nil {
		return err
	}
	return os.WriteFile(path, svgplot.Render(title, charts, 2), 0o644)
}

// sampleChart is one test's panel: side i's samples as dots at x = i+1,
// its median as a short line across them in the same colour.
func sampleChart(title, unit string, sides []string, samples [][]float64, medians []float64) svgplot.Chart {
	var legend []string
	for i, name := range sides {
		legend = append(legend, fmt.Sprintf("%d = %s", i+1, name))
	}
	c := svgplot.Chart{Title: title, XLabel: strings.Join(legend, ", ") + "; dots: samples, lines: medians", YLabel: unit}
	for i, name := range sides {
		x := float64(i + 1)
		col := plotColors[i%len(plotColors)]
		s := svgplot.Series{Name: name, Dots: true, Color: col}
		for _, v := range samples[i] {
			s.X = append(s.X, x)
			s.Y = append(s.Y, v)
		}
		c.Series = append(c.Series, s, svgplot.Series{Name: "median", X: []float64{x - 0.3, x + 0.3},
			Y: []float64{medians[i], medians[i]}, Color: col})
	}
	return c
}

var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c"}

// vmBenchCharts recognises a VM bench's JSON by its shape and returns its
// charts.
func vmBenchCharts(b []byte) (string, []svgplot.Chart, error) {
	var probe struct {
		Tests   json.RawMessage `json:"tests"`
		Results json.RawMessage `json:"results"`
		Links   json.RawMessage `json:"links"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return "", nil, fmt.Errorf("bench plot: not a bench's JSON: %w", err)
	}
	var charts []svgplot.Chart
	switch {
	case probe.Tests != nil:
		var rep nvmeBenchReport
		if err := json.Unmarshal(b, &rep); err != nil {
			return "", nil, err
		}
		for _, t := range rep.Tests {
			charts = append(charts, sampleChart(fmt.Sprintf("%s (ratio %.2f)", t.Name, t.Ratio), t.Metric,
				[]string{"falconnic", "local"}, [][]float64{t.NVMeSamples, t.LocalSamples}, []float64{t.NVMe, t.Local}))
		}
		return "bench nvme: fio, falconnic's NVMe-over-Falcon disk vs QEMU's virtio-blk on the same file", charts, nil
	case probe.Results != nil:
		var rep benchPerftestResult
		if err := json.Unmarshal(b, &rep); err != nil {
			return "", nil, err
		}
		for _, r := range rep.Rows {
			charts = append(charts, sampleChart(fmt.Sprintf("%s (ratio %.2f)", r.Test, r.Ratio), r.Unit,
				[]string{"falconnic", "Soft-RoCE"}, [][]float64{r.Falconnic.Samples, r.RXE.Samples}, []float64{r.Falconnic.Median, r.RXE.Median}))
		}
		return "bench perftest: unmodified perftest, falconnic vs Linux Soft-RoCE in the same VMs", charts, nil
	case probe.Links != nil:
		var rep vmnetResult
		if err := json.Unmarshal(b, &rep); err != nil {
			return "", nil, err
		}
		names := make([]string, 0, len(rep.Links))
		for n := range rep.Links {
			names = append(names, n)
		}
		sort.Strings(names)
		var tput, rtt [][]float64
		var tm, rm []float64
		for _, n := range names {
			l := rep.Links[n]
			tput, rtt = append(tput, l.ThroughputMbps), append(rtt, l.RTTMicros)
			tm, rm = append(tm, median(l.ThroughputMbps)), append(rm, median(l.RTTMicros))
		}
		charts = append(charts, sampleChart("TCP throughput", "Mb/s", names, tput, tm), sampleChart("RTT (median of each ping run)", "µs", names, rtt, rm))
		return "bench vm-net: TCP and RTT between two VMs, falconnic vs QEMU's stream link", charts, nil
	}
	return "", nil, errors.New("bench plot: not the JSON of bench nvme, perftest or vm-net")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
