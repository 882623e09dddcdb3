package catalog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/muster-io/muster/definition"
)

// fixtureReferences binds the objects a fixture's root references to the
// documents of its references.yaml, as the CLI does offline. A fixture
// without that file binds nothing (every reference is null), and a target
// that the file does not hold fails the test: a fixture says which objects
// the cluster has.
func fixtureReferences(t *testing.T, ctx context.Context, dir string, c *definition.Compiled, root *unstructured.Unstructured) context.Context {
	t.Helper()
	p := filepath.Join(dir, "references.yaml")
	if _, err := os.Stat(p); err != nil {
		return ctx
	}
	var objs []*unstructured.Unstructured
	for _, d := range readDocs(t, p) {
		objs = append(objs, &unstructured.Unstructured{Object: d})
	}
	targets, err := c.Targets(ctx, root)
	if err != nil {
		t.Fatalf("%s: Targets: %v", dir, err)
	}
	found, missing := definition.Resolve(targets, objs)
	if len(missing) > 0 {
		t.Fatalf("%s: references.yaml lacks %v", dir, missing)
	}
	return definition.WithReferences(ctx, definition.Bindings{Objects: found})
}

// TestPodCliqueSetTopology: a PodCliqueSet's topologyConstraint domains
// become the gang's node label keys through the ClusterTopologyBinding it
// names; what cannot be resolved is an error or a wait, never a guess.
func TestPodCliqueSetTopology(t *testing.T) {
	entry, ok := newTestRegistry(t).Get("podcliqueset")
	if !ok {
		t.Fatal("no podcliqueset definition")
	}
	c := entry.Compiled
	dir := filepath.Join("testdata", "podcliqueset", "topology")
	root := &unstructured.Unstructured{Object: readDocs(t, filepath.Join(dir, "object.yaml"))[0]}
	binding := &unstructured.Unstructured{Object: readDocs(t, filepath.Join(dir, "references.yaml"))[0]}
	pod := toPod(t, readDocs(t, filepath.Join(dir, "pods.yaml"))[0])
	withBinding := func(b *unstructured.Unstructured) context.Context {
		return definition.WithReferences(context.Background(), definition.Bindings{Objects: map[string]*unstructured.Unstructured{"topology": b}})
	}
	unresolved := definition.WithReferences(context.Background(), definition.Bindings{Unresolved: map[string]string{"topology": "ClusterTopologyBinding gb200 does not exist"}})
	noRack := binding.DeepCopy()
	if err := unstructured.SetNestedSlice(noRack.Object, []any{map[string]any{"domain": "host", "key": "kubernetes.io/hostname"}}, "spec", "levels"); err != nil {
		t.Fatal(err)
	}
	constraint := func(tc map[string]any, annotations ...string) *unstructured.Unstructured {
		r := root.DeepCopy()
		if err := unstructured.SetNestedMap(r.Object, tc, "spec", "template", "topologyConstraint"); err != nil {
			t.Fatal(err)
		}
		if len(annotations) > 0 {
			ann := map[string]string{}
			for i := 0; i+1 < len(annotations); i += 2 {
				ann[annotations[i]] = annotations[i+1]
			}
			r.SetAnnotations(ann)
		}
		return r
	}
	for _, tc := range []struct {
		name                string
		ctx                 context.Context
		root                *unstructured.Unstructured
		required, preferred string
		err                 string
	}{
		{"rack required, host preferred", withBinding(binding), root, "example.com/rack", "kubernetes.io/hostname", ""},
		{"legacy packDomain", withBinding(binding), constraint(map[string]any{"topologyName": "gb200", "packDomain": "block"}), "example.com/nvlink-block", "", ""},
		{"preferred domain the binding lacks is dropped", withBinding(binding), constraint(map[string]any{"topologyName": "gb200", "pack": map[string]any{"preferred": "numa"}}), "", "", ""},
		{"no constraint", withBinding(nil), constraint(map[string]any{}), "", "", ""},
		{"required domain the binding lacks", withBinding(noRack), root, "", "",
			"requires the domain rack, which ClusterTopologyBinding gb200 does not define; set the node label key in the muster.io/topology-required annotation"},
		{"no topologyName", withBinding(nil), constraint(map[string]any{"pack": map[string]any{"required": "rack"}}), "", "",
			"requires the domain rack, which no ClusterTopologyBinding maps: topologyConstraint.topologyName is not set"},
		{"binding not readable", unresolved, root, "", "", "reads $topology, which is not resolved: ClusterTopologyBinding gb200 does not exist"},
		{"workload annotations win and need no binding", unresolved,
			constraint(map[string]any{"topologyName": "gb200", "pack": map[string]any{"required": "rack", "preferred": "host"}},
				"muster.io/topology-required", "example.com/row", "muster.io/topology-preferred", "example.com/rack"),
			"example.com/row", "example.com/rack", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := c.GangForPod(tc.ctx, tc.root, pod)
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
				t.Errorf("topology required %q preferred %q, want %q and %q", g.TopologyRequired, g.TopologyPreferred, tc.required, tc.preferred)
			}
			plans, err := c.GangPlans(tc.ctx, tc.root)
			if err != nil || len(plans) != 1 || plans[0].TopologyRequired != tc.required || plans[0].TopologyPreferred != tc.preferred {
				t.Errorf("plans %+v, %v; want the same topology", plans, err)
			}
		})
	}
}
