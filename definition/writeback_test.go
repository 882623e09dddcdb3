package definition

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestApplyTemplatePatch(t *testing.T) {
	patch := TemplatePatch{SchedulerName: "muster", Labels: map[string]string{"new": "1", "role": "over"}, Annotations: map[string]string{"a": "b"}}
	c := compileT(t, jobsetDef)
	obj := objT(t, jobsetObj)
	before := obj.DeepCopy()
	out, err := c.ApplyTemplatePatch(ctxT, obj, patch)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.Object, obj.Object); diff != "" {
		t.Fatalf("input changed:\n%s", diff)
	}
	jobs, _, _ := unstructured.NestedSlice(out.Object, "spec", "replicatedJobs")
	for i, j := range jobs {
		tpl, _, _ := unstructured.NestedMap(j.(map[string]any), "template", "spec", "template")
		if name, _, _ := unstructured.NestedString(tpl, "spec", "schedulerName"); name != "muster" {
			t.Errorf("job %d: schedulerName %q", i, name)
		}
		labels, _, _ := unstructured.NestedStringMap(tpl, "metadata", "labels")
		if labels["new"] != "1" || labels["role"] != "over" {
			t.Errorf("job %d: labels %v", i, labels)
		}
		ann, _, _ := unstructured.NestedStringMap(tpl, "metadata", "annotations")
		if ann["a"] != "b" {
			t.Errorf("job %d: annotations %v", i, ann)
		}
	}
	// Round trip: undoing the writes gives the original back, so nothing
	// else (unknown fields, numbers, status) changed.
	for i, j := range jobs {
		tpl := j.(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)
		delete(tpl["spec"].(map[string]any), "schedulerName")
		md := tpl["metadata"].(map[string]any)
		delete(md, "annotations")
		l := md["labels"].(map[string]any)
		delete(l, "new")
		delete(l, "role")
		if i == 0 {
			l["role"] = "leader" // the only label the object had
		}
		if len(l) == 0 {
			delete(md, "labels")
		}
		if len(md) == 0 {
			delete(tpl, "metadata")
		}
	}
	_ = unstructured.SetNestedSlice(out.Object, jobs, "spec", "replicatedJobs")
	if diff := cmp.Diff(before.Object, out.Object); diff != "" {
		t.Errorf("round trip (-want, +got):\n%s", diff)
	}
	// The patched object still reads the same way.
	g, err := c.GangForPod(ctxT, out, podT("p", "jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=workers"))
	if err != nil || g.MinMember != 3 {
		t.Fatalf("after patch: %v %v", g, err)
	}
}

func TestApplyTemplatePatchShapes(t *testing.T) {
	patch := TemplatePatch{SchedulerName: "muster", Labels: map[string]string{"l": "v"}}
	tests := []struct {
		name, def, obj string
		check          func(t *testing.T, u *unstructured.Unstructured)
		wantErr        string
	}{
		{"fragmented", fragDef, fragObj, func(t *testing.T, u *unstructured.Unstructured) {
			if s, _, _ := unstructured.NestedString(u.Object, "spec", "scheduler"); s != "muster" {
				t.Errorf("scheduler %q", s)
			}
			l, _, _ := unstructured.NestedStringMap(u.Object, "spec", "podLabels")
			if l["l"] != "v" || l["team"] != "a" {
				t.Errorf("labels %v: merged, none dropped", l)
			}
			if k, _, _ := unstructured.NestedBool(u.Object, "spec", "somethingElse", "kept"); !k {
				t.Error("unknown field lost")
			}
		}, ""},
		{"pod spec and metadata", podSpecDef, "apiVersion: example.com/v1\nkind: Split\nmetadata: {name: s}\nspec: {pod: {containers: [{name: c}]}}", func(t *testing.T, u *unstructured.Unstructured) {
			if s, _, _ := unstructured.NestedString(u.Object, "spec", "pod", "schedulerName"); s != "muster" {
				t.Errorf("scheduler %q", s)
			}
			if l, _, _ := unstructured.NestedString(u.Object, "spec", "podMetadata", "labels", "l"); l != "v" {
				t.Errorf("label %q", l)
			}
		}, ""},
		{"a template that is not there is not created", rayDef, strings.Split(rayObj, "  workerGroupSpecs:")[0], func(t *testing.T, u *unstructured.Unstructured) {
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "workerGroupSpecs"); found {
				t.Error("created worker groups")
			}
			if s, _, _ := unstructured.NestedString(u.Object, "spec", "headGroupSpec", "template", "spec", "schedulerName"); s != "muster" {
				t.Errorf("head scheduler %q", s)
			}
		}, ""},
		// The object has no leaderTemplate: the operator makes the leader from
		// the workerTemplate, so that is where the alternative writes.
		{"alternative writes the template it picks", lwsDef, lwsObj, func(t *testing.T, u *unstructured.Unstructured) {
			if s, _, _ := unstructured.NestedString(u.Object, "spec", "leaderWorkerTemplate", "workerTemplate", "spec", "schedulerName"); s != "muster" {
				t.Errorf("worker template scheduler %q", s)
			}
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "leaderWorkerTemplate", "leaderTemplate"); found {
				t.Error("created a leader template")
			}
		}, ""},
		{"labels need a metadata path", strings.Replace(podSpecDef, ", metadataPath: .spec.podMetadata", "", 1),
			"apiVersion: example.com/v1\nkind: Split\nmetadata: {name: s}\nspec: {pod: {containers: [{name: c}]}}", nil, "no metadataPath"},
		{"nothing half-written when a leaf cannot be set", podSpecDef,
			"apiVersion: example.com/v1\nkind: Split\nmetadata: {name: s}\nspec: {pod: {containers: [{name: c}]}, podMetadata: {labels: 3}}", nil, "not an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compileT(t, tc.def)
			obj := objT(t, tc.obj)
			before := obj.DeepCopy()
			out, err := c.ApplyTemplatePatch(ctxT, obj, patch)
			if diff := cmp.Diff(before.Object, obj.Object); diff != "" {
				t.Fatalf("input changed:\n%s", diff)
			}
			if tc.wantErr != "" {
				if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want ErrNotWritable with %q", err, tc.wantErr)
				}
				if out != nil {
					t.Fatal("returned an object with the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, out)
		})
	}
}

// twoShapesDef has a single-node component "server" and a multi-node
// component "worker" without a scheduler name or labels path; which one an
// object has depends on .spec.multiNode.
const twoShapesDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: twoshapes}
spec:
  structureDefinition:
    rootComponent:
      name: svc
      kind: {group: example.com, version: v1, kind: Svc}
    childComponents:
      - name: server
        ownerRef: svc
        instanceIdPath: select(.spec.multiNode == null) | .metadata.name
        specDefinition:
          fragmentedPodSpecDefinition:
            resourcesPath: .spec.resources
            schedulerNamePath: .spec.schedulerName
            labelsPath: .spec.labels
            annotationsPath: .spec.annotations
        podSelector:
          componentTypeSelector: {keyPath: '.metadata.labels["lws/name"] == null'}
          componentInstanceSelector: {idPath: .metadata.labels.app}
      - name: group
        ownerRef: svc
        instanceIdPath: select(.spec.multiNode != null) | .metadata.name
        scaleDefinition: {replicasPath: .spec.replicas}
      - name: worker
        ownerRef: group
        specDefinition:
          fragmentedPodSpecDefinition:
            resourcesPath: .spec.resources
            annotationsPath: .spec.annotations
        scaleDefinition: {replicasPath: .spec.multiNode.size}
        podSelector:
          componentTypeSelector: {keyPath: '.metadata.labels["lws/name"]'}
`

// Only components the object has must be writable, and only for the
// fields the patch sets.
func TestApplyTemplatePatchAbsentComponents(t *testing.T) {
	single := "apiVersion: example.com/v1\nkind: Svc\nmetadata: {name: s}\nspec: {schedulerName: default, labels: {team: a}, resources: {limits: {nvidia.com/gpu: 1}}}"
	multi := "apiVersion: example.com/v1\nkind: Svc\nmetadata: {name: s}\nspec: {replicas: 2, multiNode: {size: 2}, resources: {limits: {nvidia.com/gpu: 8}}}"
	tests := []struct {
		name, obj string
		patch     TemplatePatch
		want      map[string]any // .spec after the patch, when no error
		wantErr   string
	}{
		{"absent component without paths is skipped", single,
			TemplatePatch{SchedulerName: "muster", Labels: map[string]string{"l": "v"}},
			map[string]any{"schedulerName": "muster", "labels": map[string]any{"team": "a", "l": "v"}}, ""},
		{"present component without a scheduler name path", multi,
			TemplatePatch{SchedulerName: "muster"}, nil, `component "worker": path cannot be written: the definition has no fragmentedPodSpecDefinition.schedulerNamePath`},
		{"present component without a labels path", multi,
			TemplatePatch{Labels: map[string]string{"l": "v"}}, nil, `component "worker"`},
		{"present component, only fields it has paths for", multi,
			TemplatePatch{Annotations: map[string]string{"a": "b"}},
			map[string]any{"annotations": map[string]any{"a": "b"}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compileT(t, twoShapesDef)
			obj := objT(t, tc.obj)
			before := obj.DeepCopy()
			out, err := c.ApplyTemplatePatch(ctxT, obj, tc.patch)
			if diff := cmp.Diff(before.Object, obj.Object); diff != "" {
				t.Fatalf("input changed:\n%s", diff)
			}
			if tc.wantErr != "" {
				if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want ErrNotWritable with %q", err, tc.wantErr)
				}
				if out != nil {
					t.Fatal("returned an object with the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := out.Object["spec"].(map[string]any)
			for k, v := range tc.want {
				if diff := cmp.Diff(v, spec[k]); diff != "" {
					t.Errorf(".spec.%s (-want, +got):\n%s", k, diff)
				}
			}
			// Nothing else changed.
			for k := range before.Object["spec"].(map[string]any) {
				if _, ok := tc.want[k]; !ok {
					if diff := cmp.Diff(before.Object["spec"].(map[string]any)[k], spec[k]); diff != "" {
						t.Errorf(".spec.%s changed:\n%s", k, diff)
					}
				}
			}
		})
	}
}
