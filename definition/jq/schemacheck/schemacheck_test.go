package schemacheck

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// A cut-down structural schema in the shape of a CRD with replicated jobs.
const testSchema = `
type: object
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    properties:
      suspend: {type: boolean}
      replicatedJobs:
        type: array
        items:
          type: object
          properties:
            name: {type: string}
            replicas: {type: integer}
            template:
              type: object
              x-kubernetes-preserve-unknown-fields: true
      selectors:
        type: object
        additionalProperties:
          type: object
          properties:
            key: {type: string}
      free:
        type: object
        x-kubernetes-preserve-unknown-fields: true
  status:
    type: object
    properties:
      conditions:
        type: array
        items:
          type: object
          properties:
            type: {type: string}
            status: {type: string}
`

func TestCheck(t *testing.T) {
	var schema apiextensionsv1.JSONSchemaProps
	if err := yaml.Unmarshal([]byte(testSchema), &schema); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		expr string
		want []string // "path: message prefix"
	}{
		{name: "existing chain", expr: ".spec.replicatedJobs[].replicas"},
		{name: "bracket string index", expr: `.spec["replicatedJobs"][0].name`},
		{name: "typo in array name", expr: ".spec.replicatedJob[].replicas",
			want: []string{`.spec.replicatedJob: field "replicatedJob" does not exist in .spec; did you mean "replicatedJobs"?`}},
		{name: "field of an array", expr: ".spec.replicatedJobs.name",
			want: []string{".spec.replicatedJobs.name: .spec.replicatedJobs is an array"}},
		{name: "field of a scalar", expr: ".spec.suspend.value",
			want: []string{`.spec.suspend.value: .spec.suspend is a boolean and has no field "value"`}},
		{name: "pipe keeps the place", expr: ".spec.replicatedJobs[] | (.replicas // 1) * (.parallelism // 1)",
			want: []string{`.spec.replicatedJobs[].parallelism: field "parallelism" does not exist in .spec.replicatedJobs[]`}},
		{name: "preserve unknown fields", expr: ".spec.replicatedJobs[].template.spec.parallelism"},
		{name: "map values", expr: ".spec.selectors[].key, .spec.selectors.anything.key"},
		{name: "map value typo", expr: ".spec.selectors[].kee",
			want: []string{`.spec.selectors[].kee: field "kee" does not exist in .spec.selectors[]; did you mean "key"?`}},
		{name: "free object", expr: ".spec.free.a.b.c"},
		{name: "metadata is free", expr: `.metadata.labels["app"]`},
		{name: "select reads elements", expr: `.status.conditions[] | select(.typ == "Ready") | .status`,
			want: []string{`.status.conditions[].typ: field "typ" does not exist in .status.conditions[]; did you mean "type"?`}},
		{name: "map reads elements", expr: `.spec.replicatedJobs | map(.nam)`,
			want: []string{`.spec.replicatedJobs[].nam: field "nam" does not exist in .spec.replicatedJobs[]; did you mean "name"?`}},
		{name: "if branches", expr: `if .spec.suspend then .spec.replicatedJobs[0].replicas else .statuss end`,
			want: []string{`.statuss: field "statuss" does not exist in .; did you mean "status"?`}},
		{name: "object construction", expr: `{name: .spec.nme}`,
			want: []string{`.spec.nme: field "nme" does not exist in .spec`}},
		{name: "binding keeps the input", expr: `.spec as $s | .status.conditions`},
		{name: "variable leads where it was bound", expr: `.spec as $s | $s.replicatedJobz`,
			want: []string{`.spec.replicatedJobz: field "replicatedJobz" does not exist in .spec; did you mean "replicatedJobs"?`}},
		{name: "variable scope ends with the body", expr: `(.spec as $s | 1) | $s.anything`},
		{name: "nested bindings", expr: `.spec as $s | .status as $t | $s.suspend, $t.conditionz`,
			want: []string{`.status.conditionz: field "conditionz" does not exist in .status`}},
		{name: "to_entries on a map", expr: `.spec.selectors | to_entries[] | .value.key, .key`},
		{name: "to_entries value typo", expr: `.spec.selectors | to_entries[] | .value.kee`,
			want: []string{`.spec.selectors|to_entries[].value.kee: field "kee" does not exist`}},
		{name: "to_entries entry typo", expr: `.spec.selectors | to_entries[] | .vaule`,
			want: []string{`.spec.selectors|to_entries[].vaule: field "vaule" does not exist`}},
		{name: "unknown function result is not followed", expr: `.spec | to_entries | .[].whatever`},
		{name: "root meta fields", expr: `.kind, .apiVersion`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Check(tc.expr, &schema)
			if err != nil {
				t.Fatal(err)
			}
			var gotS []string
			for i, p := range got {
				s := p.String()
				if i < len(tc.want) && strings.HasPrefix(s, tc.want[i]) {
					s = tc.want[i]
				}
				gotS = append(gotS, s)
			}
			if diff := cmp.Diff(tc.want, gotS); diff != "" {
				t.Errorf("Check(%q) (-want +got):\n%s", tc.expr, diff)
			}
		})
	}
}

func TestCheckNilSchemaAndParseError(t *testing.T) {
	if got, err := Check(".a.b.c", nil); err != nil || len(got) != 0 {
		t.Errorf("nil schema: got %v, %v; want nothing", got, err)
	}
	if _, err := Check(".a[", nil); err == nil {
		t.Error("parse error: got nil error")
	}
}

// FromGoType: pod-side paths and built-in kinds are checked against the Go
// types, which have no CRD.
func TestFromGoType(t *testing.T) {
	pod := FromGoType(reflect.TypeFor[corev1.Pod]())
	deploy := FromGoType(reflect.TypeFor[appsv1.Deployment]())
	tests := []struct {
		expr   string
		schema *apiextensionsv1.JSONSchemaProps
		want   []string // paths
	}{
		{expr: `.metadata.labels["ray.io/node-type"]`, schema: pod},
		{expr: `.metadata.labelz`, schema: pod, want: []string{".metadata.labelz"}},
		{expr: `.spec.containers[].resources.limits["nvidia.com/gpu"]`, schema: pod},
		{expr: `.spec.containers[].resourcez`, schema: pod, want: []string{".spec.containers[].resourcez"}},
		{expr: `.metadata.labels | (.["a"] // .["b"])`, schema: pod},
		{expr: `.metadata.ownerReferences[] | select(.controller) | .uid`, schema: pod},
		{expr: `.metadata.creationTimestamp.anything`, schema: pod}, // a leaf with its own JSON form
		{expr: `.spec.replicas, .spec.template.spec.schedulerName`, schema: deploy},
		{expr: `.spec.replica`, schema: deploy, want: []string{".spec.replica"}},
		{expr: `.spec.strategy.rollingUpdate.maxSurge`, schema: deploy},
		{expr: `.kind, .apiVersion`, schema: deploy},
	}
	for _, tc := range tests {
		got, err := Check(tc.expr, tc.schema)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		var paths []string
		for _, p := range got {
			paths = append(paths, p.Path)
		}
		if diff := cmp.Diff(tc.want, paths); diff != "" {
			t.Errorf("Check(%q) (-want +got):\n%s", tc.expr, diff)
		}
	}
}
