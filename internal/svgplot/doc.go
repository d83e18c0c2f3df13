// Package svgplot draws small line charts as SVG for `falconnic bench
// --plot`: one or more panels (Chart) laid out in a grid by Render, each
// with axes, round ticks (linear or log10), a legend, one polyline per
// Series and dashed reference lines (Ref, a target). Points that are not
// finite are left out, so a value a bench could not measure leaves a gap.
// It depends on nothing outside the standard library.
package svgplot
