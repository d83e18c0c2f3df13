package svgplot

import (
	"bytes"
	"fmt"
	"math"
)

// Series is one line of a chart; points are drawn as small circles joined
// by lines.
type Series struct {
	Name string
	X, Y []float64
	// Dots draws the points alone, not joined (samples of one
	// measurement).
	Dots bool
	// Color is an SVG colour; empty takes the palette's next.
	Color string
}

// Ref is a dashed horizontal reference line (a target).
type Ref struct {
	Name string
	Y    float64
}

// Chart is one panel.
type Chart struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	Series                []Series
	Refs                  []Ref
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

const (
	panelW, panelH = 460, 300
	left, right    = 64, 150
	top, bottom    = 30, 46
)

// Render lays the charts out in cols columns and returns the SVG document.
func Render(title string, charts []Chart, cols int) []byte {
	cols = max(1, min(cols, len(charts)))
	rows := (len(charts) + cols - 1) / cols
	w, h := cols*panelW, rows*panelH+28
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" text-anchor="middle">%s</text>`+"\n", w/2, esc(title))
	for i, c := range charts {
		x0, y0 := (i%cols)*panelW, 28+(i/cols)*panelH
		panel(&b, c, float64(x0), float64(y0))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func panel(b *bytes.Buffer, c Chart, x0, y0 float64) {
	tx := func(v float64) float64 { return v }
	ty := tx
	if c.LogX {
		tx = safeLog
	}
	if c.LogY {
		ty = safeLog
	}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for i := range s.X {
			if i >= len(s.Y) || !finite(s.X[i]) || !finite(s.Y[i]) {
				continue
			}
			xmin, xmax = math.Min(xmin, tx(s.X[i])), math.Max(xmax, tx(s.X[i]))
			ymin, ymax = math.Min(ymin, ty(s.Y[i])), math.Max(ymax, ty(s.Y[i]))
		}
	}
	for _, r := range c.Refs {
		ymin, ymax = math.Min(ymin, ty(r.Y)), math.Max(ymax, ty(r.Y))
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax, ymin, ymax = 0, 1, 0, 1
	}
	if !c.LogY && ymin > 0 {
		ymin = 0
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax == ymin {
		ymax = ymin + 1
	}
	ymax += (ymax - ymin) * 0.05
	pw, ph := float64(panelW-left-right), float64(panelH-top-bottom)
	px := func(v float64) float64 { return x0 + left + (tx(v)-xmin)/(xmax-xmin)*pw }
	py := func(v float64) float64 { return y0 + top + ph - (ty(v)-ymin)/(ymax-ymin)*ph }
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle">%s</text>`+"\n", x0+left+pw/2, y0+16, esc(c.Title))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", x0+left, y0+top, pw, ph)
	for _, t := range ticks(xmin, xmax, c.LogX) {
		x := x0 + left + (tx(t)-xmin)/(xmax-xmin)*pw
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, x, y0+top, x, y0+top+ph)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+top+ph+14, num(t))
	}
	for _, t := range ticks(ymin, ymax, c.LogY) {
		y := y0 + top + ph - (ty(t)-ymin)/(ymax-ymin)*ph
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, x0+left, y, x0+left+pw, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0+left-4, y+4, num(t))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x0+left+pw/2, y0+panelH-10, esc(c.XLabel))
	fmt.Fprintf(b, `<text transform="translate(%.1f,%.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0+14, y0+top+ph/2, esc(c.YLabel))
	ly := y0 + top + 8
	for _, r := range c.Refs {
		y := py(r.Y)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="5,4"/>`+"\n", x0+left, y, x0+left+pw, y)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="5,4"/>`, x0+left+pw+8, ly, x0+left+pw+26, ly)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x0+left+pw+30, ly+4, esc(r.Name))
		ly += 15
	}
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		if s.Color != "" {
			col = s.Color
		}
		var pts bytes.Buffer
		for j := range s.X {
			if j >= len(s.Y) || !finite(s.X[j]) || !finite(s.Y[j]) || (c.LogX && s.X[j] <= 0) || (c.LogY && s.Y[j] <= 0) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(s.X[j]), py(s.Y[j]))
			if len(s.X) > 60 && !s.Dots { // a dense series reads better as a line
				continue
			}
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="%s" fill="%s"/>`, px(s.X[j]), py(s.Y[j]), dotR(s.Dots), col)
		}
		if s.Dots {
			fmt.Fprintf(b, "\n"+`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`, x0+left+pw+17, ly, col)
		} else {
			fmt.Fprintf(b, "\n"+`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", pts.String(), col)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, x0+left+pw+8, ly, x0+left+pw+26, ly, col)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x0+left+pw+30, ly+4, esc(s.Name))
		ly += 15
	}
}

func dotR(dots bool) string {
	if dots {
		return "3.5"
	}
	return "2.5"
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func safeLog(v float64) float64 {
	if v <= 0 {
		return math.Inf(-1)
	}
	return math.Log10(v)
}

// ticks returns round values across [lo, hi] (in transformed units when
// log: then lo, hi are log10 and the ticks powers of ten).
func ticks(lo, hi float64, log bool) []float64 {
	var t []float64
	if log {
		for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
			if e >= lo-1e-9 && e <= hi+1e-9 {
				t = append(t, math.Pow(10, e))
			}
		}
		return t
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= 6 {
			step *= m
			break
		}
	}
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		t = append(t, v)
	}
	return t
}

func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e6 || a < 1e-3:
		return fmt.Sprintf("%.0e", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func esc(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
