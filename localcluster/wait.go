package localcluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often WaitFor checks its condition.
const PollInterval = 20 * time.Millisecond

// Condition reports whether what WaitFor waits for has happened, and a short
// description of what it saw, used in the error when time runs out. A
// non-nil error stops the wait at once.
type Condition func(ctx context.Context) (ok bool, seen string, err error)

// WaitFor polls cond until it reports ok, returns an error, or timeout
// passes. The timeout error names what was expected and what was seen last:
//
//	timed out after 10s waiting for 3 pods of app=web bound; last seen: 2 bound (web-1 Pending unbound)
func WaitFor(ctx context.Context, timeout time.Duration, description string, cond Condition) error {
	var lastSeen string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, seen, err := cond(ctx)
		if seen != "" {
			lastSeen = seen
		}
		if err != nil {
			lastErr = err
			return false, err
		}
		return ok, nil
	})
	if err == nil {
		return nil
	}
	if lastErr != nil {
		return fmt.Errorf("waiting for %s: %w (last seen: %s)", description, lastErr, orNothing(lastSeen))
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", timeout, description, orNothing(lastSeen))
	}
	return fmt.Errorf("waiting for %s: %w; last seen: %s", description, err, orNothing(lastSeen))
}

func orNothing(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// WaitPodsBound waits until exactly n pods match selector in ns and all of
// them have a node, and returns them sorted by name.
func (cp *ControlPlane) WaitPodsBound(ctx context.Context, ns, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	return cp.waitPods(ctx, ns, selector, n, timeout, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
}

// WaitPodsRunning waits until exactly n pods match selector in ns and all of
// them are Running and Ready (the pod simulator does that for bound pods).
func (cp *ControlPlane) WaitPodsRunning(ctx context.Context, ns, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	return cp.waitPods(ctx, ns, selector, n, timeout, "Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podReady(p)
	})
}

// WaitPodCount waits until exactly n pods (in any state) match selector.
func (cp *ControlPlane) WaitPodCount(ctx context.Context, ns, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	return cp.waitPods(ctx, ns, selector, n, timeout, "present", func(*corev1.Pod) bool { return true })
}

// WaitPodsGone waits until no pod matches selector in ns.
func (cp *ControlPlane) WaitPodsGone(ctx context.Context, ns, selector string, timeout time.Duration) error {
	_, err := cp.waitPods(ctx, ns, selector, 0, timeout, "gone", func(*corev1.Pod) bool { return true })
	return err
}

func (cp *ControlPlane) waitPods(ctx context.Context, ns, selector string, n int, timeout time.Duration, what string, good func(*corev1.Pod) bool) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	desc := fmt.Sprintf("%d pods %s in namespace %s (selector %q)", n, what, ns, selector)
	if n == 0 {
		desc = fmt.Sprintf("pods in namespace %s (selector %q) gone", ns, selector)
	}
	err := WaitFor(ctx, timeout, desc, func(ctx context.Context) (bool, string, error) {
		list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", err
		}
		pods = list.Items
		sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
		okCount := 0
		var bad []string
		for i := range pods {
			if good(&pods[i]) {
				okCount++
			} else {
				bad = append(bad, DescribePod(&pods[i]))
			}
		}
		seen := fmt.Sprintf("%d pods, %d %s", len(pods), okCount, what)
		if len(bad) > 0 {
			if len(bad) > 5 {
				bad = append(bad[:5], fmt.Sprintf("… %d more", len(bad)-5))
			}
			seen += " (not yet: " + strings.Join(bad, "; ") + ")"
		}
		return len(pods) == n && okCount == n, seen, nil
	})
	return pods, err
}

// DescribePod is a one-line summary of a pod for failure messages:
// "web-1 Pending node=- PodScheduled=False(Unschedulable: 0/2 nodes …)".
func DescribePod(p *corev1.Pod) string {
	node := p.Spec.NodeName
	if node == "" {
		node = "-"
	}
	s := fmt.Sprintf("%s %s node=%s", p.Name, p.Status.Phase, node)
	if p.DeletionTimestamp != nil {
		s += " terminating"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			msg := c.Message
			if len(msg) > 120 {
				msg = msg[:120] + "…"
			}
			s += fmt.Sprintf(" PodScheduled=%s(%s: %s)", c.Status, c.Reason, msg)
		}
	}
	return s
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ShortTimeout and LongTimeout are the usual waits: controllers and
// schedulers here act in milliseconds, so ShortTimeout is generous; use
// LongTimeout for child processes and large benchmarks.
const (
	ShortTimeout = 30 * time.Second
	LongTimeout  = 2 * time.Minute
)
