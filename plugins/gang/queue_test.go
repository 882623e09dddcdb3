package gang

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/muster-io/muster/api"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type podOpt func(*v1.Pod)

func inGang(name string) podOpt {
	return func(p *v1.Pod) { p.Labels = map[string]string{api.LabelPodGroup: name} }
}
func prio(v int32) podOpt { return func(p *v1.Pod) { p.Spec.Priority = ptr.To(v) } }
func created(d time.Duration) podOpt {
	return func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
}
func gangFree(p *v1.Pod) {
	p.Annotations = map[string]string{api.AnnotationGrouping: api.GroupingNone}
}

// legacyGangFree is the pod marker of earlier releases, still honoured.
func legacyGangFree(p *v1.Pod) {
	p.Annotations = map[string]string{api.AnnotationGang: api.GangNone}
}
func native(p *v1.Pod) {
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("native")}
}

func testPod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), CreationTimestamp: metav1.NewTime(t0)}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func queued(p *v1.Pod, queuedAt time.Duration) fwk.QueuedEntityInfo {
	pi, _ := framework.NewPodInfo(p)
	return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: t0.Add(queuedAt)}}
}

func TestLess(t *testing.T) {
	p := &Plugin{requirePodGrouper: true, created: map[types.NamespacedName]time.Time{
		{Namespace: "ns", Name: "old"}: t0.Add(-time.Hour),
		{Namespace: "ns", Name: "new"}: t0.Add(time.Hour),
		{Namespace: "ns", Name: "a"}:   t0.Add(3 * time.Hour),
		{Namespace: "ns", Name: "b"}:   t0.Add(3 * time.Hour),
	}}
	entities := []fwk.QueuedEntityInfo{
		// Members of "new" arrive first, but their PodGroup is younger.
		queued(testPod("new-1", inGang("new"), created(2*time.Second)), 0),
		queued(testPod("new-0", inGang("new"), created(time.Second)), 1),
		queued(testPod("old-1", inGang("old"), created(2*time.Second)), 2),
		queued(testPod("old-0", inGang("old"), created(time.Second)), 3),
		// A pod alone queued between the gangs' times goes between them.
		queued(testPod("alone", gangFree), 30*time.Minute),
		// Higher priority goes first whatever else.
		queued(testPod("urgent", inGang("new"), prio(100)), 5),
		queued(testPod("native-0", native), 40*time.Minute),
		// Same gang time: the gang name breaks the tie, members stay together.
		queued(testPod("b-0", inGang("b"), created(3*time.Hour)), 6),
		queued(testPod("a-1", inGang("a"), created(3*time.Hour+time.Second)), 7),
		queued(testPod("a-0", inGang("a"), created(3*time.Hour)), 8),
	}
	sort.SliceStable(entities, func(i, j int) bool { return p.Less(entities[i], entities[j]) })
	var got []string
	for _, e := range entities {
		got = append(got, e.(*framework.QueuedPodInfo).Pod.Name)
	}
	want := []string{"urgent", "old-0", "old-1", "alone", "native-0", "new-0", "new-1", "a-0", "a-1", "b-0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("queue order (-want, +got):\n%s", diff)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name     string
		pod      *v1.Pod
		grouper  bool
		wantKind podKind
	}{
		{"member", testPod("m", inGang("pg")), true, kindMember},
		{"gang-free marker", testPod("f", gangFree), true, kindFree},
		{"gang-free marker of earlier releases", testPod("f", legacyGangFree), true, kindFree},
		{"unlabelled waits for the pod-grouper", testPod("u"), true, kindUnlabelled},
		{"unlabelled without a pod-grouper is alone", testPod("u"), false, kindFree},
		{"native wins over the label", testPod("n", native, inGang("pg")), true, kindNative},
		{"held by the pod-grouper", testPod("h", held("why")), true, kindHeld},
		{"held without a pod-grouper required", testPod("h", held("why")), false, kindHeld},
		{"held wins over the marker of earlier releases", testPod("h", legacyGangFree, held("why")), true, kindHeld},
		{"a member keeps its gang whatever the marker", testPod("m", held("why"), inGang("pg")), true, kindMember},
		{"Volcano", testPod("v", annotated(api.AnnotationVolcanoGroup, "vc")), true, kindForeign},
		{"KAI without a pod-grouper required", testPod("k", annotated(api.AnnotationKAIGroup, "kai")), false, kindForeign},
		{"Volcano wins over the gang-free marker", testPod("v", gangFree, annotated(api.AnnotationVolcanoGroup, "vc")), true, kindForeign},
		{"a member with a Volcano annotation stays a member", testPod("v", annotated(api.AnnotationVolcanoGroup, "vc"), inGang("pg")), true, kindMember},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plugin{requirePodGrouper: tc.grouper}
			if got, _ := p.classify(tc.pod); got != tc.wantKind {
				t.Errorf("kind %d, want %d", got, tc.wantKind)
			}
		})
	}
}

// A node update makes cached verdicts stale only when it may free room, as
// kube-scheduler's queue tells it: a kubelet's status report must not, or
// no verdict outlives the reports of a large cluster.
func TestNodeUpdateCountsOnlyWhatMayFreeRoom(t *testing.T) {
	node := func(change func(*v1.Node)) *v1.Node {
		n := gpuNode("n1", 8)
		n.Status.Allocatable = n.Status.Allocatable.DeepCopy()
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(t0)}}
		if change != nil {
			change(n)
		}
		return n
	}
	cordon := func(n *v1.Node) { n.Spec.Unschedulable = true }
	tests := []struct {
		name        string
		from, to    func(*v1.Node)
		wantCounted bool
	}{
		{"heartbeat only", nil, func(n *v1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0.Add(time.Minute)) }, false},
		{"images only", nil, func(n *v1.Node) { n.Status.Images = []v1.ContainerImage{{Names: []string{"img"}}} }, false},
		// Less room never turns "no placement" into a placement.
		{"cordoned", nil, cordon, false},
		{"uncordoned", cordon, nil, true},
		{"allocatable", nil, func(n *v1.Node) { n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("4") }, true},
		{"label", nil, func(n *v1.Node) { n.Labels = map[string]string{"zone": "b"} }, true},
		{"taint", nil, func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}} }, true},
		{"readiness", nil, func(n *v1.Node) { n.Status.Conditions[0].Status = v1.ConditionFalse }, true},
	}
	e := newBarrierEnv(t, nil, nil, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.pl.gangs.Seq()
			e.pl.onNodeUpdate(node(tc.from), node(tc.to))
			if got := e.pl.gangs.Seq() != before; got != tc.wantCounted {
				t.Errorf("counted %v, want %v", got, tc.wantCounted)
			}
		})
	}
}
