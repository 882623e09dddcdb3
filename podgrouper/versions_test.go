package podgrouper

import (
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
)

// TestCatalogDefinitionsVersionRule: a kind at a version whose served
// schema lacks what the definition of another version reads is not found,
// and Broken then reports it with the registry's message, so the pods wait
// instead of being grouped by a definition that misreads their workload; a
// version that fits, or a later good lookup, clears it.
func TestCatalogDefinitionsVersionRule(t *testing.T) {
	k, err := definition.Decode([]byte(`apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: gizmo}
spec:
  structureDefinition:
    rootComponent:
      name: gizmo
      kind: {group: acme.example.com, version: v1, kind: Gizmo}
    childComponents:
    - name: worker
      ownerRef: gizmo
      specDefinition: {podTemplateSpecPath: .spec.template}
      scaleDefinition: {replicasPath: .spec.workers}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := catalog.NewRegistry(definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCluster([]*kartav1alpha1.Karta{k})
	spec := func(fields ...string) *apiextensionsv1.JSONSchemaProps {
		p := map[string]apiextensionsv1.JSONSchemaProps{"template": {Type: "object", XPreserveUnknownFields: ptr.To(true)}}
		for _, f := range fields {
			p[f] = apiextensionsv1.JSONSchemaProps{Type: "integer"}
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: p}}}
	}
	r.SetSchemas(func(gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) {
		if gvk.Version == "v2" {
			return spec("replicas"), nil
		}
		return spec("workers"), nil
	})
	d := NewCatalogDefinitions(r)
	gk := schema.GroupKind{Group: "acme.example.com", Kind: "Gizmo"}

	if _, ok := d.LookupGVK(gk.WithVersion("v2")); ok {
		t.Fatal("v2 found: its schema has no .spec.workers")
	}
	e, ok := d.Broken(gk)
	var verr *catalog.VersionError
	if !ok || e.Name != "gizmo" || e.Source != "karta/gizmo" || !errors.As(e.Err, &verr) || !strings.Contains(e.Err.Error(), ".spec.workers") {
		t.Fatalf("Broken after the v2 lookup: %+v, %v; want gizmo with the VersionError", e, ok)
	}
	if e, ok := d.LookupGVK(gk.WithVersion("v3")); !ok || e.Name != "gizmo" {
		t.Fatalf("v3 (same fields as v1): %+v, %v", e, ok)
	}
	if e, ok := d.Broken(gk); ok {
		t.Errorf("Broken after a good lookup: %+v", e)
	}
}
