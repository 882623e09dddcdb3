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
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// PollInterval is how often WaitFor and Consistently check their condition.
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

// Consistently checks that cond holds for the whole period: it samples
// cond at once, every PollInterval, and once more when period has passed,
// and returns nil only if every sample held. Use it for "never happens"
// assertions, where a sleep followed by one look would miss whatever
// happened in between. cond reports ok while the property holds; the error
// of the first sample that does not hold names the property, when it broke
// and what that sample saw:
//
//	no member of gang ns/short bound broke after 1.26s of 3s: 2 of 12 members bound
//
// A cond error, or ctx ending before the period is over, is an error too:
// the property was not seen to hold for the whole period.
func Consistently(ctx context.Context, period time.Duration, description string, cond Condition) error {
	start := time.Now()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for samples := 1; ; samples++ {
		ok, seen, err := cond(ctx)
		elapsed := time.Since(start)
		if err != nil {
			return fmt.Errorf("checking that %s for %s: %w after %s (seen: %s)", description, period, err, elapsed.Round(time.Millisecond), orNothing(seen))
		}
		if !ok {
			return fmt.Errorf("%s broke after %s of %s: %s", description, elapsed.Round(time.Millisecond), period, orNothing(seen))
		}
		if elapsed >= period {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("checking that %s for %s: %w after %s and %d samples", description, period, ctx.Err(), elapsed.Round(time.Millisecond), samples)
		case <-tick.C:
		}
	}
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
	return cp.WaitPods(ctx, ns, selector, n, timeout, "bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
}

// WaitPodsRunning waits until exactly n pods match selector in ns and all of
// them are Running and Ready (the pod simulator does that for bound pods).
func (cp *ControlPlane) WaitPodsRunning(ctx context.Context, ns, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	return cp.WaitPods(ctx, ns, selector, n, timeout, "Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podutil.IsPodReady(p)
	})
}

// WaitPodCount waits until exactly n pods (in any state) match selector.
func (cp *ControlPlane) WaitPodCount(ctx context.Context, ns, selector string, n int, timeout time.Duration) ([]corev1.Pod, error) {
	return cp.WaitPods(ctx, ns, selector, n, timeout, "present", func(*corev1.Pod) bool { return true })
}

// WaitPodsGone waits until no pod matches selector in ns.
func (cp *ControlPlane) WaitPodsGone(ctx context.Context, ns, selector string, timeout time.Duration) error {
	_, err := cp.WaitPods(ctx, ns, selector, 0, timeout, "gone", func(*corev1.Pod) bool { return true })
	return err
}

// WaitPods waits until exactly n pods match selector in ns and good holds
// for all of them, and returns them sorted by name. what names what good
// checks, for the timeout error:
//
//	timed out after 30s waiting for 3 pods ready in namespace ns (selector ""); last seen: 3 pods, 2 ready (not yet: web-1 Pending node=- …)
func (cp *ControlPlane) WaitPods(ctx context.Context, ns, selector string, n int, timeout time.Duration, what string, good func(*corev1.Pod) bool) ([]corev1.Pod, error) {
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
// "web-1 Pending node=- [terminating] [nominated=n1] PodScheduled=False(Unschedulable: 0/2 nodes …)".
func DescribePod(p *corev1.Pod) string {
	node := p.Spec.NodeName
	if node == "" {
		node = "-"
	}
	s := fmt.Sprintf("%s %s node=%s", p.Name, p.Status.Phase, node)
	if p.DeletionTimestamp != nil {
		s += " terminating"
	}
	if n := p.Status.NominatedNodeName; n != "" {
		s += " nominated=" + n
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

// ShortTimeout and LongTimeout are the usual waits: controllers and
// schedulers here act in milliseconds, so ShortTimeout is generous; use
// LongTimeout for child processes and large benchmarks.
const (
	ShortTimeout = 30 * time.Second
	LongTimeout  = 2 * time.Minute
)
