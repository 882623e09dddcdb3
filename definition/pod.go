package definition

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/muster-io/muster/definition/jq"
)

// MatchPod says which component, instance and replica pod belongs to.
// It returns an error wrapping ErrNoComponent when none matches. The rules
// are in the package documentation ("Pods").
func (c *Compiled) MatchPod(ctx context.Context, pod *corev1.Pod) (*PodMatch, error) {
	_, _, m, err := c.matchPodMemo(ctx, pod)
	return m, err
}

// matchPodMemo matches pod, reusing the last answer when the last pod asked
// about is this pod version (same UID and resourceVersion): the pod-grouper
// asks MatchPod and then GangForPod about each pod. It returns the pod as
// the expressions read it, the component index and a match the caller may
// keep.
func (c *Compiled) matchPodMemo(ctx context.Context, pod *corev1.Pod) (*podInput, int, *PodMatch, error) {
	in := &podInput{pod: pod, needs: c.podNeeds}
	memoOK := pod.UID != "" && pod.ResourceVersion != ""
	if memoOK {
		if m := c.lastPod.Load(); m != nil && m.uid == string(pod.UID) && m.rv == pod.ResourceVersion {
			in.pm, in.built = m.pm, m.built
			match := m.match
			return in, m.ci, &match, nil
		}
	}
	ci, m, err := c.matchPod(ctx, pod, in)
	if err != nil {
		return nil, 0, nil, err
	}
	if memoOK {
		c.lastPod.Store(&podMemo{uid: string(pod.UID), rv: pod.ResourceVersion, pm: in.pm, built: in.built, ci: ci, match: *m})
	}
	return in, ci, m, nil
}

// podMemo is the last pod matched. It is never changed once stored: the
// pod in jq form is only read (gojq does not mutate its input) and callers
// get copies of the match.
type podMemo struct {
	uid, rv string
	pm      any
	built   bool
	ci      int
	match   PodMatch
}

// matchPod returns the component index and the match.
func (c *Compiled) matchPod(ctx context.Context, pod *corev1.Pod, pm *podInput) (int, *PodMatch, error) {
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
func (c *Compiled) typeHolds(ctx context.Context, comp *component, pod *corev1.Pod, pm *podInput) (ok, withValue bool, err error) {
	for k, v := range comp.matchLabels {
		if got, found := pod.Labels[k]; !found || got != v {
			return false, false, nil
		}
	}
	if comp.typeKey == nil {
		return true, false, nil
	}
	vals, err := c.evalPod(ctx, comp.typeKey, pm)
	if err != nil {
		return false, false, err
	}
	for _, x := range vals {
		if comp.typeValue != nil {
			if x != nil && jq.Render(x) == *comp.typeValue {
				return true, true, nil
			}
			continue
		}
		if jq.Truthy(x) && x != "" {
			return true, false, nil
		}
	}
	return false, comp.typeValue != nil, nil
}

// podValue is the first value of a path on the pod as text; "" when null
// or missing.
func (c *Compiled) podValue(ctx context.Context, e *expr, pm *podInput) (string, error) {
	vals, err := c.evalPod(ctx, e, pm)
	if err != nil {
		return "", err
	}
	if len(vals) == 0 || vals[0] == nil {
		return "", nil
	}
	return jq.Render(vals[0]), nil
}
