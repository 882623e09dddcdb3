package examples

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestAllExamples(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 3 {
		t.Fatalf("want at least 3 examples, got %d", len(all))
	}
	// The first example is the one the design names: the JobSet gang.
	if first := all[0]; first.Kind != "JobSet" || first.Operator != "jobset" {
		t.Errorf("first example is %s %s (operator %q), want the JobSet run by the jobset operator", first.Kind, first.Name, first.Operator)
	}
	kueue, err := Kueue()
	if err != nil {
		t.Fatal(err)
	}
	// The Kueue examples: two submissions to the LocalQueue default, the
	// second expected to wait in the queue.
	if len(kueue) != 2 || kueue[0].Expect != ExpectScheduled || kueue[1].Expect != ExpectQueued {
		t.Errorf("Kueue examples: %d, want 2 (scheduled, then queued)", len(kueue))
	}
	for _, ex := range kueue {
		var obj struct {
			Metadata struct{ Labels map[string]string } `json:"metadata"`
		}
		if err := yaml.Unmarshal(ex.YAML, &obj); err != nil {
			t.Fatal(err)
		}
		if q := obj.Metadata.Labels["kueue.x-k8s.io/queue-name"]; q != "default" || ex.Namespace != "default" {
			t.Errorf("%s: queue-name %q in namespace %q, want the LocalQueue default of namespace default", ex.File, q, ex.Namespace)
		}
	}
	for _, ex := range append(all, kueue...) {
		if ex.Description == "" {
			t.Errorf("%s: no %s annotation", ex.File, AnnotationDescription)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(ex.YAML, &obj); err != nil {
			t.Fatalf("%s: %v", ex.File, err)
		}
		specs := podSpecs(obj, nil)
		if len(specs) == 0 {
			t.Errorf("%s: no pod template found", ex.File)
		}
		for _, s := range specs {
			if s["schedulerName"] != "muster-scheduler" {
				t.Errorf("%s: a pod template has schedulerName %v, want muster-scheduler", ex.File, s["schedulerName"])
			}
			if !asksForGPUs(s) {
				t.Errorf("%s: a pod template requests no nvidia.com/gpu", ex.File)
			}
		}
	}
}

// podSpecs finds every pod spec (a map with a containers list) in v.
func podSpecs(v any, out []map[string]any) []map[string]any {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["containers"].([]any); ok {
			return append(out, x)
		}
		for _, c := range x {
			out = podSpecs(c, out)
		}
	case []any:
		for _, c := range x {
			out = podSpecs(c, out)
		}
	}
	return out
}

func asksForGPUs(spec map[string]any) bool {
	for _, c := range spec["containers"].([]any) {
		res, _ := c.(map[string]any)["resources"].(map[string]any)
		for _, k := range []string{"requests", "limits"} {
			if m, ok := res[k].(map[string]any); ok && m["nvidia.com/gpu"] != nil {
				return true
			}
		}
	}
	return false
}

func TestParse(t *testing.T) {
	const head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
	tests := []struct {
		name, yaml string
		want       Example // File, Kind, Name, Operator, Expect compared
		wantErr    string
	}{
		{name: "defaults", yaml: "# comment\n" + head,
			want: Example{Kind: "Pod", Name: "p", Expect: ExpectScheduled}},
		{name: "annotations", yaml: head + "  annotations:\n    sandbox.muster.io/operator: jobset\n    sandbox.muster.io/expect: unschedulable\n",
			want: Example{Kind: "Pod", Name: "p", Operator: "jobset", Expect: ExpectUnschedulable}},
		{name: "bad expect", yaml: head + "  annotations:\n    sandbox.muster.io/expect: soon\n",
			wantErr: `example f.yaml: metadata.annotations[sandbox.muster.io/expect]: "soon"`},
		{name: "empty operator", yaml: head + "  annotations:\n    sandbox.muster.io/operator: \"\"\n",
			wantErr: "sandbox.muster.io/operator] is empty"},
		{name: "no name", yaml: "apiVersion: v1\nkind: Pod\n", wantErr: "example f.yaml: metadata.name is required"},
		{name: "no kind", yaml: "apiVersion: v1\nmetadata: {name: p}\n", wantErr: "kind is required"},
		{name: "two documents", yaml: head + "---\n" + head, wantErr: "want exactly one YAML document (one workload per file), found 2"},
		{name: "empty", yaml: "# nothing\n", wantErr: "found 0"},
		{name: "not YAML", yaml: "kind: [", wantErr: "example f.yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("f.yaml", []byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.File != "f.yaml" || got.Kind != tt.want.Kind || got.Name != tt.want.Name || got.Operator != tt.want.Operator || got.Expect != tt.want.Expect {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}
