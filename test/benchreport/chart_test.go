package benchreport

import (
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	c := Chart{Title: "pods <bound>", XLabel: "s", YLabel: "pods", Series: []Series{
		{Name: "a", Points: []Point{{0, 0}, {1, 10}, {2, 40}}},
		{Name: "b", Points: []Point{{0, 0}, {3, 40}}},
		{Name: "empty"},
	}}
	if err := c.WriteFiles(dir, "x"); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "x.svg"))
	if err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, escaped title, one polyline per non-empty series.
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	if !strings.Contains(string(svg), "pods &lt;bound&gt;") {
		t.Error("title not escaped")
	}
	if n := strings.Count(string(svg), "<polyline"); n != 2 {
		t.Errorf("%d polylines, want 2", n)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "x.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csv), "\n"); lines != 6 {
		t.Errorf("csv has %d lines, want header + 5 points:\n%s", lines, csv)
	}
}

func TestNonFinite(t *testing.T) {
	c := Chart{Series: []Series{{Name: "a", Points: []Point{{0, math.NaN()}}}}}
	if err := c.WriteSVG(new(strings.Builder)); err == nil || !strings.Contains(err.Error(), `series "a"`) {
		t.Fatalf("err %v, want one naming the series", err)
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0, 1}, {1, 1}, {1.1, 2}, {2.2, 2.5}, {4000, 5000}, {7, 10}, {0.03, 0.05}} {
		if got := niceCeil(tc.in); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
