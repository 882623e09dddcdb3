package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/component-base/metrics/legacyregistry"
)

// writeCounter counts API write requests (POST, PUT, PATCH, DELETE) by
// "VERB resource[/subresource]" while on. It answers where a variant's API
// server time goes: every write costs an etcd transaction that competes
// with the pod creates being measured.
type writeCounter struct {
	mu     sync.Mutex
	on     bool
	counts map[string]int
}

func newWriteCounter() *writeCounter { return &writeCounter{counts: map[string]int{}} }

func (w *writeCounter) start() {
	w.mu.Lock()
	w.on = true
	w.counts = map[string]int{}
	w.mu.Unlock()
}

// stop ends counting and returns the counts and their total.
func (w *writeCounter) stop() (map[string]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on = false
	total := 0
	for _, n := range w.counts {
		total += n
	}
	return w.counts, total
}

func (w *writeCounter) add(req *http.Request) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return
	}
	key := req.Method + " " + resourceOfPath(req.URL.Path)
	w.mu.Lock()
	if w.on {
		w.counts[key]++
	}
	w.mu.Unlock()
}

// resourceOfPath turns /api/v1/namespaces/ns/pods/p/binding into
// "pods/binding" and /apis/g/v/namespaces/ns/podgroups/x/status into
// "podgroups/status" (group left out: the names do not clash here).
func resourceOfPath(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "?"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

type countingTransport struct {
	next http.RoundTripper
	c    *writeCounter
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.add(req)
	return t.next.RoundTrip(req)
}

// formatWrites lists counts as "VERB resource=n" sorted by key.
func formatWrites(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", k, counts[k])
	}
	return b.String()
}

// counterSnapshot sums, by metric name and labels, the counters of the
// process's legacy registry whose names start with one of prefixes. The
// scheduler and the plugin register there; differences of two snapshots
// say what one run did (how often gangs were planned, how many scheduling
// attempts each result had).
func counterSnapshot(prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				if l.GetName() == "profile" {
					continue
				}
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				out[key] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key] += float64(m.GetHistogram().GetSampleCount())
				out[key+" sum_ms"] += 1000 * m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// counterDelta formats after−before for the keys that changed, sorted.
func counterDelta(before, after map[string]float64) string {
	var keys []string
	for k, v := range after {
		if v != before[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s %.0f", k, after[k]-before[k])
	}
	return b.String()
}
