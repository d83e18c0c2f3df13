package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"falconnic/firmware"
)

// fabricBenches are the benches on the emulated fabric (and bench loss).
var fabricBenches = []string{"incast", "multipath", "linkfail", "hostcong", "latency", "loss"}

// Every fabric bench runs in --quick mode, prints one JSON document with
// setup, points and goals, writes a well-formed SVG, gives the same
// numbers for the same flags, and --check fails exactly when a goal is
// unmet. (The CI smoke test of `falconnic bench`.)
func TestFabricBenchesQuick(t *testing.T) {
	for _, name := range fabricBenches {
		t.Run(name, func(t *testing.T) {
			if _, ok := benchmarks[name]; !ok {
				t.Fatalf("bench %s not registered", name)
			}
			plot := filepath.Join(t.TempDir(), name+".svg")
			var out, out2 bytes.Buffer
			if err := runBench(context.Background(), []string{name, "--quick", "--plot", plot}, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Setup  map[string]any   `json:"setup"`
				Points []map[string]any `json:"points"`
				Goals  []struct {
					Name   string  `json:"name"`
					Value  float64 `json:"value"`
					Op     string  `json:"op"`
					Target float64 `json:"target"`
					Met    *bool   `json:"met"`
				} `json:"goals"`
			}
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("output is not one JSON document: %v\n%s", err, out.String())
			}
			if doc.Setup == nil || len(doc.Points) == 0 || len(doc.Goals) == 0 {
				t.Fatalf("setup %v, %d points, %d goals", doc.Setup != nil, len(doc.Points), len(doc.Goals))
			}
			allMet := true
			for _, g := range doc.Goals {
				if g.Name == "" || (g.Op != ">=" && g.Op != "<=") || g.Met == nil {
					t.Fatalf("malformed goal %+v", g)
				}
				allMet = allMet && *g.Met
			}
			svg, err := os.ReadFile(plot)
			if err != nil {
				t.Fatal(err)
			}
			d := xml.NewDecoder(bytes.NewReader(svg))
			for {
				if _, err := d.Token(); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					t.Fatalf("plot is not well-formed SVG: %v", err)
				}
			}
			err = runBench(context.Background(), []string{name, "--quick", "--check"}, &out2, io.Discard)
			if a, b := simulated(t, out.Bytes()), simulated(t, out2.Bytes()); a != b {
				t.Fatal("same flags, different numbers")
			}
			if allMet != (err == nil) || (err != nil && !errors.Is(err, errGoalsUnmet)) {
				t.Fatalf("--check returned %v with all goals met = %v", err, allMet)
			}
		})
	}
}

// simulated returns a document without its wall-clock fields (which
// differ from run to run; the simulated numbers must not).
func simulated(t *testing.T, b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "wall_s")
			for _, y := range x {
				strip(y)
			}
		case []any:
			for _, y := range x {
				strip(y)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}

// TestParseSwift reads --swift's settings over the defaults and refuses
// unknown keys and values.
func TestParseSwift(t *testing.T) {
	cfg, err := parseSwift("base=9us,earlycuts=1,delay=forward,plb=1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseTarget != 9*time.Microsecond || !cfg.EarlyRetxCuts || cfg.Delay != firmware.DelayForward || !cfg.PLB {
		t.Errorf("parsed %+v", cfg)
	}
	if cfg, _ := parseSwift("rtoonly=0"); !cfg.EarlyRetxCuts {
		t.Error("rtoonly=0 (the former name) should turn early cuts on")
	}
	if cfg, _ := parseSwift(""); cfg.EarlyRetxCuts || cfg.Delay != 0 {
		t.Errorf("defaults: %+v", cfg)
	}
	for _, bad := range []string{"delay=rtt", "nokey=1", "base", "base=x"} {
		if _, err := parseSwift(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
