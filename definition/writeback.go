package definition

import (
	"context"
	"fmt"
	"math"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/muster-io/muster/definition/jq"
)

// ApplyTemplatePatch returns a copy of obj with p written into every pod
// template through the definition's paths: the scheduler name replaces the
// template's, labels and annotations are merged key by key (existing keys
// that p does not name stay). Every write is computed before any is made,
// on a copy, so an error leaves nothing half-written; obj is never changed.
// A field of p that a component's definition has no path for (labels with a
// podSpecPath but no metadataPath, say), or a path that is not a simple
// path, gives an error wrapping ErrNotWritable naming the component and
// field. Only components with instances in obj must be writable: one that
// obj does not have (its instanceIdPath yields nothing, or its parent is
// absent) has no templates to write, so the definition may lack paths for
// it (a multi-node component of a single-node object, say). Templates the
// object does not have (the path yields null) are skipped. Fields the
// definition does not know survive unchanged.
func (c *Compiled) ApplyTemplatePatch(ctx context.Context, obj *unstructured.Unstructured, p TemplatePatch) (*unstructured.Unstructured, error) {
	root := jq.Value(obj.Object)
	type write struct {
		path  []any
		value any
	}
	var writes []write
	present := c.presentComponents(ctx, root)
	for _, ci := range c.podComps {
		comp := c.comps[ci]
		if !present[ci] {
			continue
		}
		for k := range numWriteKinds {
			var kv [][2]string
			switch k {
			case writeSchedulerName:
				if p.SchedulerName != "" {
					kv = [][2]string{{"", p.SchedulerName}}
				}
			case writeLabels:
				kv = sortedPairs(p.Labels)
			case writeAnnotations:
				kv = sortedPairs(p.Annotations)
			}
			if len(kv) == 0 {
				continue
			}
			t := &comp.spec.writes[k]
			if t.err != nil {
				return nil, fmt.Errorf("write %s into component %q: %w", k, comp.name, t.err)
			}
			paths, err := c.eval(ctx, t.path, root)
			if err != nil {
				return nil, fmt.Errorf("write %s into component %q: %w: %w", k, comp.name, ErrNotWritable, err)
			}
			for _, x := range paths {
				base, ok := x.([]any)
				if !ok {
					return nil, fmt.Errorf("write %s into component %q: %w: %s yields %s, not a path", k, comp.name, ErrNotWritable, t.field, jq.TypeName(x))
				}
				if t.needBase {
					if v, _ := getPath(root, base); v == nil {
						continue // the object has no such template
					}
				}
				full := append(slices.Clip(base), t.suffix...)
				for _, e := range kv {
					if e[0] == "" {
						writes = append(writes, write{full, e[1]})
					} else {
						writes = append(writes, write{append(slices.Clip(full), e[0]), e[1]})
					}
				}
			}
		}
	}
	out := &unstructured.Unstructured{Object: copyJSON(obj.Object).(map[string]any)}
	for _, w := range writes {
		if err := setPath(out.Object, w.path, w.value); err != nil {
			return nil, fmt.Errorf("write %v: %w: %v", w.path, ErrNotWritable, err)
		}
	}
	return out, nil
}

// presentComponents says which components have instances in root. A
// component is absent when its parent is absent or its instanceIdPath
// yields no ids or iterates over null. An instanceIdPath that fails
// otherwise counts as present, so the
// write-back checks stay as strict as before for such objects (Extract
// reports the failure).
func (c *Compiled) presentComponents(ctx context.Context, root any) []bool {
	present := make([]bool, len(c.comps))
	for _, ci := range c.order {
		comp := c.comps[ci]
		if comp.parent >= 0 && !present[comp.parent] {
			continue
		}
		present[ci] = true
		if comp.instanceID != nil {
			if ids, err := c.instanceIDValues(ctx, comp, root); err == nil && len(ids) == 0 {
				present[ci] = false
			}
		}
	}
	return present
}

func sortedPairs(m map[string]string) [][2]string {
	out := make([][2]string, 0, len(m))
	for k, v := range m {
		out = append(out, [2]string{k, v})
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		if a[0] < b[0] {
			return -1
		}
		if a[0] > b[0] {
			return 1
		}
		return 0
	})
	return out
}

// copyJSON deep-copies maps and lists; other values are immutable scalars
// and are shared. Unlike DeepCopyJSONValue it accepts any scalar type, so an
// object built by hand (with int values) cannot make it panic.
func copyJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = copyJSON(x)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = copyJSON(x)
		}
		return a
	}
	return v
}

// pathIndex reads an array index of a jq path.
func pathIndex(k any, n int) (int, bool) {
	var i int
	switch k := k.(type) {
	case int:
		i = k
	case float64:
		if k != math.Trunc(k) {
			return 0, false
		}
		i = int(k)
	default:
		return 0, false
	}
	if i < 0 {
		i += n
	}
	return i, i >= 0 && i < n
}

func getPath(v any, path []any) (any, bool) {
	for _, k := range path {
		switch key := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			v = m[key]
		default:
			a, ok := v.([]any)
			if !ok {
				return nil, false
			}
			i, ok := pathIndex(key, len(a))
			if !ok {
				return nil, false
			}
			v = a[i]
		}
	}
	return v, true
}

// setPath sets the leaf at path in m, creating missing objects on the way.
func setPath(m map[string]any, path []any, value any) error {
	if len(path) == 0 {
		return fmt.Errorf("empty path")
	}
	var cur any = m
	for n, k := range path {
		last := n == len(path)-1
		switch key := k.(type) {
		case string:
			obj, ok := cur.(map[string]any)
			if !ok {
				return fmt.Errorf("%v is a %s, not an object", path[:n], jq.TypeName(jq.Value(cur)))
			}
			if last {
				obj[key] = value
				return nil
			}
			next, ok := obj[key]
			if !ok || next == nil {
				next = map[string]any{}
				obj[key] = next
			}
			cur = next
		case int, float64:
			arr, ok := cur.([]any)
			if !ok {
				return fmt.Errorf("%v is a %s, not a list", path[:n], jq.TypeName(jq.Value(cur)))
			}
			i, ok := pathIndex(key, len(arr))
			if !ok {
				return fmt.Errorf("index %v is out of range", key)
			}
			if last {
				arr[i] = value
				return nil
			}
			cur = arr[i]
		default:
			return fmt.Errorf("path element %v (a slice) cannot be written", k)
		}
	}
	return nil
}
