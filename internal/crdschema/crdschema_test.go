package crdschema

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestReader: the schema of the version asked for, nothing (no error) for
// a kind without a CRD, a version the CRD has no schema for, or one the
// cluster does not serve; an error only when reading the CRD fails.
func TestReader(t *testing.T) {
	widget := func(v string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "acme.example.com", Version: v, Kind: "Widget"}
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, v := range []string{"v1", "v2", "v3"} {
		mapper.Add(widget(v), meta.RESTScopeNamespace)
	}
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.acme.example.com"},
		"spec": map[string]any{
			"group": "acme.example.com",
			"names": map[string]any{"plural": "widgets", "kind": "Widget"},
			"scope": "Namespaced",
			"versions": []any{
				map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "properties": map[string]any{"spec": map[string]any{"type": "object", "description": "v1 spec"}}}}},
				map[string]any{"name": "v2", "served": true},
			},
		},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GVR: "CustomResourceDefinitionList"}, crd)
	read := Reader(context.Background(), dyn, mapper)

	s, err := read(widget("v1"))
	if err != nil || s == nil || s.Properties["spec"].Description != "v1 spec" {
		t.Errorf("v1: %+v, %v; want the v1 schema", s, err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		widget("v2"), // served without a schema
		widget("v9"), // not served
		{Group: "apps", Version: "v1", Kind: "Deployment"}, // built in: no CRD
	} {
		if s, err := read(gvk); s != nil || err != nil {
			t.Errorf("%v: %+v, %v; want nothing", gvk, s, err)
		}
	}
	dyn.PrependReactor("get", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := read(widget("v1")); err == nil {
		t.Error("a failed read gave no error")
	}
}
