package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

// deployment builds a Deployment of replicas pods, ready of them ready.
func deployment(name, team string, replicas, ready int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "web", "uid": "uid-" + name, "labels": map[string]any{"team": team}},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "x"}}}}},
		"status": map[string]any{"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": replicas,
			"observedGeneration": int64(1)},
	}}
	u.SetGeneration(1)
	return u
}

// getRows runs muster get with args and returns name → phases.
func getRows(t *testing.T, c *Cluster, args ...string) map[string][]string {
	t.Helper()
	res := run(t, c, "", append([]string{"get", "-n", "web", "-o", "json"}, args...)...)
	if res.code != 0 {
		t.Fatalf("get %v: exit %d: %s", args, res.code, res.stderr)
	}
	var l WorkloadList
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
		t.Fatalf("%v: %s", err, res.stdout)
	}
	out := map[string][]string{}
	for _, r := range l.Items {
		out[r.Name] = r.Phases
	}
	return out
}

func names(m map[string][]string) string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// TestGetFilters: --phase keeps the workloads with any of the phases
// given, -l selects by label, TYPE NAME and TYPE/NAME show one workload.
// The expected sets are computed from the unfiltered listing, so the test
// holds whatever phase the catalog gives each Deployment, as long as two
// of them differ.
func TestGetFilters(t *testing.T) {
	c := fakeCluster(t, []*unstructured.Unstructured{
		deployment("api", "nlp", 2, 2),
		deployment("batch", "nlp", 2, 0),
		deployment("ui", "cv", 3, 1),
	})
	all := getRows(t, c, "deployments")
	if names(all) != "api,batch,ui" {
		t.Fatalf("unfiltered: %v", all)
	}
	firsts := map[string]bool{}
	for _, ph := range all {
		firsts[ph[0]] = true
	}
	if len(firsts) < 2 {
		t.Fatalf("the three Deployments all have phase %v; the filter test needs two phases", all)
	}
	want := func(phases ...string) string {
		out := map[string][]string{}
		for n, ph := range all {
			for _, p := range phases {
				if slices.Contains(ph, p) {
					out[n] = ph
				}
			}
		}
		return names(out)
	}
	for p := range firsts {
		if got := names(getRows(t, c, "deployments", "--phase", p)); got != want(p) || got == "" {
			t.Errorf("--phase %s: got %q, want %q", p, got, want(p))
		}
		// Any case is accepted.
		if got := names(getRows(t, c, "deployments", "--phase", strings.ToLower(p))); got != want(p) {
			t.Errorf("--phase %s: got %q, want %q", strings.ToLower(p), got, want(p))
		}
	}
	var two []string
	for p := range firsts {
		two = append(two, p)
	}
	args := []string{"deployments"}
	for _, p := range two {
		args = append(args, "--phase", p)
	}
	if got := names(getRows(t, c, args...)); got != want(two...) {
		t.Errorf("--phase %v: got %q, want %q (any of them)", two, got, want(two...))
	}
	// A phase no workload has: nothing, and the table says why.
	missing := ""
	for _, p := range phaseNames() {
		if want(p) == "" {
			missing = p
			break
		}
	}
	if missing != "" {
		res := run(t, c, "", "get", "deployments", "-n", "web", "--phase", missing)
		if res.code != 0 || res.stdout != "" || !strings.Contains(res.stderr, "No workloads with phase "+missing+" (3 found with other phases)") {
			t.Errorf("--phase %s: exit %d, stdout %q, stderr %q", missing, res.code, res.stdout, res.stderr)
		}
	}

	if got := names(getRows(t, c, "deployments", "-l", "team=nlp")); got != "api,batch" {
		t.Errorf("-l team=nlp: got %q", got)
	}
	if got := names(getRows(t, c, "deployments", "--selector", "team!=nlp")); got != "ui" {
		t.Errorf("--selector team!=nlp: got %q", got)
	}
	if got := names(getRows(t, c, "--all-types", "-l", "team=cv")); got != "ui" {
		t.Errorf("--all-types -l team=cv: got %q", got)
	}
	for _, form := range [][]string{{"deployment", "batch"}, {"deployment/batch"}, {"deployments.apps/batch"}} {
		if got := names(getRows(t, c, form...)); got != "batch" {
			t.Errorf("get %v: got %q, want batch", form, got)
		}
	}
	res := run(t, c, "", "get", "deployment", "nope", "-n", "web")
	if res.code != ExitNotFound || !strings.Contains(res.stderr, `Deployment "nope" not found in namespace web`) {
		t.Errorf("missing NAME: exit %d, stderr %q", res.code, res.stderr)
	}
}

// TestGetChunkSize: lists go out in pages of --chunk-size objects and every
// page is read; 0 lists in one request.
func TestGetChunkSize(t *testing.T) {
	var objs []*unstructured.Unstructured
	for i := range 7 {
		objs = append(objs, deployment(fmt.Sprintf("d%d", i), "nlp", 1, 1))
	}
	c := fakeCluster(t, objs)
	fake := c.Dynamic.(*dynamicfake.FakeDynamicClient)
	var limits []int64
	// The fake client ignores Limit and Continue; this reactor pages the
	// way the API server does, so the test sees what the command asks.
	fake.PrependReactor("list", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		limits = append(limits, opts.Limit)
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(opts.Continue)
		}
		end := len(objs)
		if opts.Limit > 0 && start+int(opts.Limit) < end {
			end = start + int(opts.Limit)
		}
		l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "apps/v1", "kind": "DeploymentList"}}
		for _, o := range objs[start:end] {
			l.Items = append(l.Items, *o.DeepCopy())
		}
		if end < len(objs) {
			l.SetContinue(strconv.Itoa(end))
		}
		return true, l, nil
	})
	for _, tc := range []struct {
		chunk string
		calls []int64
	}{
		{"3", []int64{3, 3, 3}},
		{"0", []int64{0}},
		{"", []int64{500}}, // kubectl's default
	} {
		limits = nil
		args := []string{"deployments"}
		if tc.chunk != "" {
			args = append(args, "--chunk-size", tc.chunk)
		}
		if got := getRows(t, c, args...); len(got) != 7 {
			t.Errorf("--chunk-size %q: %d workloads, want 7", tc.chunk, len(got))
		}
		if !slices.Equal(limits, tc.calls) {
			t.Errorf("--chunk-size %q: list limits %v, want %v", tc.chunk, limits, tc.calls)
		}
	}
}

// TestNoDefinitionStructured: with -o json or yaml, a type without a
// definition is an error object on stdout (kind, group, message, hint), and
// still exit 4 with one error line on stderr; the table output has only the
// stderr line.
func TestNoDefinitionStructured(t *testing.T) {
	c := jobsetCluster(t, "Running")
	for _, tc := range []struct {
		args   []string
		format string
	}{
		{[]string{"describe", "configmap/x"}, "json"},
		{[]string{"describe", "configmap", "x"}, "yaml"},
		{[]string{"get", "configmaps"}, "json"},
		{[]string{"get", "configmap/x"}, "yaml"},
		{[]string{"get", "configmaps"}, "table"},
	} {
		t.Run(strings.Join(tc.args, " ")+" -o "+tc.format, func(t *testing.T) {
			res := run(t, c, "", append(tc.args, "-o", tc.format)...)
			if res.code != ExitNoDefinition || !strings.HasPrefix(res.stderr, "error: no definition for ConfigMap") {
				t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
			}
			if tc.format == "table" {
				if res.stdout != "" {
					t.Errorf("table output printed %q", res.stdout)
				}
				return
			}
			var r NoDefinitionReport
			if err := yaml.UnmarshalStrict([]byte(res.stdout), &r); err != nil {
				t.Fatalf("%v: %q", err, res.stdout)
			}
			if r.Error != "NoDefinition" || r.Kind != "ConfigMap" || r.Group != "" || !strings.HasPrefix(r.Type, "configmap") ||
				!strings.Contains(r.Message, "no definition for ConfigMap") || !strings.Contains(r.Hint, "muster definitions") {
				t.Errorf("report %+v", r)
			}
		})
	}
	// An offline manifest of a kind without a definition.
	res := run(t, nil, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "describe", "-f", "-", "-o", "json")
	var r NoDefinitionReport
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil || res.code != ExitNoDefinition || r.Error != "NoDefinition" {
		t.Errorf("describe -f -: exit %d, stdout %q (%v)", res.code, res.stdout, err)
	}
}

// TestGetCompletesNames: get completes NAME after TYPE and after TYPE/, as
// describe does.
func TestGetCompletesNames(t *testing.T) {
	c := fakeCluster(t, []*unstructured.Unstructured{deployment("api", "nlp", 1, 1), deployment("batch", "nlp", 1, 1)})
	for _, args := range [][]string{{"deployment", "b"}, {"deployment/b"}} {
		res := run(t, c, "", append([]string{"__complete", "get", "-n", "web"}, args...)...)
		want := "batch"
		if strings.Contains(args[0], "/") {
			want = "deployment/batch"
		}
		if res.code != 0 || !strings.Contains(res.stdout, want+"\n") || strings.Contains(res.stdout, "api") {
			t.Errorf("__complete get %v: exit %d, stdout %q; want %s only", args, res.code, res.stdout, want)
		}
	}
}
