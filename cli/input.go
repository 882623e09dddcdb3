package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// decodeObjects splits a multi-document YAML or JSON stream into objects,
// naming the file and document on error. Every object must say what it is
// (apiVersion, kind) and which one (metadata.name): the workload and its
// pods are matched by those.
func decodeObjects(name string, data []byte, allowEmpty bool) ([]*unstructured.Unstructured, error) {
	if name == "-" {
		name = "standard input"
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, usageErrorf("%s: %s", name, strings.Replace(err.Error(), "error converting YAML to JSON: ", "", 1))
	}
	var out []*unstructured.Unstructured
	for i, doc := range docs {
		where := fmt.Sprintf("%s: document %d", name, i+1)
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			var v any
			if json.Unmarshal(doc, &v) == nil {
				return nil, usageErrorf("%s is %s, want a Kubernetes object (apiVersion, kind, metadata.name)", where, describeJSONValue(v))
			}
			return nil, usageErrorf("%s: %v", where, err)
		}
		obj := &unstructured.Unstructured{Object: m}
		if it, has := m["items"]; has && strings.HasSuffix(obj.GetKind(), "List") {
			items, ok := it.([]any)
			if !ok {
				return nil, usageErrorf("%s: a %s whose items is not a list", where, obj.GetKind())
			}
			for j, it := range items {
				im, ok := it.(map[string]any)
				if !ok {
					return nil, usageErrorf("%s: items[%d] is %s, want a Kubernetes object", where, j, describeJSONValue(it))
				}
				item := &unstructured.Unstructured{Object: im}
				if err := checkObject(item); err != nil {
					return nil, usageErrorf("%s: items[%d]: %v", where, j, err)
				}
				out = append(out, item)
			}
			continue
		}
		if err := checkObject(obj); err != nil {
			return nil, usageErrorf("%s: %v", where, err)
		}
		out = append(out, obj)
	}
	if len(out) == 0 && !allowEmpty {
		return nil, usageErrorf("%s: no objects in the file", name)
	}
	return out, nil
}

// checkObject says what identifying field an object lacks.
func checkObject(obj *unstructured.Unstructured) error {
	var missing []string
	if obj.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if obj.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) == 0 {
		return nil
	}
	what := "the object"
	if k := obj.GetKind(); k != "" {
		what = "the " + k
	}
	return fmt.Errorf("%s has no %s", what, strings.Join(missing, ", no "))
}

// describeJSONValue names a JSON value's type for a person.
func describeJSONValue(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "not an object"
}

func toPod(obj *unstructured.Unstructured) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	dec := jsonStrictDecoder(bytes.NewReader(data))
	if err := dec.Decode(p); err != nil {
		return nil, usageErrorf("pod %s: %v", obj.GetName(), err)
	}
	return p, nil
}
