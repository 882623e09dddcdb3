package definition

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MatchPod says which component, instance and replica pod belongs to.
// It returns an error wrapping ErrNoComponent when none matches. The rules
// are in the package documentation ("Pods").
func (c *Compiled) MatchPod(ctx context.Context, pod *corev1.Pod) (*PodMatch, error) {
	pm, err := c.podToJQ(pod)
	if err != nil {
		return nil, err
	}
	_, m, err := c.matchPod(ctx, pod, pm)
	return m, err
}

// podMemo is the last pod converted, keyed by UID and resourceVersion: the
// pod-grouper asks MatchPod and GangForPod about the same pod in a row, and
// the conversion is most of the cost of either. The converted value is
// never changed (gojq does not mutate its input), so sharing it is safe.
type podMemo struct {
	key string
	pm  any
}

// podToJQ converts a pod into the form its jq paths read, once per pod
// version.
func (c *Compiled) podToJQ(pod *corev1.Pod) (any, error) {
	key := ""
	if pod.UID != "" && pod.ResourceVersion != "" {
		key = string(pod.UID) + "/" + pod.ResourceVersion
		if m := c.lastPod.Load(); m != nil && m.key == key {
			return m.pm, nil
		}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		return nil, fmt.Errorf("read pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	// The map is ours, so convert in place instead of copying.
	pm := toJQInPlace(u)
	if key != "" {
		c.lastPod.Store(&podMemo{key: key, pm: pm})
	}
	return pm, nil
}

func toJQInPlace(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = toJQInPlace(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = toJQInPlace(x)
		}
		return v
	}
	return toJQ(v)
}

// matchPod returns the component index and the match.
func (c *Compiled) matchPod(ctx context.Context, pod *corev1.Pod, pm any) (int, *PodMatch, error) {
	best := -1
	var bestScore [3]int
	for i, comp := range c.comps {
		if !comp.typeSelector {
			continue
		}
		ok, withValue, err := c.typeHolds(ctx, comp, pod, pm)
		if err != nil {
			return 0, nil, podErr(pod, comp, err)
		}
		if !ok {
			continue
		}
		// The most specific selector wins: deepest in the tree, then a
		// compared value over a key that only exists, then more labels;
		// ties go to the first in definition order.
		score := [3]int{comp.depth, 0, len(comp.matchLabels)}
		if withValue {
			score[1] = 1
		}
		if best < 0 || greater(score, bestScore) {
			best, bestScore = i, score
		}
	}
	if best < 0 && !c.typeSelectors && len(c.podComps) == 1 {
		best = c.podComps[0]
	}
	if best < 0 {
		return 0, nil, fmt.Errorf("pod %s/%s in definition %q: %w", pod.Namespace, pod.Name, c.name, ErrNoComponent)
	}
	comp := c.comps[best]
	m := &PodMatch{Component: comp.name}
	if comp.instanceSel != nil {
		id, err := c.podValue(ctx, comp.instanceSel, pm)
		if err != nil {
			return 0, nil, podErr(pod, comp, err)
		}
		m.Instance = id
	}
	for i := best; i >= 0; i = c.comps[i].parent {
		if rs := c.comps[i].replicaSel; rs != nil {
			r, err := c.podValue(ctx, rs, pm)
			if err != nil {
				return 0, nil, podErr(pod, c.comps[i], err)
			}
			m.Replica = r
			break
		}
	}
	return best, m, nil
}

func greater(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

func podErr(pod *corev1.Pod, comp *component, err error) error {
	if ee, ok := err.(*EvalError); ok && ee.Component == "" {
		ee.Component = comp.name
	}
	return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

// typeHolds evaluates a componentTypeSelector on the pod.
func (c *Compiled) typeHolds(ctx context.Context, comp *component, pod *corev1.Pod, pm any) (ok, withValue bool, err error) {
	for k, v := range comp.matchLabels {
		if got, found := pod.Labels[k]; !found || got != v {
			return false, false, nil
		}
	}
	if comp.typeKey == nil {
		return true, false, nil
	}
	vals, err := c.eval(ctx, comp.typeKey, pm)
	if err != nil {
		return false, false, err
	}
	for _, x := range vals {
		if comp.typeValue != nil {
			if x != nil && render(x) == *comp.typeValue {
				return true, true, nil
			}
			continue
		}
		if truthy(x) && x != "" {
			return true, false, nil
		}
	}
	return false, comp.typeValue != nil, nil
}

// podValue is the first value of a path on the pod as text; "" when null
// or missing.
func (c *Compiled) podValue(ctx context.Context, e *expr, pm any) (string, error) {
	vals, err := c.eval(ctx, e, pm)
	if err != nil {
		return "", err
	}
	if len(vals) == 0 || vals[0] == nil {
		return "", nil
	}
	return render(vals[0]), nil
}
