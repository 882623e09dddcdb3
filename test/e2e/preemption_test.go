package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// Whole-gang preemption (issue 15): muster-scheduler evicts lower-priority
// work only in whole gangs (or an elastic gang's extras), only when the
// preemptor's quorum then fits, and never for equal priority or
// preemptionPolicy Never. Every test watches its gangs with
// preemptionWatcher: a gang is never seen partly bound except while it is
// bound whole by one barrier release or evicted whole.

const preemptTimeout = 90 * time.Second

// preClass creates a PriorityClass for t (cluster-wide: named after the
// namespace) and deletes it when t ends.
func preClass(t testing.TB, name string, value int32, never bool) string {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if never {
		pc.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	}
	if _, err := controlPlane.Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controlPlane.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	// The Priority admission plugin reads classes from an informer: a pod
	// created at once may be refused ("no PriorityClass with name ... was
	// found"). A dry-run pod tells when admission knows the class.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "probe-" + name},
		Spec:       corev1.PodSpec{PriorityClassName: name, Containers: []corev1.Container{{Name: "c", Image: "probe"}}},
	}
	waitFor(t, gangTimeout, "priority admission to know class "+name, func(ctx context.Context) (bool, string, error) {
		_, err := controlPlane.Client.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "no PriorityClass") {
			return false, err.Error(), nil
		}
		return err == nil, "", err
	})
	return name
}

// preSetGang creates a PodGroup and a ReplicaSet of n pods of gpus GPUs at
// priority class pc: the ReplicaSet controller recreates what is evicted at
// once, as a workload controller would.
func preSetGang(t testing.TB, ns, sched, name string, n int32, gpus int64, pc string) {
	t.Helper()
	createPodGroup(t, ns, name, n, nil)
	pod := makePod(ns, podSpec{name: name, scheduler: sched, pool: ns, gang: name, gpus: gpus})
	pod.Spec.PriorityClassName = pc
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"gang": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec},
		},
	}
	if _, err := controlPlane.Client.AppsV1().ReplicaSets(ns).Create(context.Background(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// prePods creates n pods of gang (PodGroup minMember min) at class pc;
// gang "" makes gang-free pods.
func prePods(t testing.TB, ns, sched, gang, prefix string, n int, min int32, gpus int64, pc string) {
	t.Helper()
	spec := podSpec{name: prefix, scheduler: sched, pool: ns, gang: gang, gpus: gpus, mutate: func(p *corev1.Pod) {
		p.Spec.PriorityClassName = pc
		if gang == "" {
			p.Annotations = map[string]string{api.AnnotationGrouping: api.GroupingNone}
			p.Labels["gang"] = prefix
		}
	}}
	if gang != "" {
		createPodGroup(t, ns, gang, min, nil)
	}
	createGangPods(t, ns, n, spec)
}

// boundUIDs lists the live bound pods' UIDs per gang label, sorted.
func boundUIDs(t testing.TB, ns string) map[string][]types.UID {
	t.Helper()
	m, err := boundPods(context.Background(), ns, "gang")
	if err != nil {
		t.Fatal(err)
	}
	for _, uids := range m {
		slices.Sort(uids)
	}
	return m
}

// Low-priority gangs fill the cluster; a high-priority gang takes exactly
// the cheapest whole gangs (the lowest priority), is bound whole, its
// victims carry DisruptionTarget and events name it, and the victims come
// back whole (their ReplicaSets recreate the pods) once the room returns.
func TestPreemptionWholeGangs(t *testing.T) {
	ns, sched := gangTest(t, "preempt-1-", 4, 4, nil)
	low := preClass(t, ns+"-low", 10, false)
	mid := preClass(t, ns+"-mid", 20, false)
	high := preClass(t, ns+"-high", 1000, false)
	gone := recordDeletions(t, ns)
	mins := map[string]int{"mid-a": 4, "mid-b": 4, "low-a": 4, "low-b": 4, "hi": 8}
	w := watchPreemption(t, ns, mins)
	for _, g := range []string{"mid-a", "mid-b"} {
		preSetGang(t, ns, sched, g, 4, 1, mid)
	}
	for _, g := range []string{"low-a", "low-b"} {
		preSetGang(t, ns, sched, g, 4, 1, low)
	}
	for _, g := range []string{"mid-a", "mid-b", "low-a", "low-b"} {
		waitGangBound(t, ns, g, 4, gangTimeout)
	}
	w.seenWhole(t, "mid-a", "mid-b", "low-a", "low-b")
	before := boundUIDs(t, ns)

	begin := time.Now()
	prePods(t, ns, sched, "hi", "hi", 8, 8, 1, high)
	waitGangBound(t, ns, "hi", 8, preemptTimeout)
	t.Logf("high-priority gang of 8 bound %s after it was created", time.Since(begin).Round(time.Millisecond))

	after := boundUIDs(t, ns)
	for _, g := range []string{"mid-a", "mid-b"} {
		if !slices.Equal(after[g], before[g]) {
			t.Errorf("%s (priority 20) was touched: bound %v, before %v; the cheapest victims are the priority-10 gangs", g, after[g], before[g])
		}
	}
	for _, g := range []string{"low-a", "low-b"} {
		for _, uid := range before[g] {
			if slices.Contains(after[g], uid) {
				t.Errorf("%s: member %s still bound; the gang should have been evicted whole", g, uid)
				continue
			}
			c, ok := gone.disruption(uid)
			if !ok || c.Reason != corev1.PodReasonPreemptionByScheduler || !strings.Contains(c.Message, "gang "+ns+"/hi") {
				t.Errorf("%s: evicted member %s: DisruptionTarget %+v (found %v), want reason %s naming gang %s/hi", g, uid, c, ok, corev1.PodReasonPreemptionByScheduler, ns)
			}
		}
		waitEvent(t, ns, "PodGroup", g, "Preempted", []string{"gang " + ns + "/" + g + " evicted whole", "gang " + ns + "/hi"})
	}
	waitEvent(t, ns, "PodGroup", "hi", "Preempting", []string{"gang " + ns + "/low-a", "gang " + ns + "/low-b"})

	// The victims' ReplicaSets recreate their pods; they wait whole while hi runs.
	waitFor(t, preemptTimeout, "the victims' replacement pods rejected for want of room", func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "gang=low-a"})
		if err != nil {
			return false, "", err
		}
		pending := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				pending++
			}
		}
		return pending == 4, fmt.Sprintf("%d pending", pending), nil
	})
	noneBound(t, ns, "low-a", 2*time.Second)

	// Room returns: the victims come back whole.
	if err := controlPlane.Client.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{LabelSelector: "gang=hi"}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"low-a", "low-b"} {
		waitGangBound(t, ns, g, 4, preemptTimeout)
	}
	w.check(t)
}

// Nothing is evicted for a gang that would not fit even on an empty
// cluster; the reason says so.
func TestPreemptionWouldNotFit(t *testing.T) {
	ns, sched := gangTest(t, "preempt-2-", 2, 4, nil)
	low := preClass(t, ns+"-low", 10, false)
	high := preClass(t, ns+"-high", 1000, false)
	w := watchPreemption(t, ns, map[string]int{"a": 4, "b": 4, "big": 3})
	preSetGang(t, ns, sched, "a", 4, 1, low)
	preSetGang(t, ns, sched, "b", 4, 1, low)
	waitGangBound(t, ns, "a", 4, gangTimeout)
	waitGangBound(t, ns, "b", 4, gangTimeout)
	before := boundUIDs(t, ns)

	prePods(t, ns, sched, "big", "big", 3, 3, 4, high)
	c := waitUnschedulable(t, ns, "big-0", "would not fit even after evicting all 8 lower-priority pods", preemptTimeout)
	t.Logf("PodScheduled=%s/%s: %s", c.Status, c.Reason, c.Message)
	holdsFor(t, 3*time.Second, "the low-priority gangs untouched", gangsUntouched(ns, before, "a", "b"))
	noneBound(t, ns, "big", time.Second)
	w.check(t)
}

// gangsUntouched holds while each gang has exactly the bound pods it had.
func gangsUntouched(ns string, before map[string][]types.UID, gangs ...string) localcluster.Condition {
	return func(ctx context.Context) (bool, string, error) {
		now, err := boundPods(ctx, ns, "gang")
		if err != nil {
			return false, "", err
		}
		for _, g := range gangs {
			got := slices.Clone(now[g])
			slices.Sort(got)
			if !slices.Equal(got, before[g]) {
				return false, fmt.Sprintf("%s bound %v, before %v", g, got, before[g]), nil
			}
		}
		return true, "untouched", nil
	}
}

// Equal priority preempts nothing, and neither does preemptionPolicy Never.
func TestPreemptionNotAllowed(t *testing.T) {
	ns, sched := gangTest(t, "preempt-3-", 2, 4, nil)
	low := preClass(t, ns+"-low", 10, false)
	never := preClass(t, ns+"-never", 1000, true)
	w := watchPreemption(t, ns, map[string]int{"a": 4, "b": 4, "same": 4, "polite": 4})
	preSetGang(t, ns, sched, "a", 4, 1, low)
	preSetGang(t, ns, sched, "b", 4, 1, low)
	waitGangBound(t, ns, "a", 4, gangTimeout)
	waitGangBound(t, ns, "b", 4, gangTimeout)
	before := boundUIDs(t, ns)

	prePods(t, ns, sched, "same", "same", 4, 4, 1, low)
	c := waitUnschedulable(t, ns, "same-0", "no running pod has a lower priority", preemptTimeout)
	t.Logf("equal priority: %s", c.Message)
	prePods(t, ns, sched, "polite", "polite", 4, 4, 1, never)
	c = waitUnschedulable(t, ns, "polite-0", "preemptionPolicy is Never", preemptTimeout)
	t.Logf("preemptionPolicy Never: %s", c.Message)
	holdsFor(t, 3*time.Second, "the running gangs untouched", gangsUntouched(ns, before, "a", "b"))
	w.check(t)
}

// A high-priority pod scheduled alone takes a whole gang or waits; it
// never takes one member.
func TestPreemptionPlainPodTakesWholeGang(t *testing.T) {
	ns, sched := gangTest(t, "preempt-4-", 2, 4, nil)
	low := preClass(t, ns+"-low", 10, false)
	high := preClass(t, ns+"-high", 1000, false)
	gone := recordDeletions(t, ns)
	gangs := []string{"a", "b", "c", "d"}
	mins := map[string]int{}
	for _, g := range gangs {
		mins[g] = 2
	}
	w := watchPreemption(t, ns, mins)
	for _, g := range gangs {
		preSetGang(t, ns, sched, g, 2, 1, low)
	}
	for _, g := range gangs {
		waitGangBound(t, ns, g, 2, gangTimeout)
	}
	before := boundUIDs(t, ns)

	// Too big for any node: it waits and nothing goes.
	prePods(t, ns, sched, "", "huge", 1, 0, 5, high)
	c := waitUnschedulable(t, ns, "huge-0", "would not fit even after evicting all 8 lower-priority pods", preemptTimeout)
	t.Logf("plain pod too big: %s", c.Message)
	holdsFor(t, 2*time.Second, "the gangs untouched", gangsUntouched(ns, before, gangs...))

	// Two GPUs on one node: one whole gang of 2 (if its members share a
	// node) or two gangs; never one member of a gang.
	prePods(t, ns, sched, "", "solo", 1, 0, 2, high)
	waitGangBound(t, ns, "solo", 1, preemptTimeout)
	after := boundUIDs(t, ns)
	evicted := 0
	for _, g := range gangs {
		kept := 0
		for _, uid := range before[g] {
			if slices.Contains(after[g], uid) {
				kept++
			} else if c, ok := gone.disruption(uid); !ok || !strings.Contains(c.Message, "pod "+ns+"/solo-0") {
				t.Errorf("%s: evicted member %s: DisruptionTarget %+v (found %v), want it naming pod %s/solo-0", g, uid, c, ok, ns)
			}
		}
		switch kept {
		case 0:
			evicted++
		case len(before[g]):
		default:
			t.Errorf("gang %s lost %d of its %d members for a plain pod", g, len(before[g])-kept, len(before[g]))
		}
	}
	if evicted == 0 {
		t.Errorf("no gang evicted, yet the plain pod bound on a full cluster")
	}
	t.Logf("plain pod of 2 GPUs bound; %d whole gangs of 2 evicted", evicted)
	w.check(t)
}

// Elastic: a gang of up to 5 with a quorum of 2 on room for 3 runs 2+1;
// a high-priority gang needing the room of one member takes the extra,
// and the elastic gang keeps its quorum.
func TestPreemptionElasticExtrasFirst(t *testing.T) {
	ns, sched := gangTest(t, "preempt-5-", 2, 6, nil)
	low := preClass(t, ns+"-low", 10, false)
	high := preClass(t, ns+"-high", 1000, false)
	w := watchPreemption(t, ns, map[string]int{"fill": 3, "workers": 2, "hi": 2})
	prePods(t, ns, sched, "fill", "fill", 3, 3, 2, low)
	waitGangBound(t, ns, "fill", 3, gangTimeout)
	prePods(t, ns, sched, "workers", "workers", 5, 2, 2, low)
	waitFor(t, gangTimeout, "workers 2+1 bound", gangsBound(ns, func(bound, _ map[string]int) bool {
		return bound["workers"] == 3
	}))
	holdsFor(t, 2*time.Second, "workers 2+1 bound, the other two wait", gangsBound(ns, func(bound, _ map[string]int) bool {
		return bound["workers"] == 3
	}))
	// The PodGroup shows the quorum and the extras apart.
	waitEvent(t, ns, "PodGroup", "workers", "GangElastic", []string{"quorum 2/2 bound, extras 1/3 bound"})
	before := boundUIDs(t, ns)

	prePods(t, ns, sched, "hi", "hi", 2, 2, 1, high)
	waitGangBound(t, ns, "hi", 2, preemptTimeout)
	after := boundUIDs(t, ns)
	if !slices.Equal(after["fill"], before["fill"]) {
		t.Errorf("fill was touched: %v, before %v; the extra should have gone first", after["fill"], before["fill"])
	}
	kept := 0
	for _, uid := range before["workers"] {
		if slices.Contains(after["workers"], uid) {
			kept++
		}
	}
	if kept != 2 || len(after["workers"]) != 2 {
		t.Errorf("workers kept %d of its 3 bound members (bound now %d), want its quorum of 2 kept and the one extra taken", kept, len(after["workers"]))
	}
	waitEvent(t, ns, "PodGroup", "workers", "Preempted", []string{"loses an extra member above its quorum", "gang " + ns + "/hi"})
	waitEvent(t, ns, "PodGroup", "workers", "GangElastic", []string{"quorum 2/2 bound, extras 0/2 bound"})
	holdsFor(t, 2*time.Second, "workers keeps its quorum", gangsBound(ns, func(bound, _ map[string]int) bool {
		return bound["workers"] == 2 && bound["hi"] == 2 && bound["fill"] == 3
	}))
	w.check(t)
}

// preJobSetYAML is a JobSet of a leader and two workers of 4 GPUs each at
// priority class pc. A Job fails at its first lost pod and the JobSet then
// restarts all its Jobs, as training JobSets are usually set up.
func preJobSetYAML(name, pool, sched, pc string) string {
	job := func(rj string, replicas int) string {
		return fmt.Sprintf(`
  - name: %s
    replicas: %d
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          spec:
            priorityClassName: %s
            restartPolicy: Never
            %s
            containers:
            - name: main
              image: busybox
              resources: {limits: {nvidia.com/gpu: 4}}`, rj, replicas, pc, podPlacement(pool, sched, "            "))
	}
	return `
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: ` + name + `}
spec:
  failurePolicy: {maxRestarts: 5}
  replicatedJobs:` + job("leader", 1) + job("workers", 2) + "\n"
}

// podGroupOf waits for the PodGroup the pod-grouper made for the pods of
// JobSet js, and returns its name.
func podGroupOf(t testing.TB, ns, js string) string {
	t.Helper()
	var name string
	waitFor(t, preemptTimeout, "the pod-grouper's PodGroup of JobSet "+js, func(ctx context.Context) (bool, string, error) {
		pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + js})
		if err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if name = p.Labels[api.LabelPodGroup]; name != "" {
				return true, name, nil
			}
		}
		return false, fmt.Sprintf("%d pods, none labelled", len(pods.Items)), nil
	})
	return name
}

// The real JobSet operator: a high-priority JobSet preempts a low-priority
// one whole; the JobSet controller restarts the victim's Jobs, whose new
// pods wait whole and are bound whole once the high-priority JobSet goes.
func TestPreemptionJobSet(t *testing.T) {
	startOperator(t, "jobset")
	ns, sched := gangTest(t, "preempt-js-", 2, 8, nil)
	startPodGrouper(t, sched)
	low := preClass(t, ns+"-low", 10, false)
	high := preClass(t, ns+"-high", 1000, false)
	w := watchPreemptionBy(t, ns, api.LabelPodGroup, map[string]int{})
	lowSel := "jobset.sigs.k8s.io/jobset-name=low"
	applyYAML(t, ns, preJobSetYAML("low", ns, sched, low))
	lowPG := podGroupOf(t, ns, "low")
	w.expect(lowPG, 3)
	first := waitRunning(t, ns, lowSel, 3)
	w.seenWhole(t, lowPG)

	begin := time.Now()
	applyYAML(t, ns, preJobSetYAML("high", ns, sched, high))
	highPG := podGroupOf(t, ns, "high")
	w.expect(highPG, 3)
	waitRunning(t, ns, "jobset.sigs.k8s.io/jobset-name=high", 3)
	w.seenWhole(t, highPG)
	t.Logf("high-priority JobSet bound whole %s after it was created", time.Since(begin).Round(time.Millisecond))
	for _, p := range first {
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Get(t.Context(), p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("low JobSet pod %s still there (err %v); the JobSet should have been evicted whole", p.Name, err)
		}
	}
	waitEvent(t, ns, "PodGroup", lowPG, "Preempted", []string{"evicted whole", "gang " + ns + "/" + highPG})
	waitFor(t, preemptTimeout, "JobSet low restarted by its controller", objectIs(dynamicGetter(controlPlane.Dynamic.Resource(jobsetsGVR).Namespace(ns)), "low", func(js *unstructured.Unstructured) (bool, string) {
		restarts, _, _ := unstructured.NestedInt64(js.Object, "status", "restarts")
		return restarts >= 1, fmt.Sprintf("restarts=%d", restarts)
	}))

	if err := controlPlane.Dynamic.Resource(jobsetsGVR).Namespace(ns).Delete(t.Context(), "high", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, ns, lowSel, 3)
	w.check(t)
}
