package gang

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	testingclock "k8s.io/utils/clock/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
)

// preemptEnv is a real framework runtime over a snapshot with running pods,
// a fake clientset holding them (the executor patches and deletes there),
// and a real scheduling queue as the nominator.
type preemptEnv struct {
	ctx      context.Context
	pl       *Plugin
	cs       *fake.Clientset
	fh       framework.Framework
	recorder *events.FakeRecorder
	podStore interface{ Delete(any) error }
}

func newPreemptEnv(t *testing.T, nodes []*v1.Node, pgs []*schedv1alpha1.PodGroup, running, pending []*v1.Pod) *preemptEnv {
	t.Helper()
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var objs []runtime.Object
	for _, p := range slices.Concat(running, pending) {
		objs = append(objs, p)
	}
	cs := fake.NewClientset(objs...)
	inf := informers.NewSharedInformerFactory(cs, 0)
	rec := events.NewFakeRecorder(100)
	var pendingObjs []runtime.Object
	for _, p := range pending {
		pendingObjs = append(pendingObjs, p)
	}
	q := internalqueue.NewTestQueueWithObjects(ctx, nil, pendingObjs)
	f, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(inf),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewSnapshot(running, nodes)),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodActivator(&activator{names: map[string]bool{}}),
		frameworkruntime.WithPodNominator(q),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		frameworkruntime.WithEventRecorder(rec),
	)
	if err != nil {
		t.Fatal(err)
	}
	pl := newTestPlugin(t, ctx, f, testingclock.NewFakeClock(t0), pgs)
	store := inf.Core().V1().Pods().Informer().GetStore()
	for _, p := range slices.Concat(running, pending) {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return pl.pgSynced.Load(), nil
	}); err != nil {
		t.Fatalf("PodGroup informer did not sync: %v", err)
	}
	return &preemptEnv{ctx: ctx, pl: pl, cs: cs, fh: f, recorder: rec, podStore: store}
}

func boundTo(node string) podOpt { return func(p *v1.Pod) { p.Spec.NodeName = node } }

// PostFilter of a gang with no placement evicts the cheapest whole gang
// through the API (DisruptionTarget first), nominates the other members,
// and while the victims go makes no second preemption; once they are gone
// the members are steered to the room made.
func TestPostFilterPreemptsWholeGang(t *testing.T) {
	var running, pending []*v1.Pod
	for i, n := range []string{"n1", "n1", "n1", "n1"} {
		running = append(running, gpuPod("low-"+string(rune('a'+i)), 1, inGang("low"), prio(1), boundTo(n)))
	}
	for i, n := range []string{"n2", "n2", "n2", "n2"} {
		running = append(running, gpuPod("mid-"+string(rune('a'+i)), 1, inGang("mid"), prio(5), boundTo(n)))
	}
	for i := range 4 {
		pending = append(pending, gpuPod("hi-"+string(rune('a'+i)), 1, inGang("hi"), prio(100)))
	}
	for _, p := range running {
		p.Status.Phase = v1.PodRunning
	}
	e := newPreemptEnv(t, []*v1.Node{gpuNode("n1", 4), gpuNode("n2", 4)},
		[]*schedv1alpha1.PodGroup{podGroup("low", 4), podGroup("mid", 4), podGroup("hi", 4)}, running, pending)

	state := framework.NewCycleState()
	if _, st := e.pl.PreFilter(e.ctx, state, pending[0], nil); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter on a full cluster: %v, want no placement", st)
	}
	res, st := e.pl.PostFilter(e.ctx, state, pending[0], nil)
	if !st.IsSuccess() || res == nil || res.NominatingInfo == nil || res.NominatingInfo.NominatedNodeName != "n1" {
		t.Fatalf("PostFilter: %v %+v, want success nominating n1 (the priority-1 gang's node)", st, res)
	}
	if !strings.Contains(st.Message(), "gang ns/low") || strings.Contains(st.Message(), "gang ns/mid") {
		t.Errorf("PostFilter message %q, want the low gang as the only victim", st.Message())
	}
	// The siblings are nominated on the room made, in the scheduler's memory.
	var nominated []string
	for _, pi := range e.fh.NominatedPodsForNode("n1") {
		nominated = append(nominated, pi.GetPod().Name)
	}
	slices.Sort(nominated)
	if want := []string{"hi-b", "hi-c", "hi-d"}; !slices.Equal(nominated, want) {
		t.Errorf("nominated on n1: %v, want %v", nominated, want)
	}
	// The victims are deleted through the API, each with DisruptionTarget
	// naming the preemptor gang first; the mid gang is not touched.
	checkEvictedWhole(t, e, running[:4], "low-", "mid-", "gang ns/hi")

	// The victims are still in the scheduler's view: the members wait and
	// no second preemption is made.
	state = framework.NewCycleState()
	_, st = e.pl.PreFilter(e.ctx, state, pending[1], nil)
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "waiting for 4 of 4 victim pods to terminate") {
		t.Fatalf("PreFilter while victims terminate: %v", st)
	}
	res, st = e.pl.PostFilter(e.ctx, state, pending[1], nil)
	if st.IsSuccess() || !strings.Contains(st.Message(), "waiting for") {
		t.Errorf("PostFilter while victims terminate: %v, want the wait, no new preemption", st)
	}
	if res != nil && res.Mode() != fwk.ModeNoop {
		t.Errorf("PostFilter while victims terminate: nominating %+v, want the members' nominations kept", res.NominatingInfo)
	}

	// The victims go (the informer and the next snapshot no longer hold
	// them): the members are steered to the room made on n1.
	n1, err := e.fh.SnapshotSharedLister().NodeInfos().Get("n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range running[:4] {
		if err := e.podStore.Delete(p); err != nil {
			t.Fatal(err)
		}
		if err := n1.RemovePod(klog.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pending {
		res, st := e.pl.PreFilter(e.ctx, framework.NewCycleState(), p, nil)
		if !st.IsSuccess() || res.AllNodes() || !res.NodeNames.Has("n1") {
			t.Errorf("%s after the victims went: %v %v, want steered to n1", p.Name, res, st)
		}
	}
	if left := e.fh.NominatedPodsForNode("n1"); len(left) != 0 {
		t.Errorf("%d in-memory nominations left once the wait ended", len(left))
	}
}

// checkEvictedWhole waits until every pod named with prefix victim is
// deleted through the API, and checks that each victim got a
// DisruptionTarget condition naming preemptor before, and that no pod named
// with prefix untouched was deleted.
func checkEvictedWhole(t *testing.T, e *preemptEnv, victims []*v1.Pod, victim, untouched, preemptor string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := e.cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			if strings.HasPrefix(p.Name, victim) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("victims not deleted: %v", err)
	}
	patched := map[string]bool{}
	for _, a := range e.cs.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			pa := a.(interface {
				GetName() string
				GetPatch() []byte
			})
			if strings.Contains(string(pa.GetPatch()), string(v1.DisruptionTarget)) && strings.Contains(string(pa.GetPatch()), preemptor) {
				patched[pa.GetName()] = true
			}
		}
		if a.GetVerb() == "delete" {
			if name := a.(interface{ GetName() string }).GetName(); strings.HasPrefix(name, untouched) {
				t.Errorf("%s deleted, though not a victim", name)
			}
		}
	}
	for _, p := range victims {
		if !patched[p.Name] {
			t.Errorf("victim %s: no DisruptionTarget patch naming %s before its delete", p.Name, preemptor)
		}
	}
}

// PostFilter evicts nothing when preemption cannot or may not help, and
// says why.
func TestPostFilterDoesNotPreempt(t *testing.T) {
	never := v1.PreemptNever
	cases := []struct {
		name string
		// the preemptor: n members of gpus GPUs at priority prio
		n, gpus int64
		prio    int32
		opts    []podOpt
		want    string
	}{
		{name: "would not fit on an empty cluster", n: 3, gpus: 4, prio: 100, want: "would not fit even after evicting all 8 lower-priority pods"},
		{name: "equal priority", n: 4, gpus: 1, prio: 5, want: "no running pod has a lower priority"},
		{name: "preemptionPolicy Never", n: 4, gpus: 1, prio: 100, opts: []podOpt{func(p *v1.Pod) { p.Spec.PreemptionPolicy = &never }}, want: "preemptionPolicy is Never"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var running, pending []*v1.Pod
			for i, n := range []string{"n1", "n1", "n1", "n1", "n2", "n2", "n2", "n2"} {
				gang := "a"
				if i >= 4 {
					gang = "b"
				}
				running = append(running, gpuPod(gang+"-"+string(rune('a'+i)), 1, inGang(gang), prio(5), boundTo(n)))
			}
			for i := range tc.n {
				pending = append(pending, gpuPod("hi-"+string(rune('a'+i)), tc.gpus, append([]podOpt{inGang("hi"), prio(tc.prio)}, tc.opts...)...))
			}
			e := newPreemptEnv(t, []*v1.Node{gpuNode("n1", 4), gpuNode("n2", 4)},
				[]*schedv1alpha1.PodGroup{podGroup("a", 4), podGroup("b", 4), podGroup("hi", int32(tc.n))}, running, pending)
			state := framework.NewCycleState()
			if _, st := e.pl.PreFilter(e.ctx, state, pending[0], nil); st.IsSuccess() {
				t.Fatalf("PreFilter on a full cluster: success")
			}
			res, st := e.pl.PostFilter(e.ctx, state, pending[0], nil)
			// No node is nominated (a refused member's nomination is dropped).
			if st.Code() != fwk.UnschedulableAndUnresolvable || (res != nil && res.NominatingInfo.NominatedNodeName != "") || !strings.Contains(st.Message(), tc.want) {
				t.Errorf("PostFilter: %v %+v, want UnschedulableAndUnresolvable saying %q", st, res, tc.want)
			}
			for _, a := range e.cs.Actions() {
				if a.GetVerb() == "delete" || a.GetVerb() == "patch" {
					t.Errorf("%s %s: nothing may be evicted", a.GetVerb(), a.GetResource().Resource)
				}
			}
			if n := len(e.fh.NominatedPodsForNode("n1")) + len(e.fh.NominatedPodsForNode("n2")); n != 0 {
				t.Errorf("%d pods nominated, want none", n)
			}
		})
	}
}

func TestPreemptorPolicyAndPriority(t *testing.T) {
	never := v1.PreemptNever
	a, b, c := gpuPod("a", 1, inGang("g"), prio(10)), gpuPod("b", 1, inGang("g"), prio(30)), gpuPod("c", 1, inGang("g"), prio(20))
	pr := newPreemptor(a, types.NamespacedName{Namespace: "ns", Name: "g"}, nil, []*v1.Pod{a, b, c})
	if pr.priority != 30 || pr.never {
		t.Errorf("priority %d never %v, want the highest member priority 30 and policy PreemptLowerPriority", pr.priority, pr.never)
	}
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{api.AnnotationPriority: "500"}}}
	if pr := newPreemptor(a, types.NamespacedName{Namespace: "ns", Name: "g"}, pg, []*v1.Pod{a, b, c}); pr.priority != 500 {
		t.Errorf("priority %d with the PodGroup's recorded 500, want 500 (a member not seen yet may have it)", pr.priority)
	}
	c.Spec.PreemptionPolicy = &never
	if pr := newPreemptor(a, types.NamespacedName{Namespace: "ns", Name: "g"}, nil, []*v1.Pod{a, b, c}); !pr.never {
		t.Errorf("a member with preemptionPolicy Never: never=false, want true")
	}
}
