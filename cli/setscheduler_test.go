package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
)

// TestSetSchedulerGolden writes the scheduler name into a few catalog
// fixtures and a mixed manifest and compares with testdata/setscheduler/.
func TestSetSchedulerGolden(t *testing.T) {
	fixture := func(kind string) string {
		return filepath.Join(repoRoot(t), "catalog", "testdata", kind, "object.yaml")
	}
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"jobset", []string{"-f", fixture("jobset")}, 0},
		// The leader template is leaderTemplate // workerTemplate: written
		// where the definition finds it.
		{"leaderworkerset", []string{"-f", fixture("leaderworkerset"), "--scheduler-name", "my-scheduler"}, 0},
		{"deployment", []string{"-f", fixture("deployment"), "--label", "team=a", "--annotation", "muster.io/note=set by muster"}, 0},
		{"nimservice-standalone", []string{"-f", "testdata/setscheduler/nimservice-standalone.yaml", "--label", "team=b"}, 0},
		{"mixed", []string{"-f", "testdata/setscheduler/mixed.yaml"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, nil, "", append([]string{"set-scheduler"}, tc.args...)...)
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", res.code, tc.code, res.stderr)
			}
			if tc.code != 0 {
				if res.stdout != "" {
					t.Errorf("printed on error:\n%s", res.stdout)
				}
				golden(t, "setscheduler/"+tc.name+".err", strings.ReplaceAll(res.stderr, repoRoot(t)+"/", ""))
				return
			}
			golden(t, "setscheduler/"+tc.name+".out.yaml", res.stdout)
		})
	}
}

// TestSetSchedulerEveryTemplate runs set-scheduler on every catalog fixture
// and reads the result back through the definition: every pod template of
// every component must carry the scheduler name. A definition that cannot
// write a component must fail with exit 1, naming it, and print nothing.
func TestSetSchedulerEveryTemplate(t *testing.T) {
	reg, err := catalog.NewRegistry(definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The catalog definitions write-back cannot follow today: paths
	// through to_entries or //, or a component without a scheduler name
	// field (the operator gives worker pods none). When one becomes
	// writable, take it off this list.
	notWritable := map[string]bool{
		// The fixture is multi-node: the operator gives worker pods no
		// scheduler name (TestSetSchedulerNote).
		"nimservice": true,
		// The TrainJob API has no scheduler name field; the runtime's
		// template has it (TestSetSchedulerNote).
		"trainjob": true,
		// The NIMCache API has no scheduler name field.
		"nimcache": true,
	}
	for _, dir := range catalogFixtures(t) {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			res := run(t, nil, "", "set-scheduler", "-f", filepath.Join(dir, "object.yaml"), "--scheduler-name", "sched-x", "-o", "json")
			if notWritable[name] {
				if res.code != ExitInvalid || res.stdout != "" || !strings.Contains(res.stderr, "into component") || !strings.Contains(res.stderr, "Path") {
					t.Errorf("want exit 1, nothing printed and the component and field named (or take %s off notWritable); got exit %d, stdout %q, stderr %q", name, res.code, res.stdout, res.stderr)
				}
				return
			}
			if res.code != 0 {
				t.Fatalf("exit %d, stderr: %s", res.code, res.stderr)
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON([]byte(res.stdout)); err != nil {
				t.Fatalf("output: %v", err)
			}
			ent, ok := reg.LookupGVK(obj.GroupVersionKind())
			if !ok {
				t.Fatalf("no definition for %s", obj.GroupVersionKind())
			}
			w, err := ent.Compiled.Extract(context.Background(), obj)
			if err != nil {
				t.Fatal(err)
			}
			templates := 0
			for _, c := range w.Components {
				for _, in := range c.Instances {
					if !c.HasPods || in.Template == nil {
						continue
					}
					templates++
					if got := in.Template.Spec.SchedulerName; got != "sched-x" {
						t.Errorf("component %s instance %q: schedulerName %q, want sched-x", c.Name, in.ID, got)
					}
				}
			}
			if templates == 0 {
				t.Error("no pod template read back")
			}
		})
	}
}

// TestSetSchedulerRoundTrip checks that set-scheduler changes the
// scheduler name and nothing else, fields no definition knows included.
func TestSetSchedulerRoundTrip(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "catalog", "testdata", "jobset", "object.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{}
	if err := yaml.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}
	in["status"] = map[string]any{"futureStatus": map[string]any{"x": []any{int64(1), "two"}}}
	spec := in["spec"].(map[string]any)
	spec["futureField"] = map[string]any{"nested": true}
	rj := spec["replicatedJobs"].([]any)
	rj[0].(map[string]any)["futureJobField"] = "kept"
	input, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}

	res := run(t, nil, string(input), "set-scheduler", "-f", "-")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr: %s", res.code, res.stderr)
	}
	got := map[string]any{}
	if err := yaml.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("output is not YAML: %v", err)
	}
	want := map[string]any{}
	if err := yaml.Unmarshal(input, &want); err != nil {
		t.Fatal(err)
	}
	for _, j := range want["spec"].(map[string]any)["replicatedJobs"].([]any) {
		if err := unstructured.SetNestedField(j.(map[string]any), defaultSchedulerName, "template", "spec", "template", "spec", "schedulerName"); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("set-scheduler changed more than the scheduler names (-want +got):\n%s", diff)
	}
}

func TestSetSchedulerErrors(t *testing.T) {
	nimMulti := filepath.Join(repoRoot(t), "catalog", "testdata", "nimservice", "object.yaml")
	cases := []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  []string // in stderr
	}{
		{name: "no definition for the only kind", stdin: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
			args: []string{"-f", "-"}, code: ExitNoDefinition, want: []string{"no workload with a definition among Widget", "no definition for Widget"}},
		{name: "computed path", args: []string{"-f", "testdata/setscheduler/mixed.yaml", "--definition", "testdata/setscheduler/widget-def.yaml"},
			code: ExitInvalid, want: []string{"Widget w (definition widget)", `component "widget"`, "podTemplateSpecPath", "simple path"}},
		{name: "a component without a scheduler name field", args: []string{"-f", nimMulti},
			code: ExitInvalid, want: []string{"NIMService deepseek-r1", `component "worker"`, "schedulerNamePath"}},
		{name: "labels need a metadata path", stdin: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {pod: {containers: [{name: c}]}}\n",
			args: []string{"-f", "-", "--definition", "testdata/setscheduler/widget-podspec-def.yaml", "--label", "a=b"}, code: ExitInvalid, want: []string{`component "widget"`, "metadataPath"}},
		{name: "no file", args: nil, code: ExitUsage, want: []string{"needs -f FILE"}},
		{name: "bad label", args: []string{"-f", "-", "--label", "a"}, code: ExitUsage, want: []string{`--label "a": want KEY=VALUE`}},
		{name: "bad label value", args: []string{"-f", "-", "--label", "a=b c"}, code: ExitUsage, want: []string{`value "b c"`}},
		{name: "bad scheduler name", args: []string{"-f", "-", "--scheduler-name", "Not_A_Name"}, code: ExitUsage, want: []string{"--scheduler-name"}},
		{name: "bad output", args: []string{"-f", "-", "-o", "table"}, code: ExitUsage, want: []string{"-o must be yaml or json"}},
		{name: "not YAML", stdin: "a: [b\n", args: []string{"-f", "-"}, code: ExitUsage, want: []string{"-: document 1"}},
		{name: "no kind", stdin: "metadata: {name: x}\n", args: []string{"-f", "-"}, code: ExitUsage, want: []string{"apiVersion and kind"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, nil, tc.stdin, append([]string{"set-scheduler"}, tc.args...)...)
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", res.code, tc.code, res.stderr)
			}
			if res.stdout != "" {
				t.Errorf("printed on error:\n%s", res.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr %q lacks %q", res.stderr, w)
				}
			}
		})
	}
}

// A manifest of several documents printed as JSON is one v1 List that
// kubectl apply accepts; the warning about the Widget goes to stderr.
func TestSetSchedulerJSONList(t *testing.T) {
	res := run(t, nil, "", "set-scheduler", "-f", "testdata/setscheduler/mixed.yaml", "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr: %s", res.code, res.stderr)
	}
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "List" || len(list.Items) != 3 {
		t.Fatalf("got kind %q with %d items, want a List of 3", list.Kind, len(list.Items))
	}
	name, _, _ := unstructured.NestedString(list.Items[1], "spec", "template", "spec", "schedulerName")
	if name != defaultSchedulerName {
		t.Errorf("Deployment schedulerName %q, want %s", name, defaultSchedulerName)
	}
	if _, found, _ := unstructured.NestedString(list.Items[2], "spec", "template", "spec", "schedulerName"); found {
		t.Error("the Widget (no definition) was changed")
	}
	if !strings.Contains(res.stderr, "warning:") || !strings.Contains(res.stderr, "Widget/w") {
		t.Errorf("stderr %q lacks the warning about Widget/w", res.stderr)
	}
}

// TestSetSchedulerNote checks that a kind which cannot carry a scheduler
// name to every pod is refused with its definition's note (what to do
// instead), and that the note is the definition's, not the CLI's: the same
// definition without the annotation fails without it.
func TestSetSchedulerNote(t *testing.T) {
	reg, err := catalog.NewRegistry(definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"trainjob", "nimservice"} {
		t.Run(kind, func(t *testing.T) {
			fixture := filepath.Join(repoRoot(t), "catalog", "testdata", kind, "object.yaml")
			ent, ok := reg.Get(kind)
			if !ok {
				t.Fatalf("no catalog definition %s", kind)
			}
			note := strings.Join(strings.Fields(ent.Compiled.Definition().Annotations[annotationSetSchedulerNote]), " ")
			if note == "" {
				t.Fatalf("catalog/%s.yaml has no %s", kind, annotationSetSchedulerNote)
			}
			res := run(t, nil, "", "set-scheduler", "-f", fixture)
			if res.code != ExitInvalid || res.stdout != "" || !strings.Contains(res.stderr, note) {
				t.Fatalf("want exit 1, nothing printed and the note %q; got exit %d, stdout %q, stderr %q", note, res.code, res.stdout, res.stderr)
			}

			// The same definition without the note.
			raw, err := catalog.EmbeddedFile(kind)
			if err != nil {
				t.Fatal(err)
			}
			def := map[string]any{}
			if err := yaml.Unmarshal(raw, &def); err != nil {
				t.Fatal(err)
			}
			unstructured.RemoveNestedField(def, "metadata", "annotations", annotationSetSchedulerNote)
			bare, err := yaml.Marshal(def)
			if err != nil {
				t.Fatal(err)
			}
			defFile := filepath.Join(t.TempDir(), kind+".yaml")
			if err := os.WriteFile(defFile, bare, 0o600); err != nil {
				t.Fatal(err)
			}
			res = run(t, nil, "", "set-scheduler", "-f", fixture, "--definition", defFile)
			if res.code != ExitInvalid || !strings.Contains(res.stderr, "path cannot be written") || strings.Contains(res.stderr, note) {
				t.Errorf("without the annotation: want exit 1 and no note; got exit %d, stderr %q", res.code, res.stderr)
			}
		})
	}
}
