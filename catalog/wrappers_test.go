package catalog

import (
	"bytes"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestWrappers: every wrapper decodes, starts with its comment block and
// names a kind the catalog has NO definition for at any version: a
// definition would make the pod-grouper stop at the wrapper instead of
// passing over it, which is the whole point of listing it.
func TestWrappers(t *testing.T) {
	ws, err := Wrappers()
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) == 0 {
		t.Fatal("no wrappers")
	}
	reg := newTestRegistry(t)
	for _, w := range ws {
		raw, err := wrapperFiles.ReadFile("wrappers/" + w.Name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(raw, []byte("#")) {
			t.Errorf("catalog/wrappers/%s.yaml does not start with its comment block", w.Name)
		}
		gk := schema.GroupKind{Group: w.Kind.Group, Kind: w.Kind.Kind}
		if es := reg.ForKind(gk); len(es) > 0 {
			t.Errorf("wrapper %s: %v has the definition %s; a kind is a wrapper or has a definition, not both", w.Name, gk, es[0].Name)
		}
	}
}
