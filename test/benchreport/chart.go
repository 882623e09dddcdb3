// Package benchreport writes the charts and tables of BENCHMARKS.md: a small
// hand-written SVG line chart (no plotting dependency) and CSV files of the
// same series, so the numbers behind every picture are kept beside it.
package benchreport

import (
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Point is one sample of a series.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	Name   string
	Points []Point
}

// Chart is a line chart of one or more series over a shared X axis.
type Chart struct {
	Title          string
	XLabel, YLabel string
	Series         []Series
	// YMax, if positive, fixes the top of the Y axis (e.g. 100 for percent).
	YMax float64
}

// palette is distinguishable in colour and in greyscale print.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"}

const (
	width, height            = 760, 400
	left, right, top, bottom = 70, 190, 40, 50
)

// WriteSVG draws c. A chart without points is drawn with empty axes rather
// than refused, so a failed run still leaves a file that says so.
func (c Chart) WriteSVG(w io.Writer) error {
	xmax, ymax := 0.0, 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			if !finite(p.X) || !finite(p.Y) {
				return fmt.Errorf("chart %q: series %q has a non-finite point (%v, %v)", c.Title, s.Name, p.X, p.Y)
			}
			xmax = math.Max(xmax, p.X)
			ymax = math.Max(ymax, p.Y)
		}
	}
	if c.YMax > 0 {
		ymax = c.YMax
	}
	xmax, ymax = niceCeil(xmax), niceCeil(ymax)
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	sx := func(x float64) float64 { return left + x/xmax*pw }
	sy := func(y float64) float64 { return top + ph - y/ymax*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))
	// Grid and tick labels: five steps on each axis.
	for i := 0; i <= 5; i++ {
		x := xmax * float64(i) / 5
		y := ymax * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", sx(x), top, sx(x), top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(x), top+ph+16, num(x))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, sy(y), left+pw, sy(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, sy(y)+4, num(y))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", left+pw/2, height-10, esc(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", top+ph/2, top+ph/2, esc(c.YLabel))
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		if len(s.Points) > 0 {
			pts := make([]string, len(s.Points))
			for j, p := range s.Points {
				pts[j] = fmt.Sprintf("%.1f,%.1f", sx(p.X), sy(p.Y))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", col, strings.Join(pts, " "))
		}
		ly := top + 14 + 18*i
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%d" x2="%.0f" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", left+pw+12, ly-4, left+pw+32, ly-4, col)
		fmt.Fprintf(&b, `<text x="%.0f" y="%d">%s</text>`+"\n", left+pw+38, ly, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFiles writes dir/name.svg and dir/name.csv (columns: series, x, y).
func (c Chart) WriteFiles(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, name+".svg"))
	if err != nil {
		return err
	}
	if err := c.WriteSVG(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	rows := [][]string{{"series", c.XLabel, c.YLabel}}
	for _, s := range c.Series {
		for _, p := range s.Points {
			rows = append(rows, []string{s.Name, strconv.FormatFloat(p.X, 'g', 6, 64), strconv.FormatFloat(p.Y, 'g', 6, 64)})
		}
	}
	return WriteCSV(filepath.Join(dir, name+".csv"), rows)
}

// WriteCSV writes rows to path.
func WriteCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten (1 for 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

func esc(s string) string { return html.EscapeString(s) }
