package catalog

import (
	"context"
	"os"
	"path/filepath"
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
