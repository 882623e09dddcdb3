package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// victimRecorder keeps the last state of every pod deleted in ns: a
// preempted pod carries the DisruptionTarget condition when it goes.
type victimRecorder struct {
	mu   sync.Mutex
	gone map[types.UID]*corev1.Pod
}

func recordDeletions(t testing.TB, ns string) *victimRecorder {
	t.Helper()
	r := &victimRecorder{gone: map[types.UID]*corev1.Pod{}}
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactoryWithOptions(controlPlane.Client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	note := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			r.mu.Lock()
			r.gone[p.UID] = p
			r.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		// The last update before the delete carries the condition too.
		UpdateFunc: func(_, obj any) {
			if p := obj.(*corev1.Pod); p.DeletionTimestamp != nil {
				note(p)
			}
		},
		DeleteFunc: note,
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	return r
}

// disruption returns the DisruptionTarget condition of a deleted pod.
func (r *victimRecorder) disruption(uid types.UID) (corev1.PodCondition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.gone[uid]
	if !ok {
		return corev1.PodCondition{}, false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

// preemptionWatcher samples the gangs' bound pods every 100 ms. A gang seen
// partly bound must be one of:
//   - binding: its bound members were let go together by one barrier
//     release of at least minMember (barrierLog), and it is whole within
//     settleWindow;
//   - being evicted whole: every bound member was in the set seen whole
//     before, and none is left bound within settleWindow.
//
// A gang whose members go partly (some evicted, the rest kept below the
// quorum) is a failure, as is one left partly bound at the end.
type preemptionWatcher struct {
	ns string
	// label names the pod label that says which gang a pod is in.
	label string
	mins  map[string]int

	mu        sync.Mutex
	whole     map[string][]types.UID // last set seen bound whole
	since     map[string]time.Time   // start of the current partial episode
	evicting  map[string]bool        // the current episode is an eviction
	failures  []string
	samples   int
	evictions int
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
}

// preDump logs every pod and event of ns when t failed: what a person
// would look at first.
func preDump(t testing.TB, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("dump: %v", err)
			return
		}
		for _, p := range pods.Items {
			msg := ""
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					msg = c.Message
				}
			}
			t.Logf("dump: pod %s node=%q deleting=%v nnn=%q prio=%v: %s", p.Name, p.Spec.NodeName, p.DeletionTimestamp != nil, p.Status.NominatedNodeName, ptr.Deref(p.Spec.Priority, 0), msg)
		}
		evs, err := controlPlane.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("dump: %v", err)
			return
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "PodGroup" {
				t.Logf("dump: event %s %s/%s: %s", e.EventTime.Format("15:04:05.000"), e.Regarding.Name, e.Reason, e.Note)
			}
		}
	})
}

func watchPreemption(t testing.TB, ns string, mins map[string]int) *preemptionWatcher {
	return watchPreemptionBy(t, ns, "gang", mins)
}

// watchPreemptionBy is watchPreemption with gangs told apart by label.
func watchPreemptionBy(t testing.TB, ns, label string, mins map[string]int) *preemptionWatcher {
	preDump(t, ns)
	w := &preemptionWatcher{ns: ns, label: label, mins: mins, whole: map[string][]types.UID{}, since: map[string]time.Time{},
		evicting: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go sampleEvery(w.stop, w.done, w.sample)
	t.Cleanup(func() { w.check(t) })
	return w
}

// seenWhole waits until the sampler has seen each gang whole. A test that
// preempts a gang right after it was bound must wait for this: otherwise the
// sampler may see it only mid-bind and then evicted, which it cannot tell
// from a partial gang released without an eviction.
func (w *preemptionWatcher) seenWhole(t testing.TB, gangs ...string) {
	t.Helper()
	waitFor(t, gangTimeout, "the sampler to see the gangs whole", func(context.Context) (bool, string, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range gangs {
			if _, partial := w.since[g]; partial || len(w.whole[g]) == 0 {
				return false, g + " not seen whole yet", nil
			}
		}
		return true, "", nil
	})
}

// expect adds a gang to watch (a PodGroup the pod-grouper named).
func (w *preemptionWatcher) expect(gang string, min int) {
	w.mu.Lock()
	w.mins[gang] = min
	w.mu.Unlock()
}

func (w *preemptionWatcher) fail(format string, args ...any) {
	w.failures = append(w.failures, fmt.Sprintf(format, args...))
}

func (w *preemptionWatcher) sample() {
	bound, err := boundPods(context.Background(), w.ns, w.label)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.fail("sampling: %v", err)
		return
	}
	w.samples++
	now := time.Now()
	for g, min := range w.mins {
		uids := bound[g]
		n := len(uids)
		since, partial := w.since[g]
		if n == 0 || n >= min {
			if partial && n == 0 && !w.evicting[g] {
				w.fail("%s: went from partly bound to none bound without an eviction (whole before: %v)", g, w.whole[g])
			}
			if partial && n >= min && w.evicting[g] {
				w.fail("%s: evicted partly: members went and %d stayed bound", g, n)
			}
			if partial && n == 0 && w.evicting[g] {
				w.evictions++
			}
			delete(w.since, g)
			delete(w.evicting, g)
			if n >= min {
				w.whole[g] = slices.Clone(uids)
			}
			continue
		}
		subset := len(w.whole[g]) > 0
		for _, u := range uids {
			subset = subset && slices.Contains(w.whole[g], u)
		}
		switch {
		case subset:
			// Fewer of the members seen whole: an eviction in progress.
			w.evicting[g] = true
		case !barrierLog.releasedTogether(w.ns+"/"+g, uids, min):
			w.fail("%s: %d of %d bound (%v), not allowed together by one barrier release; whole before: %v", g, n, min, uids, w.whole[g])
		}
		if !partial {
			w.since[g] = now
		} else if now.Sub(since) > settleWindow {
			w.fail("%s: %d of %d bound for over %s", g, n, min, settleWindow)
			delete(w.since, g)
		}
	}
}

// check stops sampling, lets every gang settle (whole or none), and fails t
// on any break of the rule.
func (w *preemptionWatcher) check(t testing.TB) {
	t.Helper()
	w.once.Do(func() {
		close(w.stop)
		<-w.done
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, settleWindow, true, func(ctx context.Context) (bool, error) {
			w.sample()
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.since) == 0, nil
		})
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.fail("gangs still partly bound at the end: %v", w.since)
		}
		for _, f := range w.failures {
			t.Errorf("gang bound or evicted partly: %s", f)
		}
		t.Logf("%d samples; %d whole-gang evictions seen in progress", w.samples, w.evictions)
	})
}
