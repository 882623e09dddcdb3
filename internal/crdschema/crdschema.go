// Package crdschema reads the OpenAPI v3 schema a cluster serves for a
// custom kind at one version, from its CustomResourceDefinition. The CLI
// and the pod-grouper give it to the catalog registry, which checks a
// definition written for another version against it before using it.
package crdschema

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// GVR is the resource of CustomResourceDefinitions.
var GVR = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// timeout bounds one read: a lookup waits on it.
const timeout = 10 * time.Second

// Reader returns a function giving the schema served for gvk: nil and no
// error when there is none to give (a built-in kind without a CRD, a
// version not served or without a schema, no permission to read CRDs),
// an error only when the read itself failed.
func Reader(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper) func(schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) {
	return func(gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, nil
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		u, err := dyn.Resource(GVR).Get(ctx, m.Resource.Resource+"."+gvk.Group, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", u.GetName(), err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == gvk.Version && v.Schema != nil {
				return v.Schema.OpenAPIV3Schema, nil
			}
		}
		return nil, nil
	}
}
