package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// Issue 15, item 2: another scheduler preempts one member of a gang muster
// bound. muster-scheduler cannot stop a foreign scheduler; what it promises
// (docs/preemption.md) is its partial-gang handling: the member's controller
// recreates the pod, and muster either completes the gang around its bound
// members or, when the new member cannot be placed within the partial-gang
// grace period, evicts the bound ones so the gang waits whole.
//
// The foreign scheduler is the test: it preempts one member of a gang of
// low-priority pods the way DefaultPreemption does (the DisruptionTarget
// condition, then a graceful delete) for a high-priority pod that no
// muster scheduler serves, and binds that pod (preemptOneMember says why
// it binds first). The real ReplicaSet controller recreates the member. A
// gang ledger (the fault tests' rule, faults_test.go) samples every 100 ms
// that the gang is never partly bound longer than the grace period plus
// the settle window.

// foreignPreemption is one run: a gang of 4 × 1 GPU made by a ReplicaSet on
// node <ns>-0 (4 GPUs), then a high-priority pod of a foreign scheduler
// pinned to that node takes one member's GPU. With spare, a 1-GPU node joins the pool first: room for the
// recreated member.
type foreignPreemption struct {
	ns, sched string
	ledger    *gangLedger
	members   []types.UID // the gang's members once first bound
}

const foreignGangSize = 4

func startForeignPreemption(t *testing.T, prefix string, spare bool) *foreignPreemption {
	t.Helper()
	ctx := context.Background()
	ns, sched := gangTest(t, prefix, 1, foreignGangSize, faultSchedulerArgs)
	f := &foreignPreemption{ns: ns, sched: sched}
	t.Cleanup(func() {
		if t.Failed() {
			dumpPodsAndEvents(t, ns)
		}
	})
	low, high := ns+"-low", ns+"-high"
	priorityClassOfTest(t, low, 10)
	priorityClassOfTest(t, high, 1000000)
	createPodGroup(t, ns, "g", foreignGangSize, nil)

	tmpl := makePod(ns, podSpec{scheduler: sched, pool: ns, gang: "g", gpus: 1, mutate: func(p *corev1.Pod) {
		p.Spec.PriorityClassName = low
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	}})
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "g"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](foreignGangSize),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"gang": "g"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec},
		},
	}
	if _, err := controlPlane.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.ledger = startLedger(t, func(ctx context.Context) (map[string]int, map[string]int, error) { return boundByGang(ctx, ns) }, nil)
	f.ledger.expect("g", foreignGangSize)
	waitGangBound(t, ns, "g", foreignGangSize, gangTimeout)
	f.members = f.liveMembers(t)

	if spare {
		testPool(t, ns, 1, func(int) localcluster.NodeSpec { return localcluster.NodeSpec{Name: ns + "-spare", GPUs: 1} })
	}
	f.preemptOneMember(t, high)
	return f
}

// preemptOneMember plays a foreign scheduler's preemption for a pod of
// class pc pinned to <ns>-0, in DefaultPreemption's order — the victim gets
// the DisruptionTarget condition, then is deleted gracefully — except that
// the preemptor is bound before the victim goes, not after. The harness has
// no kubelet to refuse a pod on a full node, so in the real order muster
// could bind the recreated member to the freed GPU before the foreign
// scheduler binds its pod, and the node would hold both (a real kubelet
// fails the later one with OutOfnvidia.com/gpu); binding first makes the
// freed GPU the foreign pod's, as the foreign scheduler meant it to be.
func (f *foreignPreemption) preemptOneMember(t *testing.T, pc string) {
	t.Helper()
	ctx := context.Background()
	pods := controlPlane.Client.CoreV1().Pods(f.ns)
	foreign := makePod(f.ns, podSpec{name: "foreign", scheduler: "foreign-" + f.ns, pool: f.ns, gpus: 1, mutate: func(p *corev1.Pod) {
		p.Spec.PriorityClassName = pc
		p.Spec.NodeSelector[localcluster.HostnameLabel] = f.ns + "-0"
	}})
	if _, err := pods.Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	members, err := pods.List(ctx, metav1.ListOptions{LabelSelector: api.LabelPodGroup + "=g"})
	if err != nil {
		t.Fatal(err)
	}
	var victim *corev1.Pod
	for i := range members.Items {
		if p := &members.Items[i]; p.Spec.NodeName == f.ns+"-0" && p.DeletionTimestamp == nil {
			victim = p
			break
		}
	}
	if victim == nil {
		t.Fatalf("no member of g bound on %s-0", f.ns)
	}
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler,
		Message: "foreign-" + f.ns + ": preempting to accommodate a higher priority pod", LastTransitionTime: metav1.Now()}
	victim.Status.Conditions = append(victim.Status.Conditions, cond)
	if _, err := pods.UpdateStatus(ctx, victim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "foreign"},
		Target: corev1.ObjectReference{Kind: "Node", Name: f.ns + "-0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &victim.UID}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("foreign preemption: %s (DisruptionTarget) deleted for pod foreign on %s-0", victim.Name, f.ns)
}

// liveMembers lists the UIDs of the gang's pods that are not terminating.
func (f *foreignPreemption) liveMembers(t *testing.T) []types.UID {
	t.Helper()
	pods, err := controlPlane.Client.CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: api.LabelPodGroup + "=g"})
	if err != nil {
		t.Fatal(err)
	}
	var out []types.UID
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.UID)
		}
	}
	return out
}

// dumpPodsAndEvents logs the pods (node, phase, scheduling conditions) and
// the events of ns, to say why a run went wrong.
func dumpPodsAndEvents(t *testing.T, ns string) {
	ctx := context.Background()
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		var conds []string
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue || c.Type == corev1.DisruptionTarget {
				conds = append(conds, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
			}
		}
		t.Logf("pod %s node=%q nominated=%q phase=%s deleting=%v %v", p.Name, p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase, p.DeletionTimestamp != nil, conds)
	}
	evs, err := controlPlane.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("listing events: %v", err)
		return
	}
	for _, e := range evs.Items {
		t.Logf("event %s %s/%s %s: %s", e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Type, e.Note)
	}
}

// evicted reports the gangs the ledger saw go from partly bound to none.
func (l *gangLedger) evictedGangs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.evicted)
}

// TestForeignPreemptionGangCompleted: room for the recreated member exists
// elsewhere, so muster binds it and the gang is whole again — the three
// members the foreign scheduler left are not touched.
func TestForeignPreemptionGangCompleted(t *testing.T) {
	f := startForeignPreemption(t, "pgf-done-", true)
	waitFor(t, gangTimeout, "gang g whole again", gangsBound(f.ns, func(bound, total map[string]int) bool {
		return bound["g"] == foreignGangSize && total["g"] == foreignGangSize
	}))
	now := f.liveMembers(t)
	kept := 0
	for _, uid := range now {
		if slices.Contains(f.members, uid) {
			kept++
		}
	}
	if kept != foreignGangSize-1 {
		t.Errorf("%d of the gang's first members live after one was preempted, want %d (members before %v, now %v)", kept, foreignGangSize-1, f.members, now)
	}
	f.ledger.check(t)
	if ev := f.ledger.evictedGangs(); len(ev) > 0 {
		t.Errorf("gangs evicted %v; the gang should have been completed", ev)
	}
}

// TestForeignPreemptionGangEvictedWhole: the foreign pod keeps the GPU and
// the recreated member has nowhere to go, so after the grace period muster
// evicts the bound members (EvictingPartialGang) and the gang waits with
// none bound; once the foreign pod is gone the gang is bound whole.
func TestForeignPreemptionGangEvictedWhole(t *testing.T) {
	f := startForeignPreemption(t, "pgf-evict-", false)
	waitEvent(t, f.ns, "PodGroup", "g", "EvictingPartialGang", []string{fmt.Sprintf("%d of %d members bound", foreignGangSize-1, foreignGangSize)})
	waitFor(t, gangTimeout, "gang g evicted whole", gangsBound(f.ns, func(bound, _ map[string]int) bool { return bound["g"] == 0 }))
	noneBound(t, f.ns, "g", 3*time.Second)
	if ev := f.ledger.evictedGangs(); !slices.Contains(ev, "g") {
		t.Errorf("the ledger saw no eviction of g (evicted %v)", ev)
	}

	if err := controlPlane.Client.CoreV1().Pods(f.ns).Delete(context.Background(), "foreign", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, gangTimeout, "gang g bound whole once the foreign pod is gone", gangsBound(f.ns, func(bound, total map[string]int) bool {
		return bound["g"] == foreignGangSize && total["g"] == foreignGangSize
	}))
	f.ledger.check(t)
}
