package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/muster-io/muster/localcluster"
)

// waitFor is localcluster.WaitFor that fails t on a timeout or an error.
func waitFor(t testing.TB, timeout time.Duration, what string, cond localcluster.Condition) {
	t.Helper()
	if err := localcluster.WaitFor(context.Background(), timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// holdsFor is localcluster.Consistently that fails t at the first sample
// where cond does not hold, or on an error: for "never happens while …"
// assertions, which a sleep and one look cannot make.
func holdsFor(t testing.TB, period time.Duration, what string, cond localcluster.Condition) {
	t.Helper()
	if err := localcluster.Consistently(context.Background(), period, what, cond); err != nil {
		t.Fatal(err)
	}
}

// getter is what typed clients share: Deployments(ns), Pods(ns), ….
type getter[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// objectIs is a Condition that gets name with c at every sample and asks
// check whether it is as wanted and what it saw; a failed Get ends the wait.
func objectIs[T any](c getter[T], name string, check func(T) (bool, string)) localcluster.Condition {
	return func(ctx context.Context) (bool, string, error) {
		obj, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ok, seen := check(obj)
		return ok, seen, nil
	}
}

// objectGone is a Condition that holds once c finds no object name; any
// other Get error ends the wait.
func objectGone[T any](c getter[T], name string) localcluster.Condition {
	return func(ctx context.Context) (bool, string, error) {
		_, err := c.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	}
}

// dynamicGetter makes a dynamic client a getter (its Get also takes
// subresources).
func dynamicGetter(ri dynamic.ResourceInterface) getter[*unstructured.Unstructured] {
	return dynGet{ri}
}

type dynGet struct{ ri dynamic.ResourceInterface }

func (d dynGet) Get(ctx context.Context, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	return d.ri.Get(ctx, name, opts)
}

// gangsBound is a Condition on the bound and live members per gang label
// in ns (boundByGang); a failed List ends the wait.
func gangsBound(ns string, ok func(bound, total map[string]int) bool) localcluster.Condition {
	return func(ctx context.Context) (bool, string, error) {
		bound, total, err := boundByGang(ctx, ns)
		if err != nil {
			return false, "", err
		}
		return ok(bound, total), fmt.Sprintf("bound per gang %v of %v", bound, total), nil
	}
}

// noneBound checks that no member of gang in ns is bound for period: the
// scheduler retries it (backoff 1 s) meanwhile, and none of those tries may
// bind a member.
func noneBound(t testing.TB, ns, gang string, period time.Duration) {
	t.Helper()
	holdsFor(t, period, fmt.Sprintf("no member of gang %s/%s bound", ns, gang), gangsBound(ns, func(bound, _ map[string]int) bool {
		return bound[gang] == 0
	}))
}

// gangTest gives a gang test its namespace, a muster scheduler of its own
// (named muster-<ns>, the shipped profile with args) and a pool of n nodes
// with gpus GPUs each.
func gangTest(t testing.TB, prefix string, nodes, gpus int, args map[string]any) (ns, sched string) {
	t.Helper()
	ns = testNamespace(t, prefix)
	sched = "muster-" + ns
	startGangScheduler(t, sched, args)
	gpuPool(t, ns, nodes, gpus)
	return ns, sched
}

// waitRunning waits up to ShortTimeout until exactly n pods match selector
// in ns, all Running and Ready, and returns them; it fails t otherwise.
func waitRunning(t testing.TB, ns, selector string, n int) []corev1.Pod {
	t.Helper()
	pods, err := controlPlane.WaitPodsRunning(context.Background(), ns, selector, n, localcluster.ShortTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// waitGone waits up to ShortTimeout until no pod matches selector in ns.
func waitGone(t testing.TB, ns, selector string) {
	t.Helper()
	if err := controlPlane.WaitPodsGone(context.Background(), ns, selector, localcluster.ShortTimeout); err != nil {
		t.Fatal(err)
	}
}

// applyYAML applies the YAML documents in ns and fails t on an error.
func applyYAML(t testing.TB, ns, doc string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := controlPlane.Apply(context.Background(), []byte(doc), ns)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// podGroupNames lists the scheduler-plugins PodGroups of ns, sorted.
func podGroupNames(t testing.TB, ns string) []string {
	t.Helper()
	l, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pg := range l.Items {
		names = append(names, pg.Name)
	}
	sort.Strings(names)
	return names
}

// waitEvent waits for an event of reason in ns whose note holds every
// string of want, about kind/name (either may be empty: any). It fails t
// on an error, and reports a timeout with t.Error: the test goes on.
func waitEvent(t testing.TB, ns, kind, name, reason string, want []string) {
	t.Helper()
	what := fmt.Sprintf("%s event in %s", reason, ns)
	if kind != "" || name != "" {
		what += fmt.Sprintf(" on %s %s", kind, name)
	}
	err := localcluster.WaitFor(context.Background(), gangTimeout, what, func(ctx context.Context) (bool, string, error) {
		evs, err := controlPlane.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason != reason || kind != "" && e.Regarding.Kind != kind || name != "" && e.Regarding.Name != name {
				continue
			}
			seen = append(seen, e.Note)
			if containsAll(e.Note, want) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events, of them %s: %s", len(evs.Items), reason, strings.Join(seen, " | ")), nil
	})
	if err != nil {
		t.Error(err)
	}
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// podCondition returns the condition of type ct of pod ns/name, if it has
// one.
func podCondition(ctx context.Context, ns, name string, ct corev1.PodConditionType) (corev1.PodCondition, bool, error) {
	p, err := controlPlane.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return corev1.PodCondition{}, false, err
	}
	for _, c := range p.Status.Conditions {
		if c.Type == ct {
			return c, true, nil
		}
	}
	return corev1.PodCondition{}, false, nil
}
