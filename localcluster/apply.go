package localcluster

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Apply creates every object in a multi-document YAML stream, of any kind
// the apiserver serves (built-in or custom), through the dynamic client.
// Namespaced objects without a namespace go to namespace. It returns the
// created objects in order. Objects that already exist are an error: tests
// create, they do not reconcile.
func (cp *ControlPlane) Apply(ctx context.Context, yamlDocs []byte, namespace string) ([]*unstructured.Unstructured, error) {
	docs, err := SplitYAML(yamlDocs)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := json.Unmarshal(doc, &obj.Object); err != nil {
			return out, fmt.Errorf("document %d: %w", i+1, err)
		}
		created, err := cp.Create(ctx, obj, namespace)
		if err != nil {
			return out, fmt.Errorf("document %d: %w", i+1, err)
		}
		out = append(out, created)
	}
	return out, nil
}

// Create creates one object of any served kind. Namespaced objects without a
// namespace go to namespace.
func (cp *ControlPlane) Create(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
	ri, err := cp.ResourceFor(obj, namespace)
	if err != nil {
		return nil, err
	}
	created, err := ri.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return created, nil
}

// ResourceFor returns the dynamic client for obj's kind, scoped to obj's
// namespace (set to namespace when empty and the kind is namespaced).
func (cp *ControlPlane) ResourceFor(obj *unstructured.Unstructured, namespace string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("object %q: apiVersion and kind are required", obj.GetName())
	}
	m, err := cp.RESTMapping(gvk)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return cp.Dynamic.Resource(m.Resource), nil
	}
	if obj.GetNamespace() == "" {
		if namespace == "" {
			return nil, fmt.Errorf("%s %s is namespaced and no namespace was given", gvk.Kind, obj.GetName())
		}
		obj.SetNamespace(namespace)
	}
	return cp.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
}

// RESTMapping maps a kind to its resource. An unknown kind resets the
// discovery cache once and tries again, so kinds of CRDs installed a moment
// ago are found.
func (cp *ControlPlane) RESTMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := cp.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		cp.mapper.Reset()
		m, err = cp.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("kind %s: %w", gvk, err)
	}
	return m, nil
}

// NewNamespace creates a namespace named <prefix><random suffix> for one
// test's objects and returns its name.
func (cp *ControlPlane) NewNamespace(ctx context.Context, prefix string) (string, error) {
	ns, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace %s*: %w", prefix, err)
	}
	return ns.Name, nil
}

// DeleteNamespace deletes ns without waiting. No namespace controller runs
// here, so the namespace stays Terminating with its objects; tests that need
// objects gone delete them and wait (WaitPodsGone).
func (cp *ControlPlane) DeleteNamespace(ctx context.Context, ns string) error {
	err := cp.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	return nil
}

// ForceDeletePods deletes every pod matching selector in ns with grace 0.
// A collection of tens of thousands of pods can outlast the API server's
// request timeout on a busy machine; what was deleted stays deleted, so
// the call is repeated (at most 5 times) on the rest.
func (cp *ControlPlane) ForceDeletePods(ctx context.Context, ns, selector string) error {
	var err error
	for range 5 {
		err = cp.Client.CoreV1().Pods(ns).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{LabelSelector: selector})
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("force-delete pods %q in %s: %w", selector, ns, err)
	}
	return nil
}
