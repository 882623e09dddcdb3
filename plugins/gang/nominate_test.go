package gang

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
)

func nominatedTo(node string) podOpt {
	return func(p *v1.Pod) { p.Status.NominatedNodeName = node }
}

// A member its gang cannot use now holds no room: a nomination it carries
// (left by a scheduler that died before binding, or by a dropped plan) is
// cleared when it is refused, and a member waiting for its gang to form is
// let through PreEnqueue once for that, then refused with the wait's reason.
// A member without a nomination keeps waiting in PreEnqueue, and members of
// a gang whose preemption is under way keep theirs
// (TestPostFilterPreemptsWholeGang).
func TestRefusedMembersDropNominations(t *testing.T) {
	tests := []struct {
		name      string
		pgs       []*schedv1alpha1.PodGroup
		pods      []*v1.Pod // pods[0] is tried
		unsynced  bool      // the PodGroup informer has not synced
		enqueued  bool      // PreEnqueue lets pods[0] through
		want      string    // in the refusal
		wantDrops bool
	}{
		{"forming, nominated", []*schedv1alpha1.PodGroup{podGroup("left", 3)},
			[]*v1.Pod{gpuPod("left-a", 1, inGang("left"), nominatedTo("n1")), gpuPod("left-b", 1, inGang("left"), nominatedTo("n1"))},
			false, true, "2 of 3", true},
		{"forming, not nominated", []*schedv1alpha1.PodGroup{podGroup("left", 3)},
			[]*v1.Pod{gpuPod("left-a", 1, inGang("left")), gpuPod("left-b", 1, inGang("left"))},
			false, false, "", false},
		// PreFilter would say the PodGroup is missing.
		{"nominated, PodGroups not known yet", []*schedv1alpha1.PodGroup{podGroup("left", 3)},
			[]*v1.Pod{gpuPod("left-a", 1, inGang("left"), nominatedTo("n1")), gpuPod("left-b", 1, inGang("left"), nominatedTo("n1"))},
			true, false, "", false},
		{"no placement, nominated", []*schedv1alpha1.PodGroup{podGroup("big", 2)},
			[]*v1.Pod{gpuPod("big-a", 4, inGang("big"), nominatedTo("n1")), gpuPod("big-b", 4, inGang("big"), nominatedTo("n1"))},
			false, true, "gang ns/big", true},
		{"held by the pod-grouper, nominated", nil,
			[]*v1.Pod{gpuPod("held", 1, held("no workload"), nominatedTo("n1"))},
			false, true, "muster cannot compute the pod's gang", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, tc.pgs, tc.pods)
			pod := tc.pods[0]
			if tc.unsynced {
				e.pl.pgSynced.Store(false)
			}
			if st := e.pl.PreEnqueue(e.ctx, pod); (st == nil) != tc.enqueued {
				t.Fatalf("PreEnqueue %v, want let through: %v", st, tc.enqueued)
			}
			if !tc.enqueued {
				return
			}
			state := framework.NewCycleState()
			if _, st := e.pl.PreFilter(e.ctx, state, pod, nil); st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("PreFilter %v, want UnschedulableAndUnresolvable with %q", st, tc.want)
			}
			res, st := e.pl.PostFilter(e.ctx, state, pod, nil)
			if st.Code() != fwk.UnschedulableAndUnresolvable {
				t.Errorf("PostFilter %v, want UnschedulableAndUnresolvable", st)
			}
			drops := res != nil && res.Mode() == fwk.ModeOverride && res.NominatingInfo.NominatedNodeName == ""
			if drops != tc.wantDrops {
				t.Errorf("PostFilter result %+v: drops the nomination %v, want %v", res, drops, tc.wantDrops)
			}
		})
	}
}

// A fresh plan drops the queue's stale nominations of the gang's pending
// members: a member nominated elsewhere than its planned node would count
// there in the framework's filters, and could keep its sibling off the node
// the plan gives it (both members were nominated on n1, which holds one).
func TestPlanDropsMembersStaleNominations(t *testing.T) {
	pending := []*v1.Pod{
		gpuPod("g-a", 4, inGang("g"), nominatedTo("n1")),
		gpuPod("g-b", 4, inGang("g"), nominatedTo("n1")),
	}
	e := newPreemptEnv(t, []*v1.Node{gpuNode("n1", 4), gpuNode("n2", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 2)}, nil, pending)
	// As the queue does when a pod is added: the nomination in its status.
	for _, p := range pending {
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		e.fh.AddNominatedPod(klog.FromContext(e.ctx), pi, nil)
	}
	if n := len(e.fh.NominatedPodsForNode("n1")); n != 2 {
		t.Fatalf("%d pods nominated on n1 before the plan, want 2 (the queue records the status)", n)
	}
	state := framework.NewCycleState()
	if _, st := e.pl.PreFilter(e.ctx, state, pending[0], nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	assigned := e.pl.gangs.Inspect(types.NamespacedName{Namespace: "ns", Name: "g"}).Plan
	for _, node := range []string{"n1", "n2"} {
		for _, pi := range e.fh.NominatedPodsForNode(node) {
			if got := assigned[pi.GetPod().UID]; got != node {
				t.Errorf("%s still nominated on %s, planned on %q", pi.GetPod().Name, node, got)
			}
		}
	}
}

// A plan leaves room for the pods the framework's filters count on a node:
// those nominated there with the member's priority or more (a preemptor
// waiting for its victims). Without that, a plan onto their room failed at
// the member's Filter and was made again onto the same room until they
// bound. When no other room exists the gang has no placement, and says why.
func TestPlanLeavesRoomForNominatedPods(t *testing.T) {
	tests := []struct {
		name      string
		nodes     []*v1.Node
		running   []*v1.Pod
		nominated []*v1.Pod
		want      string // every member's node, or "" for no placement
		refusal   string // in the refusal
	}{
		{"preemptor on n1", []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 8)}, nil,
			[]*v1.Pod{gpuPod("lone", 8, prio(100), nominatedTo("n1"))}, "n2", ""},
		{"preemptor on n2", []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 8)}, nil,
			[]*v1.Pod{gpuPod("lone", 8, prio(100), nominatedTo("n2"))}, "n1", ""},
		{"room beside the nominated pod", []*v1.Node{gpuNode("n1", 16), gpuNode("n2", 8)}, nil,
			[]*v1.Pod{gpuPod("lone", 8, prio(100), nominatedTo("n1")), gpuPod("other", 8, prio(100), nominatedTo("n2"))}, "n1", ""},
		{"lower priority is not counted", []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 8)},
			[]*v1.Pod{gpuPod("busy", 8, boundTo("n2"))},
			[]*v1.Pod{gpuPod("lone", 8, prio(-1), nominatedTo("n1"))}, "n1", ""},
		{"no other room: no placement, naming the nominated pod", []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 8)},
			[]*v1.Pod{gpuPod("busy", 8, boundTo("n2"))},
			[]*v1.Pod{gpuPod("lone", 8, prio(100), nominatedTo("n1"))}, "", "room of 1 pod nominated to these nodes (ns/lone)"},
		{"many nominated pods: a few named", []*v1.Node{gpuNode("n1", 8)}, nil,
			[]*v1.Pod{gpuPod("p1", 2, nominatedTo("n1")), gpuPod("p2", 2, nominatedTo("n1")), gpuPod("p3", 2, nominatedTo("n1")), gpuPod("p4", 2, nominatedTo("n1"))},
			"", "room of 4 pods nominated to these nodes (ns/p1, ns/p2, ns/p3 and 1 more)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			members := []*v1.Pod{gpuPod("g-a", 4, inGang("g")), gpuPod("g-b", 4, inGang("g"))}
			e := newPreemptEnv(t, tt.nodes, []*schedv1alpha1.PodGroup{podGroup("g", 2)}, tt.running, append(members, tt.nominated...))
			for _, p := range tt.nominated {
				pi, err := framework.NewPodInfo(p)
				if err != nil {
					t.Fatal(err)
				}
				e.fh.AddNominatedPod(klog.FromContext(e.ctx), pi, nil)
			}
			_, st := e.pl.PreFilter(e.ctx, framework.NewCycleState(), members[0], nil)
			if tt.want == "" {
				if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), tt.refusal) {
					t.Fatalf("PreFilter %v, want UnschedulableAndUnresolvable with %q", st, tt.refusal)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st)
			}
			assigned := e.pl.gangs.Inspect(types.NamespacedName{Namespace: "ns", Name: "g"}).Plan
			for _, m := range members {
				if got := assigned[m.UID]; got != tt.want {
					t.Errorf("%s planned on %q, want %q", m.Name, got, tt.want)
				}
			}
		})
	}
}

// The victim search counts room nominated to pods of the preemptor's
// priority or more as used, as DefaultPreemption does: otherwise it found a
// gang (or a pod alone) refused for that room fitting without preemption,
// sent it back to planning, and the plan was refused again, every cycle.
func TestPreemptionCountsNominatedRoom(t *testing.T) {
	tests := []struct {
		name    string
		pending []*v1.Pod // pending[0] is tried
		pgs     []*schedv1alpha1.PodGroup
	}{
		{"gang", []*v1.Pod{gpuPod("g-a", 4, inGang("g")), gpuPod("g-b", 4, inGang("g"))}, []*schedv1alpha1.PodGroup{podGroup("g", 2)}},
		{"pod alone", []*v1.Pod{gpuPod("solo", 8, annotated(api.AnnotationGrouping, api.GroupingNone))}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			victim := gpuPod("victim", 8, prio(-10), boundTo("n2"))
			victim.Status.Phase = v1.PodRunning
			preemptor := gpuPod("lone", 8, prio(100), nominatedTo("n1"))
			e := newPreemptEnv(t, []*v1.Node{gpuNode("n1", 8), gpuNode("n2", 8)}, tt.pgs, []*v1.Pod{victim}, append(tt.pending, preemptor))
			pi, err := framework.NewPodInfo(preemptor)
			if err != nil {
				t.Fatal(err)
			}
			e.fh.AddNominatedPod(klog.FromContext(e.ctx), pi, nil)
			state := framework.NewCycleState()
			if len(tt.pgs) > 0 {
				if _, st := e.pl.PreFilter(e.ctx, state, tt.pending[0], nil); st.Code() != fwk.UnschedulableAndUnresolvable {
					t.Fatalf("PreFilter %v, want no placement (n1's room is nominated, n2 is full)", st)
				}
			}
			res, st := e.pl.PostFilter(e.ctx, state, tt.pending[0], nil)
			if !st.IsSuccess() || res == nil || res.NominatingInfo == nil || res.NominatingInfo.NominatedNodeName != "n2" {
				t.Fatalf("PostFilter %v %+v, want the victim on n2 preempted", st, res)
			}
		})
	}
}

// A gang whose plan fails at a member's node is released; the search may
// find it fitting again at once (it plans as the planner does, and a filter
// the planner does not see refused the plan). It is sent back to planning
// at once only once per backoff; otherwise it waits for the backoff, and
// its members are tried when it ends.
func TestReplanAtOnceOncePerBackoff(t *testing.T) {
	members := []*v1.Pod{gpuPod("g-a", 4, inGang("g")), gpuPod("g-b", 4, inGang("g"))}
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 8)}, []*schedv1alpha1.PodGroup{podGroup("g", 2)}, members)
	failPlan := func(round string) {
		t.Helper()
		state := framework.NewCycleState()
		if _, st := e.pl.PreFilter(e.ctx, state, members[0], nil); !st.IsSuccess() {
			t.Fatalf("%s: PreFilter of %s: %v, want a plan", round, members[0].Name, st)
		}
		// Its Filter refused the planned node.
		if _, st := e.pl.PostFilter(e.ctx, state, members[0], nil); !strings.Contains(st.Message(), "no longer fits its planned node") {
			t.Fatalf("%s: PostFilter of %s: %v, want the gang released", round, members[0].Name, st)
		}
	}
	sibling := func(round, want string) {
		t.Helper()
		state := framework.NewCycleState()
		if _, st := e.pl.PreFilter(e.ctx, state, members[1], nil); st.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("%s: PreFilter of %s: %v, want the release's verdict", round, members[1].Name, st)
		}
		if _, st := e.pl.PostFilter(e.ctx, state, members[1], nil); !strings.Contains(st.Message(), want) {
			t.Fatalf("%s: PostFilter of %s: %v, want %q", round, members[1].Name, st, want)
		}
	}
	failPlan("first")
	sibling("first", "fits without preemption now; planning again")
	failPlan("second")
	sibling("second", "planning again after backoff")
	if _, st := e.pl.PreFilter(e.ctx, framework.NewCycleState(), members[0], nil); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("PreFilter within the backoff: %v, want the release's verdict", st)
	}
	e.clk.Step(e.pl.backoff())
	if _, st := e.pl.PreFilter(e.ctx, framework.NewCycleState(), members[0], nil); !st.IsSuccess() {
		t.Fatalf("PreFilter after the backoff: %v, want a plan", st)
	}
}
