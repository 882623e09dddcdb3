package definition

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// topoDef is the test definition's whole-workload gang with topology
// paths reading the root and the reference $rt.
var topoDef = strings.Replace(refDefYAML, "  annotations:\n", `  annotations:
    muster.io/topology-required-path: .spec.topology.required
    muster.io/topology-preferred-path: '.spec.topology.preferred as $d | first($rt.spec.levels[]? | select(.domain == $d) | .key)'
`, 1)

func TestTopologyPaths(t *testing.T) {
	c := compileT(t, topoDef)
	pod := podT("a-node-0", "role=node")
	rt := objT(t, refRuntimeYAML)
	if err := unstructured.SetNestedSlice(rt.Object, []any{map[string]any{"domain": "rack", "key": "example.com/rack"}}, "spec", "levels"); err != nil {
		t.Fatal(err)
	}
	ctx := WithReferences(ctxT, Bindings{Objects: map[string]*unstructured.Unstructured{"rt": rt}})
	for _, tc := range []struct {
		name, topology      string
		annotations         []string
		required, preferred string
		err                 string
	}{
		{"both", `{required: example.com/zone, preferred: rack}`, nil, "example.com/zone", "example.com/rack", ""},
		{"none", `{}`, nil, "", "", ""},
		{"unknown preferred domain yields nothing", `{preferred: row}`, nil, "", "", ""},
		{"workload annotation wins", `{required: example.com/zone}`, []string{"muster.io/topology-required", "example.com/row"}, "example.com/row", "", ""},
		{"not a label key", `{required: "not a key!"}`, nil, "", "", `metadata.annotations[muster.io/topology-required-path] ".spec.topology.required": yields "not a key!", not a node label key`},
		{"not a string", `{required: [a]}`, nil, "", "", "yields a array, want a node label key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := withAnnotations(objT(t, refRootYAML+"  topology: "+tc.topology+"\n"), tc.annotations...)
			root.SetResourceVersion(tc.name) // one plan per case
			g, err := c.GangForPod(ctx, root, pod)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.TopologyRequired != tc.required || g.TopologyPreferred != tc.preferred {
				t.Errorf("topology %q / %q, want %q / %q", g.TopologyRequired, g.TopologyPreferred, tc.required, tc.preferred)
			}
		})
	}
	// A bad path is a validation error naming the annotation.
	bad := strings.Replace(topoDef, "muster.io/topology-required-path: .spec.topology.required", "muster.io/topology-required-path: .spec.topology.required | bogus", 1)
	if _, err := Compile(decodeT(t, bad), Options{}); err == nil || !strings.Contains(err.Error(), "metadata.annotations[muster.io/topology-required-path]") || !strings.Contains(err.Error(), "function not defined: bogus/0") {
		t.Errorf("bad topology path: %v", err)
	}
}
