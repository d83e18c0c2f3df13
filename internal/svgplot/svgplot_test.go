package svgplot

import (
	"bytes"
	"encoding/xml"
	"testing"
)

// Render produces well-formed SVG with one polyline per series and the
// legend's names, also for empty and log-scaled panels.
func TestRenderIsWellFormed(t *testing.T) {
	out := Render("t <&>", []Chart{
		{Title: "a", XLabel: "x", YLabel: "y", Series: []Series{{Name: "s1", X: []float64{0, 1, 2}, Y: []float64{1, 3, 2}}},
			Refs: []Ref{{Name: "target", Y: 2.5}}},
		{Title: "log", LogX: true, Series: []Series{{Name: "s2", X: []float64{64, 4096, 1 << 20}, Y: []float64{1, 1.1, 1.2}}}},
		{Title: "empty"},
	}, 2)
	d := xml.NewDecoder(bytes.NewReader(out))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed: %v", err)
		}
	}
	if bytes.Count(out, []byte("<polyline")) != 2 || !bytes.Contains(out, []byte(">s1<")) || !bytes.Contains(out, []byte(">target<")) {
		t.Fatal("series or legend missing")
	}
}
