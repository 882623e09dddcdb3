package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// The fault tests (issue 14, item 7) break a component while gangs are
// being placed and check muster's promise under the fault: a gang may be
// seen partly bound only until it is completed or its bound members are
// evicted, within the partial-gang grace period after the fault, and in the
// end every gang is bound whole or not at all. Their randomness comes from
// one seed, logged; MUSTER_FAULT_SEED=<seed> replays a run's sizes, order
// and fault points (the timing of the machine still varies).

// faultGrace is the schedulers' partialGangGracePeriodSeconds in the fault
// tests: 10 s instead of the shipped 30 s, so that a gang the faults leave
// partly bound is resolved within the test's minute. It stays twice the
// shipped backoffSeconds (5 s), as the shipped grace is well above it: a
// partly bound gang whose first try after a fault is refused is planned
// again only after one backoff, and must get that try before its grace runs
// out.
const faultGrace = 10 * time.Second

// faultSchedulerArgs are the MusterGang args of the fault tests' schedulers.
var faultSchedulerArgs = map[string]any{"partialGangGracePeriodSeconds": int(faultGrace / time.Second)}

// faultSeed is MUSTER_FAULT_SEED if set, else the clock; it is logged.
func faultSeed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("MUSTER_FAULT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("MUSTER_FAULT_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("seed %d (replay with MUSTER_FAULT_SEED=%d)", seed, seed)
	return seed
}

// gangLedger samples the bound members of every expected gang every 100 ms
// (count gives bound and live members per gang) and holds the fault rule:
// a gang seen partly bound — some members bound, fewer than its size — is
// whole or has none bound within faultGrace + settleWindow of the later of
// the first such sample and the end of the latest fault. The no-fault rule
// of the other gang tests (partialWatcher: one barrier release per gang, no
// partial gang that goes back to none) does not hold under faults: a
// scheduler that dies between binds leaves members bound by one instance
// for the next to complete or evict, and either is what muster promises.
type gangLedger struct {
	count func(ctx context.Context) (bound, total map[string]int, err error)
	// onWhole, if set, is called once per gang, from the sampling
	// goroutine, when the gang is first seen whole.
	onWhole func(gang string)

	mu       sync.Mutex
	size     map[string]int
	faulting bool
	faultEnd time.Time
	open     map[string]time.Time // gang -> first sample of its partial episode
	whole    map[string]bool
	samples  int
	// skipped: samples lost to the fault itself (the apiserver down).
	skipped        int
	partialSamples int
	evicted        []string // gangs whose partial episode ended with none bound
	longest        time.Duration
	failures       []string

	stop, done chan struct{}
	checked    sync.Once
}

// startLedger starts sampling; its check runs in t's cleanup too.
func startLedger(t testing.TB, count func(ctx context.Context) (bound, total map[string]int, err error), onWhole func(string)) *gangLedger {
	l := &gangLedger{
		count: count, onWhole: onWhole,
		size: map[string]int{}, open: map[string]time.Time{}, whole: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go func() {
		defer close(l.done)
		wait.Until(func() { l.sample(context.Background()) }, 100*time.Millisecond, l.stop)
	}()
	t.Cleanup(func() { l.check(t) })
	return l
}

// expect adds a gang of size members.
func (l *gangLedger) expect(gang string, size int) {
	l.mu.Lock()
	l.size[gang] = size
	l.mu.Unlock()
}

// faultBegins and faultEnds bracket a fault; the rule's clock restarts at
// its end.
func (l *gangLedger) faultBegins() {
	l.mu.Lock()
	l.faulting = true
	l.mu.Unlock()
}

func (l *gangLedger) faultEnds() {
	l.mu.Lock()
	l.faulting, l.faultEnd = false, time.Now()
	l.mu.Unlock()
}

// fail records a failure of a helper goroutine; check reports it.
func (l *gangLedger) fail(format string, args ...any) {
	l.mu.Lock()
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// wholeCount is the number of gangs seen whole so far.
func (l *gangLedger) wholeCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.whole)
}

func (l *gangLedger) sample(ctx context.Context) {
	started := time.Now()
	bound, _, err := l.count(ctx)
	now := time.Now()
	l.mu.Lock()
	if err != nil {
		if l.faulting || started.Before(l.faultEnd) {
			l.skipped++
		} else {
			l.failures = append(l.failures, fmt.Sprintf("sampling the bindings: %v", err))
		}
		l.mu.Unlock()
		return
	}
	l.samples++
	limit := faultGrace + settleWindow
	var newlyWhole []string
	for g, size := range l.size {
		n := bound[g]
		since, open := l.open[g]
		if n == 0 || n >= size {
			if n >= size && !l.whole[g] {
				l.whole[g] = true
				newlyWhole = append(newlyWhole, g)
			}
			if open {
				delete(l.open, g)
				l.longest = max(l.longest, now.Sub(since))
				if n == 0 {
					l.evicted = append(l.evicted, g)
				}
			}
			continue
		}
		l.partialSamples++
		if !open {
			l.open[g] = now
			continue
		}
		if l.faulting {
			continue // the clock starts again when the fault ends
		}
		from := since
		if l.faultEnd.After(from) {
			from = l.faultEnd
		}
		if now.Sub(from) > limit {
			what := "it was first seen partly bound"
			if from.Equal(l.faultEnd) {
				what = "the last fault ended"
			}
			l.failures = append(l.failures, fmt.Sprintf("gang %s: %d of %d bound for %s since %s (limit %s = grace %s + settle window %s)",
				g, n, size, now.Sub(from).Round(time.Millisecond), what, limit, faultGrace, settleWindow))
			delete(l.open, g) // reported; a later episode starts afresh
		}
	}
	l.mu.Unlock()
	if l.onWhole != nil {
		for _, g := range newlyWhole {
			l.onWhole(g)
		}
	}
}

// partial lists the gangs partly bound in bound.
func (l *gangLedger) partial(bound map[string]int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for g, size := range l.size {
		if n := bound[g]; n > 0 && n < size {
			out = append(out, fmt.Sprintf("%s: %d of %d", g, n, size))
		}
	}
	sort.Strings(out)
	return out
}

// check stops sampling and fails t on every break of the rule. It runs once.
func (l *gangLedger) check(t testing.TB) {
	t.Helper()
	l.checked.Do(func() {
		close(l.stop)
		<-l.done
		l.sample(context.Background()) // the state as the test ends
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.samples == 0 {
			l.failures = append(l.failures, "no binding samples were taken")
		}
		// A test stopped early ends mid-placement: the end it did not reach
		// says nothing.
		if !t.Failed() {
			for g, since := range l.open {
				l.failures = append(l.failures, fmt.Sprintf("gang %s still partly bound at the end (since %s)", g, since.Format(time.TimeOnly)))
			}
		}
		for _, f := range l.failures {
			t.Errorf("fault rule: %s", f)
		}
		t.Logf("%d binding samples (%d lost to the fault); %d samples of a gang partly bound; %d partial episodes ended in eviction %v; longest partial episode %s",
			l.samples, l.skipped, l.partialSamples, len(l.evicted), l.evicted, l.longest.Round(time.Millisecond))
	})
}

// gangEvents lists the events on PodGroup g of ns and on its pods (named
// <g>-<i>), oldest first, as "kind/name reason: note".
func gangEvents(t testing.TB, cp *localcluster.ControlPlane, ns, g string) []string {
	t.Helper()
	evs, err := cp.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Events written through events.k8s.io carry the precise time.
	when := func(e eventsv1.Event) time.Time {
		if !e.EventTime.IsZero() {
			return e.EventTime.Time
		}
		return e.CreationTimestamp.Time
	}
	sort.Slice(evs.Items, func(i, j int) bool { return when(evs.Items[i]).Before(when(evs.Items[j])) })
	var out []string
	for _, e := range evs.Items {
		if r := e.Regarding; r.Name == g || strings.HasPrefix(r.Name, g+"-") {
			out = append(out, fmt.Sprintf("%s %s/%s %s: %s", when(e).Format("15:04:05.000"), r.Kind, r.Name, e.Reason, e.Note))
		}
	}
	return out
}

// describeGangPods lists the pods of gang g in ns (labelled gang=g), one
// localcluster.DescribePod line each.
func describeGangPods(t testing.TB, ns, g string) []string {
	t.Helper()
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "gang=" + g})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range pods.Items {
		out = append(out, localcluster.DescribePod(&pods.Items[i]))
	}
	return out
}

// createPersistently runs create until it succeeds, as a controller
// retries: through an apiserver outage, and through the server-side
// timeouts of an overloaded machine. A create cut off in flight may have
// been stored: AlreadyExists counts as created. It gives up after
// gangTimeout.
func createPersistently(ctx context.Context, create func(context.Context) error) error {
	deadline := time.Now().Add(gangTimeout)
	for {
		err := create(ctx)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// describeGang logs what a gang that did not become whole looks like: its
// pods (node, phase, PodScheduled, PodGroup label) and the events on them
// and on its PodGroup.
func describeGang(t testing.TB, cp *localcluster.ControlPlane, ns, g string) {
	t.Helper()
	pods, err := cp.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Name != g && !strings.HasPrefix(p.Name, g+"-") {
			continue
		}
		sched := "no PodScheduled"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				sched = fmt.Sprintf("PodScheduled=%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		t.Logf("gang %s: pod %s node %q phase %s nominated %q deleting %v pod-group %q; %s", g, p.Name, p.Spec.NodeName, p.Status.Phase,
			p.Status.NominatedNodeName, p.DeletionTimestamp != nil, p.Labels[api.LabelPodGroup], sched)
	}
	pgc, err := pgclientset.NewForConfig(cp.JSONConfig)
	if err != nil {
		t.Fatal(err)
	}
	pgs, err := pgc.SchedulingV1alpha1().PodGroups(ns).List(context.Background(), metav1.ListOptions{LabelSelector: api.LabelWorkloadName + "=" + g})
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range pgs.Items {
		t.Logf("gang %s: PodGroup %s minMember %d status %+v", g, pg.Name, pg.Spec.MinMember, pg.Status)
	}
	for _, e := range gangEvents(t, cp, ns, g) {
		t.Logf("gang %s: event %s", g, e)
	}
}

// podsByLabel counts live bound and live pods per value of label in ns of
// cp (boundByGang for any control plane and label).
func podsByLabel(ctx context.Context, cp *localcluster.ControlPlane, ns, label string) (bound, total map[string]int, err error) {
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	bound, total = map[string]int{}, map[string]int{}
	for _, p := range pods.Items {
		g := p.Labels[label]
		if g == "" || p.DeletionTimestamp != nil {
			continue
		}
		total[g]++
		if p.Spec.NodeName != "" {
			bound[g]++
		}
	}
	return bound, total, nil
}

// TestFaultMemberBoundOutsideBarrier isolates what R5 found: a member bound
// without passing this scheduler's barrier — its bind was stored by the
// apiserver while the scheduler saw the connection drop, so it was
// unreserved and retried — leaves the members waiting at the barrier
// waiting for it until the permit timeout, the gang partly bound meanwhile.
// Here member b names another scheduler, so a is planned with b and waits
// at the barrier; then b is bound through the API, as that lost bind was.
// The quorum is there: a must be let go at once, not after the 30 s permit
// timeout.
func TestFaultMemberBoundOutsideBarrier(t *testing.T) {
	ns, sched := gangTest(t, "fault-bind-", 1, 4, map[string]any{"permitTimeoutSeconds": 30})
	createPodGroup(t, ns, "g", 2, nil)
	createGangPods(t, ns, 1, podSpec{name: "a", scheduler: sched, pool: ns, gang: "g", gpus: 1})
	createGangPods(t, ns, 1, podSpec{name: "b", scheduler: sched + "-elsewhere", pool: ns, gang: "g", gpus: 1})
	waitFor(t, gangTimeout, "a waiting at the barrier (nominated)", objectIs(controlPlane.Client.CoreV1().Pods(ns), "a-0", func(p *corev1.Pod) (bool, string) {
		return p.Status.NominatedNodeName != "" && p.Spec.NodeName == "", fmt.Sprintf("nominated %q node %q", p.Status.NominatedNodeName, p.Spec.NodeName)
	}))
	noneBound(t, ns, "g", time.Second)
	if err := controlPlane.Client.CoreV1().Pods(ns).Bind(context.Background(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b-0"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: ns + "-0"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	waitGangBound(t, ns, "g", 2, settleWindow)
	t.Logf("a bound %s after b", time.Since(begin).Round(time.Millisecond))
}

// TestFaultStaleNominations: a scheduler that dies after writing its
// members' nominatedNodeName and before binding them leaves the nominations
// behind. The next scheduler's queue records a pod's nomination even while
// the pod waits in PreEnqueue, keeps it across failed attempts, and its
// filters count the pod on that node. A gang that cannot be completed (a
// member evicted: its others wait for good) or never fits would so hold room
// nobody uses. What must hold: the stale pods get their turn even behind a
// gang the queue tries first, the room goes to the gang that fits, and the
// stale nominations are cleared in the API (a cluster autoscaler counts a
// nominated pod on its node; so would the next scheduler).
func TestFaultStaleNominations(t *testing.T) {
	ns := testNamespace(t, "fault-nnn-")
	sched := "muster-" + ns
	gpuPool(t, ns, 1, 8)
	node := ns + "-0"
	stale := func(g string, minMember int32, n int, gpus int64) []string {
		createPodGroup(t, ns, g, minMember, nil)
		var names []string
		for i := range n {
			pod := makePod(ns, podSpec{name: fmt.Sprintf("%s-%d", g, i), scheduler: sched, pool: ns, gang: g, gpus: gpus})
			got, err := controlPlane.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got.Status.NominatedNodeName = node
			if _, err := controlPlane.Client.CoreV1().Pods(ns).UpdateStatus(context.Background(), got, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			names = append(names, got.Name)
		}
		return names
	}
	// The gang that fits is older, its name sorts first and its pods are
	// there when the scheduler starts: the queue tries it before the stale
	// gangs, which must still get their turn (their attempts clear the
	// nominations). A plan kept onto the nominated room failed, was made
	// again at once and kept the head of the queue.
	createPodGroup(t, ns, "a-fits", 2, nil)
	createGangPods(t, ns, 2, podSpec{name: "fits", scheduler: sched, pool: ns, gang: "a-fits", gpus: 4})
	// Two of three members left: they wait in PreEnqueue for good.
	nominated := stale("left", 3, 2, 4)
	// Complete, but 16 GPUs on one 8-GPU node: tried and refused.
	nominated = append(nominated, stale("big", 2, 2, 8)...)
	startGangScheduler(t, sched, faultSchedulerArgs)
	waitGangBound(t, ns, "a-fits", 2, gangTimeout)
	waitFor(t, gangTimeout, "stale nominations cleared", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, name := range nominated {
			p, err := controlPlane.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if p.Status.NominatedNodeName != "" {
				left = append(left, name+"→"+p.Status.NominatedNodeName)
			}
		}
		return len(left) == 0, fmt.Sprintf("still nominated: %v", left), nil
	})
}
