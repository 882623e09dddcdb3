package manifests_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/component-base/metrics"

	"github.com/muster-io/muster/plugins/gang"
	"github.com/muster-io/muster/podgrouper"
)

// grafanaDashboard is the part of Grafana's dashboard model the test reads.
type grafanaDashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// servedSeries are the series names muster's two components serve:
// counters and gauges under their name, histograms as _bucket, _sum and
// _count.
func servedSeries() map[string]bool {
	out := map[string]bool{}
	for _, m := range append(gang.Metrics(), podgrouper.Metrics()...) {
		switch m.(type) {
		case *metrics.Histogram, *metrics.HistogramVec:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[m.FQName()+s] = true
			}
		default:
			out[m.FQName()] = true
		}
	}
	return out
}

var (
	// What in a PromQL expression is not a series name: label matchers,
	// range and subquery selectors, grouping clauses, strings.
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers  = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promDurations = regexp.MustCompile(`\b[0-9]+(?:ms|[smhdwy])\b`)
	promIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promKeywords  = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true}
	grafanaVarRef = regexp.MustCompile(`\$\{?[A-Za-z_]+\}?`)
)

// seriesOf returns the series names an expression selects.
func seriesOf(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, "")
	e = promRanges.ReplaceAllString(e, "")
	e = promGrouping.ReplaceAllString(e, "")
	e = grafanaVarRef.ReplaceAllString(e, "")
	e = promDurations.ReplaceAllString(e, "")
	var out []string
	for _, m := range promIdent.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || promKeywords[m[0]] {
			continue // a function or aggregation, or an operator
		}
		out = append(out, m[0])
	}
	return out
}

func TestSeriesOf(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`histogram_quantile(0.99, sum by (le, result) (rate(muster_gang_plan_duration_seconds_bucket[$__rate_interval])))`, "muster_gang_plan_duration_seconds_bucket"},
		{`sum(max by (in_gang) (a_total)) / max(b)`, "a_total b"},
		{`sum(increase(x{result="released", y=~"a|b"}[5m])) or vector(0)`, "x"},
		{`rate(a[5m]) > bool 0 unless on (job) b offset 1h`, "a b"},
	} {
		if got := strings.Join(seriesOf(tc.expr), " "); got != tc.want {
			t.Errorf("seriesOf(%s) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestGrafanaDashboard: the shipped dashboard loads as Grafana's model,
// takes its Prometheus from a variable, and every query selects only
// series muster serves (a renamed or dropped metric fails here, not on a
// wall screen).
func TestGrafanaDashboard(t *testing.T) {
	const file = "grafana/muster-dashboard.json"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion == 0 || len(d.Panels) == 0 {
		t.Fatalf("%s: title %q, uid %q, schemaVersion %d, %d panels: not a dashboard", file, d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	hasDS := false
	for _, v := range d.Templating.List {
		hasDS = hasDS || (v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus")
	}
	if !hasDS {
		t.Errorf("%s: no datasource variable of type prometheus", file)
	}
	served := servedSeries()
	used := map[string]bool{}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d missing or not unique", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: no gridPos", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource is not ${datasource}", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no queries", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			queries++
			if refs[q.RefID] || q.RefID == "" {
				t.Errorf("panel %q: refId %q missing or not unique", p.Title, q.RefID)
			}
			refs[q.RefID] = true
			series := seriesOf(q.Expr)
			if len(series) == 0 {
				t.Errorf("panel %q: %s selects no series", p.Title, q.Expr)
			}
			for _, s := range series {
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "_bucket"), "_sum"), "_count")] = true
				if !served[s] {
					t.Errorf("panel %q: %s selects %s, which muster does not serve", p.Title, q.Expr, s)
				}
			}
		}
	}
	// Every metric muster serves is on the dashboard: a new one gets a
	// panel, or this list says why not.
	for _, m := range append(gang.Metrics(), podgrouper.Metrics()...) {
		if !used[m.FQName()] {
			t.Errorf("muster serves %s but no panel queries it", m.FQName())
		}
	}
	t.Logf("%d panels, %d queries, %d metrics", len(d.Panels), queries, len(used))
}
