package catalog

import (
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// corpusSchemas serves the schemas of the corpus CRDs, as a cluster with
// them installed would.
func corpusSchemas(crds map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition) SchemaFunc {
	return func(gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) {
		crd, ok := crds[gvk.GroupKind()]
		if !ok {
			return nil, nil
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == gvk.Version && v.Served && v.Schema != nil {
				return v.Schema.OpenAPIV3Schema, nil
			}
		}
		return nil, nil
	}
}

// refusedVersions are the served versions of corpus CRDs whose schema
// lacks fields the catalog's definition (written for another version)
// reads, with one of those fields: they are refused, not misread.
var refusedVersions = map[string]string{
	// The v1alpha1 Milvus API has no .spec.components or .spec.mode.
	"milvus.io/v1alpha1, Kind=Milvus": ".spec.components",
	// KubeRay's v1alpha1 schemas predate numOfHosts and status conditions.
	"ray.io/v1alpha1, Kind=RayCluster": "numOfHosts",
	"ray.io/v1alpha1, Kind=RayJob":     "numOfHosts",
	"ray.io/v1alpha1, Kind=RayService": "numOfHosts",
}

// TestServedVersionsOfCorpusCRDs: for every version a corpus CRD serves of
// a kind the catalog defines, the registry, given the CRD's schemas, finds
// the definition of that version, or one of another version whose every
// path exists in that version's schema (the LLMInferenceService v1alpha1
// definition reads v1alpha2 objects: the fields it reads are the same in
// both), or refuses with a VersionError naming a field (refusedVersions).
func TestServedVersionsOfCorpusCRDs(t *testing.T) {
	if testing.Short() {
		t.Skip("reads every corpus CRD; not in -short")
	}
	corpus := corpusDir(t)
	if corpus == "" {
		t.Skip("../shared/corpus is not present")
	}
	crds := loadCRDs(t, corpus)
	r := newTestRegistry(t)
	r.SetSchemas(corpusSchemas(crds))
	resolved := map[string]string{}
	seen := map[schema.GroupKind]bool{}
	for _, e := range r.List() {
		crd, ok := crds[e.GroupKind]
		if !ok || seen[e.GroupKind] {
			continue
		}
		seen[e.GroupKind] = true
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gvk := e.GroupKind.WithVersion(v.Name)
			got, err := r.Resolve(gvk)
			want, refused := refusedVersions[gvk.String()]
			var verr *VersionError
			switch {
			case refused && (!errors.As(err, &verr) || !strings.Contains(err.Error(), want)):
				t.Errorf("%v: got %v, %v; want a VersionError naming %s", gvk, got, err, want)
			case !refused && err != nil:
				t.Errorf("%v: %v", gvk, err)
			case !refused:
				resolved[gvk.String()] = got.Name
			}
		}
	}
	llm := schema.GroupVersionKind{Group: "serving.kserve.io", Version: "v1alpha2", Kind: "LLMInferenceService"}
	if got := resolved[llm.String()]; got != "llminferenceservice" {
		t.Errorf("%v resolved to %q, want the llminferenceservice definition", llm, got)
	}
	t.Logf("served versions and their definitions: %v", resolved)
}

// TestVersionFallbackRefusesMovedFields: the v1beta1 DynamoGraphDeployment
// moved its services map to a components list; the v1alpha1 definition
// must not read it (it did, and failed with "keys cannot be applied to:
// null"). With only the v1alpha1 definition and a v1beta1 schema that has
// .spec.components, the registry refuses and names .spec.services.
func TestVersionFallbackRefusesMovedFields(t *testing.T) {
	r := newTestRegistry(t)
	v1beta1 := objectSchema("components", "topologyConstraint")
	r.SetSchemas(func(schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) { return v1beta1, nil })
	dgd := schema.GroupKind{Group: "nvidia.com", Kind: "DynamoGraphDeployment"}
	var alpha *Entry
	for _, e := range r.ForKind(dgd) {
		if e.Version == "v1alpha1" {
			alpha = e
		}
	}
	if alpha == nil {
		t.Fatal("no v1alpha1 DynamoGraphDeployment definition")
	}
	_, err := fallback(dgd.WithVersion("v1beta2"), []*Entry{alpha}, func(schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) { return v1beta1, nil })
	if err == nil || !strings.Contains(err.Error(), ".spec.services") || !strings.Contains(err.Error(), "add a definition for v1beta2") {
		t.Errorf("v1alpha1 definition on a v1beta1-shaped schema: %v", err)
	}
}
