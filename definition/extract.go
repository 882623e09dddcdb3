package definition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/muster-io/muster/definition/jq"
)

// view is what the definition finds in one root object, in the internal
// form the gang and write-back code work on.
type view struct {
	comps []viewComp // index-aligned with Compiled.comps
}

type viewComp struct {
	ids []string
	// parent is the parent component's instance index of each instance; -1
	// for the root.
	parent        []int
	replicas      []int32
	min, max      []*int32
	pods, minPods []int64
	tpl           []*corev1.PodTemplateSpec // nil without pods
	req           []corev1.ResourceList     // PodRequests of tpl, filled by the gang code
}

// instance finds an instance by id: the one with that id, or the only one.
func (vc *viewComp) instance(id string) (int, bool) {
	for i, x := range vc.ids {
		if x == id {
			return i, true
		}
	}
	if len(vc.ids) == 1 {
		return 0, true
	}
	return 0, false
}

// Extract reads components, instances, templates and replicas from obj.
// See the package documentation ("Instances and counts") for how counts
// are read: totals, as Workload Map reads them, and absent components.
func (c *Compiled) Extract(ctx context.Context, obj *unstructured.Unstructured) (*Workload, error) {
	v, err := c.extract(ctx, jq.Value(obj.Object))
	if err != nil {
		return nil, err
	}
	w := &Workload{Components: make([]Component, len(c.comps))}
	for i, comp := range c.comps {
		vc := &v.comps[i]
		out := Component{Name: comp.name, HasPods: comp.hasPods}
		if comp.parent >= 0 {
			out.Parent = c.comps[comp.parent].name
		}
		if comp.kind != nil {
			k := *comp.kind
			out.Kind = &k
		}
		for j, id := range vc.ids {
			in := Instance{ID: id, Replicas: vc.replicas[j], MinReplicas: vc.min[j], MaxReplicas: vc.max[j], Pods: vc.pods[j], MinPods: vc.minPods[j]}
			if comp.hasPods {
				in.Template = vc.tpl[j]
			}
			out.Instances = append(out.Instances, in)
		}
		w.Components[i] = out
	}
	return w, nil
}

// extract evaluates the component paths on root (already in jq.Value form).
func (c *Compiled) extract(ctx context.Context, root any) (*view, error) {
	v := &view{comps: make([]viewComp, len(c.comps))}
	for _, ci := range c.order {
		if err := c.extractComponent(ctx, root, v, ci); err != nil {
			return nil, err
		}
	}
	c.sumGroupings(v)
	return v, nil
}

// extractComponent fills v's entry of component ci, whose parent's entry
// is filled already: instances, their parents, counts, pods and templates.
func (c *Compiled) extractComponent(ctx context.Context, root any, v *view, ci int) error {
	comp := c.comps[ci]
	vc := &v.comps[ci]
	if err := c.instanceIDs(ctx, comp, root, vc); err != nil {
		return err
	}
	if err := c.parentInstances(comp, v, vc); err != nil {
		return err
	}
	n := len(vc.ids)
	countSet, err := c.replicaCounts(ctx, comp, root, vc)
	if err != nil {
		return err
	}

	// Pods: a count is the component's own total in the whole workload, as
	// Workload Map reads it; it is not multiplied by the parent's.
	vc.pods = make([]int64, n)
	vc.minPods = make([]int64, n)
	for j := range n {
		vc.pods[j] = int64(vc.replicas[j])
		vc.minPods[j] = minReplicas(vc, j)
	}

	if !comp.hasPods {
		return nil
	}
	return c.podTemplates(ctx, comp, root, vc, countSet)
}

// componentErr is err, from e on comp (and instance, when about one), as
// an *EvalError naming the component.
func (c *Compiled) componentErr(comp *component, e *expr, instance string, err error) error {
	var ee *EvalError
	if errors.As(err, &ee) {
		ee.Component, ee.Instance = comp.name, instance
		return ee
	}
	ee = c.evalErr(e, err)
	ee.Component, ee.Instance = comp.name, instance
	return ee
}

// instanceIDs reads the instances of comp: one per value of its
// instanceIdPath (none when it iterates over a list the object does not
// have), or the only one, with ID "".
func (c *Compiled) instanceIDs(ctx context.Context, comp *component, root any, vc *viewComp) error {
	vc.ids = []string{""}
	if comp.instanceID == nil {
		return nil
	}
	vals, err := c.instanceIDValues(ctx, comp, root)
	if err != nil {
		return c.componentErr(comp, comp.instanceID, "", err)
	}
	vc.ids = make([]string, 0, len(vals))
	seen := make(map[string]bool, len(vals))
	for _, x := range vals {
		id, err := scalarString(x)
		if err != nil {
			return c.componentErr(comp, comp.instanceID, "", fmt.Errorf("instance ids must be non-empty strings or numbers: %w", err))
		}
		if seen[id] {
			return c.componentErr(comp, comp.instanceID, id, errors.New("instance id appears twice"))
		}
		seen[id] = true
		vc.ids = append(vc.ids, id)
	}
	return nil
}

// instanceIDValues runs comp's instanceIdPath. One that iterates over
// null (.spec.groups[].name on an object without groups) yields nothing:
// the component is absent, as in Workload Map, not an error of the
// workload. Extract and the write-back checks read presence through it.
func (c *Compiled) instanceIDValues(ctx context.Context, comp *component, root any) ([]any, error) {
	vals, err := c.eval(ctx, comp.instanceID, root)
	if errors.Is(err, jq.ErrIteratedNull) {
		return nil, nil
	}
	return vals, err
}

// parentInstances finds each instance's parent instance: the one with the
// same id, else the only one. A component whose parent is absent is absent
// too.
func (c *Compiled) parentInstances(comp *component, v *view, vc *viewComp) error {
	vc.parent = make([]int, len(vc.ids))
	if comp.parent < 0 {
		for j := range vc.parent {
			vc.parent[j] = -1
		}
		return nil
	}
	pv := &v.comps[comp.parent]
	if len(pv.ids) == 0 {
		// The parent is absent from this object, and so is its subtree.
		vc.ids, vc.parent = nil, nil
	}
	for j, id := range vc.ids {
		p, ok := pv.instance(id)
		if !ok {
			return &EvalError{Field: comp.fp.Child("ownerRef").String(), Expression: c.comps[comp.parent].name, Component: comp.name, Instance: id,
				Err: fmt.Errorf("parent component %q has %d instances and none has id %q; a child instance belongs to the parent instance with its id, or to the parent's only instance", c.comps[comp.parent].name, len(pv.ids), id)}
		}
		vc.parent[j] = p
	}
	return nil
}

// replicaCounts reads the replicas (1 without a path), minReplicas and
// maxReplicas of each instance. countSet tells the instances whose
// replicasPath found a count.
func (c *Compiled) replicaCounts(ctx context.Context, comp *component, root any, vc *viewComp) (countSet []bool, err error) {
	n := len(vc.ids)
	vc.replicas = make([]int32, n)
	countSet = make([]bool, n)
	vc.min = make([]*int32, n)
	vc.max = make([]*int32, n)
	for j := range vc.replicas {
		vc.replicas[j] = 1
	}
	for _, e := range []*expr{comp.replicas, comp.minReplicas, comp.maxReplicas} {
		if e == nil {
			continue
		}
		vals, err := c.perInstance(ctx, e, root, n)
		if err != nil {
			return nil, c.componentErr(comp, e, "", err)
		}
		for j, x := range vals {
			k, ok, err := toCount(x)
			if err != nil && e == comp.maxReplicas && isUnbounded(x) {
				// An upper bound beyond the ceiling is no bound at all:
				// operators default maxReplicas to the largest int32 for
				// "unlimited" (KubeRay does). It creates no pod and sizes
				// no gang, so it is not an error; minReplicas and replicas,
				// which do, stay held to the ceiling.
				continue
			}
			if err != nil {
				return nil, c.componentErr(comp, e, vc.ids[j], err)
			}
			if !ok {
				continue
			}
			switch e {
			case comp.replicas:
				vc.replicas[j], countSet[j] = k, true
			case comp.minReplicas:
				vc.min[j] = &k
			default:
				vc.max[j] = &k
			}
		}
	}
	return countSet, nil
}

// podTemplates reads the pod template of each instance of comp and drops
// the instances without one: the template path yields null or nothing, or
// no fragment path nor the count finds anything.
func (c *Compiled) podTemplates(ctx context.Context, comp *component, root any, vc *viewComp, countSet []bool) error {
	n := len(vc.ids)
	tpls, err := c.templates(ctx, comp, root, n)
	if err != nil {
		var ee *EvalError
		if errors.As(err, &ee) && ee.Component == "" {
			ee.Component = comp.name
		}
		return err
	}
	keep := make([]bool, n)
	for j, m := range tpls {
		defaultsOnly := comp.spec.frag != nil && m != nil && m["absent"] == true
		if defaultsOnly {
			delete(m, "absent") // our own map, built by fragmented
		}
		if m == nil || (defaultsOnly && !countSet[j]) {
			// The template path yields null or nothing, or no fragment
			// path nor the count finds anything: the component is
			// optional and this object does not have it.
			continue
		}
		keep[j] = true
		t := &corev1.PodTemplateSpec{}
		// Unknown fields are allowed: a template written for a newer
		// Kubernetes must not break grouping; wrong types are errors.
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(m, t, false); err != nil {
			return &EvalError{Field: comp.fp.Child("specDefinition").String(), Expression: specSource(comp), Component: comp.name, Instance: vc.ids[j],
				Err: fmt.Errorf("not a valid pod template: %w", err)}
		}
		vc.tpl = append(vc.tpl, t)
	}
	vc.dropAbsent(keep)
	return nil
}

// dropAbsent keeps the instances marked in keep (tpl holds the kept ones
// already).
func (vc *viewComp) dropAbsent(keep []bool) {
	k := 0
	for j, ok := range keep {
		if !ok {
			continue
		}
		vc.ids[k], vc.parent[k], vc.replicas[k], vc.min[k], vc.max[k], vc.pods[k], vc.minPods[k] =
			vc.ids[j], vc.parent[j], vc.replicas[j], vc.min[j], vc.max[j], vc.pods[j], vc.minPods[j]
		k++
	}
	vc.ids, vc.parent, vc.replicas, vc.min, vc.max, vc.pods, vc.minPods =
		vc.ids[:k], vc.parent[:k], vc.replicas[:k], vc.min[:k], vc.max[:k], vc.pods[:k], vc.minPods[:k]
}

// sumGroupings sets the pods of each component without pods of its own to
// the sum of its children's, per instance, as Workload Map's CLI shows a
// grouping component. Its own replicas stay as read: for a gang scope they
// count gang instances.
func (c *Compiled) sumGroupings(v *view) {
	for k := len(c.order) - 1; k >= 0; k-- {
		ci := c.order[k]
		comp := c.comps[ci]
		if comp.hasPods || len(comp.children) == 0 {
			continue
		}
		vc := &v.comps[ci]
		for j := range vc.pods {
			vc.pods[j], vc.minPods[j] = 0, 0
		}
		for _, ch := range comp.children {
			cv := &v.comps[ch]
			for j, p := range cv.parent {
				vc.pods[p] += cv.pods[j]
				vc.minPods[p] += cv.minPods[j]
			}
		}
	}
}

func specSource(comp *component) string {
	s := &comp.spec
	switch {
	case s.podTemplateSpec != nil:
		return s.podTemplateSpec.src
	case s.podSpec != nil:
		return s.podSpec.src
	}
	return "fragmentedPodSpecDefinition"
}

// perInstance evaluates e and spreads its values over n instances: n values
// are index-aligned with the instances, one value applies to all, none
// leaves every instance without a value (null).
func (c *Compiled) perInstance(ctx context.Context, e *expr, root any, n int) ([]any, error) {
	if n == 0 {
		return nil, nil
	}
	vals, err := c.eval(ctx, e, root)
	if err != nil {
		return nil, err
	}
	switch len(vals) {
	case n:
		return vals, nil
	case 0, 1:
		var x any
		if len(vals) == 1 {
			x = vals[0]
		}
		out := make([]any, n)
		for j := range out {
			out[j] = x
		}
		return out, nil
	}
	return nil, c.evalErr(e, fmt.Errorf("yields %d values for %d instances; a path yields one value per instance (index-aligned with instanceIdPath) or one for all", len(vals), n))
}

// templates returns the pod template of each of n instances as an
// unstructured map, in jq.Value form.
func (c *Compiled) templates(ctx context.Context, comp *component, root any, n int) ([]map[string]any, error) {
	s := &comp.spec
	out := make([]map[string]any, n)
	object := func(e *expr, j int, x any, nullOK bool) (map[string]any, error) {
		switch x := x.(type) {
		case map[string]any:
			return x, nil
		case nil:
			if nullOK {
				return nil, nil
			}
			return nil, c.evalErr(e, errors.New("yields null: the pod template is not there; check the path against an object of this kind"))
		}
		return nil, c.evalErr(e, fmt.Errorf("yields a %s, want an object", jq.TypeName(x)))
	}
	switch {
	case s.podTemplateSpec != nil:
		vals, err := c.perInstance(ctx, s.podTemplateSpec, root, n)
		if err != nil {
			return nil, err
		}
		for j, x := range vals {
			if out[j], err = object(s.podTemplateSpec, j, x, true); err != nil {
				return nil, err
			}
		}
	case s.podSpec != nil:
		specs, err := c.perInstance(ctx, s.podSpec, root, n)
		if err != nil {
			return nil, err
		}
		mds := make([]any, n)
		if s.metadata != nil {
			if mds, err = c.perInstance(ctx, s.metadata, root, n); err != nil {
				return nil, err
			}
		}
		for j := range n {
			spec, err := object(s.podSpec, j, specs[j], true)
			if err != nil {
				return nil, err
			}
			if spec == nil {
				continue
			}
			t := map[string]any{"spec": spec}
			md, err := object(s.metadata, j, mds[j], true)
			if err != nil {
				return nil, err
			}
			if md != nil {
				t["metadata"] = md
			}
			out[j] = t
		}
	case s.frag != nil:
		return c.fragmented(ctx, s.frag, root, n)
	}
	return out, nil
}

// scalarString renders an instance id, group key or selector value: a
// non-empty string, number or boolean.
func scalarString(x any) (string, error) {
	switch x.(type) {
	case nil:
		return "", errors.New("got null")
	case string, int, float64, *big.Int, bool:
		s := jq.Render(x)
		if s == "" {
			return "", errors.New("got an empty string")
		}
		return s, nil
	}
	return "", fmt.Errorf("got a %s", jq.TypeName(x))
}

// isUnbounded reports whether x is a whole number above MaxCount that
// fits an int32: what an API's "no limit" default of an upper bound is.
func isUnbounded(x any) bool {
	if num, ok := x.(json.Number); ok {
		x = num.String()
	}
	var f float64
	switch x := x.(type) {
	case int:
		f = float64(x)
	case float64:
		f = x
	case string:
		v, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return false
		}
		f = v
	default:
		return false
	}
	return f == math.Trunc(f) && f > MaxCount && f <= math.MaxInt32
}

// toCount reads a replica count: an integer, a whole float or a numeric
// string; null is "not set". A count above MaxCount is an error: no real
// workload has it, and a PodGroup of 200 million members would hold a gang
// back forever instead of saying what is wrong.
func toCount(x any) (int32, bool, error) {
	var n int64
	if num, ok := x.(json.Number); ok {
		// What fromjson and tonumber of a big literal yield: a number all
		// the same.
		x = num.String()
	}
	switch x := x.(type) {
	case nil:
		return 0, false, nil
	case int:
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return 0, false, fmt.Errorf("replica count %v is not a whole number", x)
		}
		if x > math.MaxInt32 || x < math.MinInt32 {
			return 0, false, fmt.Errorf("replica count %v is too large", x)
		}
		n = int64(x)
	case *big.Int:
		return 0, false, fmt.Errorf("replica count %v is too large", x)
	case string:
		s := strings.TrimSpace(x)
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
				return 0, false, fmt.Errorf("replica count %q is not a whole number", x)
			}
			i = int64(f)
		}
		n = i
	default:
		return 0, false, fmt.Errorf("replica count is a %s, want a number", jq.TypeName(x))
	}
	if n < 0 {
		return 0, false, fmt.Errorf("replica count %d is negative", n)
	}
	if n > MaxCount {
		return 0, false, fmt.Errorf("replica count %d is above the ceiling of %d", n, MaxCount)
	}
	return int32(n), true, nil
}
