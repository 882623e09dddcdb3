package gang

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-io/muster/api"
)

func TestBarrierWaitsForQuorumThenAllowsAll(t *testing.T) {
	pods := members("g", 3, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
	for _, p := range pods[:2] {
		st, wait := e.schedule(p)
		if !st.IsWait() {
			t.Fatalf("%s: Permit %v, want Wait below the quorum", p.Name, st)
		}
		// The gang's deadline (default 60 s) plus the framework backstop.
		if want := 60*time.Second + permitBackstop; wait != want {
			t.Errorf("%s: wait %s, want %s", p.Name, wait, want)
		}
	}
	if n := e.waiting(); n != 2 {
		t.Fatalf("%d members waiting, want 2", n)
	}
	if n := e.atPermit("g"); n != 2 {
		t.Fatalf("plugin knows %d members at Permit, want 2", n)
	}
	if len(e.released) != 0 {
		t.Fatalf("barrier released below the quorum: %v", e.released)
	}
	if st, _ := e.schedule(pods[2]); !st.IsSuccess() {
		t.Fatalf("last member: Permit %v, want Success at the quorum", st)
	}
	for name, st := range e.outcomes(2) {
		if !st.IsSuccess() {
			t.Errorf("%s: %v, want allowed", name, st)
		}
	}
	if n := e.atPermit("g"); n != 0 {
		t.Errorf("plugin still knows %d members at Permit after the release, want 0", n)
	}
	if len(e.released) != 1 || len(e.released[0]) != 3 {
		t.Errorf("barrier releases %v, want one of all 3 members", e.released)
	}
}

func TestUnreserveOfOneMemberRejectsWaitingSiblings(t *testing.T) {
	// Four members, minMember 3: a and b wait, c fails, d comes last.
	pods := members("g", 4, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
	state := framework.NewCycleState()
	for _, p := range pods[:2] {
		if st, _ := e.schedule(p); !st.IsWait() {
			t.Fatalf("%s: Permit %v, want Wait", p.Name, st)
		}
	}
	// The third member is reserved, then fails before Permit (as when
	// another Reserve plugin or the bind fails): the framework unreserves it.
	e.pl.Reserve(e.ctx, state, pods[2], "n1")
	e.pl.Unreserve(e.ctx, state, pods[2], "n1")
	// The rejected siblings no longer count, even before their own
	// Unreserve ran: d must wait, not be let go alone on a count of
	// a, b and d.
	if n := e.reserved("g"); n != 0 {
		t.Errorf("%d reservations left after the release, want 0", n)
	}
	if n := e.atPermit("g"); n != 0 {
		t.Errorf("plugin still knows %d members at Permit after the release, want 0", n)
	}
	e.pl.Reserve(e.ctx, state, pods[3], "n1")
	if st, _ := e.permit(state, pods[3], "n1"); !st.IsWait() {
		t.Errorf("member after the release: Permit %v, want Wait (quorum 1 of 3)", st)
	}
	if n := e.atPermit("g"); n != 1 {
		t.Errorf("plugin knows %d members at Permit, want d alone", n)
	}
	for name, st := range e.outcomes(2) {
		if st.Code() != fwk.Unschedulable || st.Plugin() != Name || !strings.Contains(st.Message(), "was not bound; releasing the gang") {
			t.Errorf("%s: %v (plugin %q), want Unschedulable from %s releasing the gang", name, st, st.Plugin(), Name)
		}
	}
	if len(e.released) != 0 {
		t.Errorf("barrier released: %v", e.released)
	}
}

func TestBarrierTimeoutRejectsAllWaiting(t *testing.T) {
	pods := members("g", 3, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
	for _, p := range pods[:2] {
		if st, _ := e.schedule(p); !st.IsWait() {
			t.Fatalf("%s: Permit %v, want Wait", p.Name, st)
		}
	}
	// The plugin's barrier timer, not the framework's (which has the
	// backstop on top), rejects the gang.
	e.clk.Step(60 * time.Second)
	for name, st := range e.outcomes(2) {
		if st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "quorum not reached within 1m0s") {
			t.Errorf("%s: %v, want Unschedulable for the barrier timeout", name, st)
		}
	}
	if n := e.reserved("g"); n != 0 {
		t.Errorf("%d reservations left after the timeout, want 0", n)
	}
	// The gang backs off: the third member gets the release's verdict.
	if st, _ := e.schedule(pods[2]); st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "quorum not reached") {
		t.Errorf("member after the timeout: %v, want the backoff verdict", st)
	}
}

func TestNoPlanRejectsWithGangMessage(t *testing.T) {
	// 3 members x 2 GPUs on one 4-GPU node: two fit, the gang does not.
	pods := members("g", 3, 2)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
	for _, p := range pods {
		st, _ := e.schedule(p)
		if st.Code() != fwk.UnschedulableAndUnresolvable {
			t.Fatalf("%s: %v, want UnschedulableAndUnresolvable", p.Name, st)
		}
		for _, want := range []string{"gang ns/g", "best placement fits 2 of 3 members"} {
			if !strings.Contains(st.Message(), want) {
				t.Errorf("%s: reason %q lacks %q", p.Name, st.Message(), want)
			}
		}
	}
	if n := e.reserved("g"); n != 0 {
		t.Errorf("%d members reserved without a plan", n)
	}
	// PostFilter adds nothing after PreFilter's verdict and keeps
	// preemption away.
	state := framework.NewCycleState()
	e.pl.PreFilter(e.ctx, state, pods[0], nil)
	if _, st := e.pl.PostFilter(e.ctx, state, pods[0], nil); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("PostFilter: %v, want UnschedulableAndUnresolvable", st)
	}
	// One event for the verdict, not one per member.
	if got := drain(e.recorder); len(got) != 1 || !strings.Contains(got[0], "GangUnschedulable") {
		t.Errorf("events %q, want one GangUnschedulable", got)
	}
}

func TestPostFilterReleasesPlannedGang(t *testing.T) {
	pods := members("g", 3, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
	if st, _ := e.schedule(pods[0]); !st.IsWait() {
		t.Fatalf("Permit %v, want Wait", st)
	}
	// The second member does not fit its planned node after all.
	state := framework.NewCycleState()
	if _, st := e.pl.PreFilter(e.ctx, state, pods[1], nil); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	if _, st := e.pl.PostFilter(e.ctx, state, pods[1], nil); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Errorf("PostFilter: %v, want UnschedulableAndUnresolvable", st)
	}
	if st := e.outcomes(1)[pods[0].Name]; st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "no longer fits its planned node n1") {
		t.Errorf("waiting member: %v, want rejected by the release", st)
	}
}

func TestReleasedHoldWakesRefusedGang(t *testing.T) {
	// One 4-GPU node. Gang a (3 × 1 GPU) is planned and its first member
	// waits at Permit, so a holds 3 GPUs; gang b (3 × 1 GPU) is refused.
	a, b := members("a", 3, 1), members("b", 3, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("a", 3), podGroup("b", 3)}, append(a, b...))
	if st, _ := e.schedule(a[0]); !st.IsWait() {
		t.Fatalf("a: Permit %v, want Wait", st)
	}
	if st, _ := e.schedule(b[0]); st.Code() != fwk.UnschedulableAndUnresolvable {
		t.Fatalf("b while a holds the node: %v, want no placement", st)
	}
	e.act.take()
	// a lets its hold go without any cluster event (a member's bind
	// failed), long before b's verdict would expire on its own.
	state := framework.NewCycleState()
	e.pl.Reserve(e.ctx, state, a[1], "n1")
	e.pl.Unreserve(e.ctx, state, a[1], "n1")
	if st := e.outcomes(1)[a[0].Name]; st.Code() != fwk.Unschedulable {
		t.Fatalf("a's waiting member: %v, want rejected by the release", st)
	}
	// One member per refused gang: its attempt answers for the gang.
	if got, want := e.act.take(), []string{"b-a"}; !slices.Equal(got, want) {
		t.Errorf("activated after the release: %v, want one of b's pending members %v", got, want)
	}
	if st, _ := e.schedule(b[0]); !st.IsWait() {
		t.Errorf("b after a's release: %v, want planned and waiting at Permit", st)
	}
	// The plan brings the siblings.
	if got, want := e.act.take(), []string{"b-b", "b-c"}; !slices.Equal(got, want) {
		t.Errorf("activated by b's plan: %v, want its other members %v", got, want)
	}
	// a itself backs off.
	if st, _ := e.schedule(a[2]); st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "releasing the gang") {
		t.Errorf("a after its release: %v, want its backoff verdict", st)
	}
}

func TestNativeAndGangFreePodsUntouched(t *testing.T) {
	pods := []*v1.Pod{gpuPod("native", 1, native), gpuPod("free", 1, gangFree)}
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, nil, pods)
	for _, p := range pods {
		if st := e.pl.PreEnqueue(e.ctx, p); st != nil {
			t.Errorf("%s: PreEnqueue %v, want nil", p.Name, st)
		}
		state := framework.NewCycleState()
		res, st := e.pl.PreFilter(e.ctx, state, p, nil)
		if res != nil || !st.IsSkip() {
			t.Errorf("%s: PreFilter %v %v, want Skip", p.Name, res, st)
		}
		if st := e.pl.Reserve(e.ctx, state, p, "n1"); st != nil {
			t.Errorf("%s: Reserve %v", p.Name, st)
		}
		if st, wait := e.permit(state, p, "n1"); st != nil || wait != 0 {
			t.Errorf("%s: Permit %v %s, want nil", p.Name, st, wait)
		}
		e.pl.Unreserve(e.ctx, state, p, "n1")
		e.pl.PostBind(e.ctx, state, p, "n1")
		// A native pod gets Unschedulable: DefaultPreemption, next in
		// the profile, still runs for it. A gang-free pod is answered
		// by the plugin's own whole-gang-aware preemption, here with
		// nothing to do (it fits), and never reaches DefaultPreemption.
		want := fwk.Unschedulable
		if p == pods[1] {
			want = fwk.UnschedulableAndUnresolvable
		}
		if _, st := e.pl.PostFilter(e.ctx, state, p, nil); st.Code() != want {
			t.Errorf("%s: PostFilter %v, want %v", p.Name, st, want)
		}
		if frags, st := e.pl.SignPod(e.ctx, p); frags != nil || st != nil {
			t.Errorf("%s: SignPod %v %v, want no opinion", p.Name, frags, st)
		}
	}
	if n := e.pl.gangs.Len(); n != 0 {
		t.Errorf("plugin keeps state for %d gangs, want none", n)
	}
	if got := drain(e.recorder); len(got) != 0 {
		t.Errorf("events %q, want none", got)
	}
}

func TestStatusOnlyPodGroupUpdateKeepsPlan(t *testing.T) {
	pods := members("g", 3, 1)
	pg := podGroup("g", 3)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{pg}, pods)
	if st, _ := e.schedule(pods[0]); !st.IsWait() {
		t.Fatalf("Permit %v, want Wait", st)
	}
	hasPlan := func() bool {
		return e.pl.gangs.Inspect(types.NamespacedName{Namespace: "ns", Name: "g"}).Plan != nil
	}
	// The plugin's own status write comes back as an update: the plan (and
	// the capacity it holds against other gangs) must stay.
	withStatus := pg.DeepCopy()
	withStatus.Status.Phase = schedv1alpha1.PodGroupScheduling
	e.pl.onPodGroup(pg, withStatus)
	if !hasPlan() {
		t.Fatal("a status-only update dropped the gang's plan")
	}
	// A spec change (new generation) may change the plan.
	resized := withStatus.DeepCopy()
	resized.Generation++
	resized.Spec.MinMember = 2
	e.pl.onPodGroup(withStatus, resized)
	if hasPlan() {
		t.Fatal("a spec update kept the old plan")
	}
}

func TestQuorumReachedActivatesHeldMembers(t *testing.T) {
	pods := members("g", 3, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods[:2])
	if st := e.pl.PreEnqueue(e.ctx, pods[0]); st.IsSuccess() {
		t.Fatal("g-a passed PreEnqueue with 2 of 3 members")
	}
	e.act.take()

	// An update that changes nothing about membership wakes nobody.
	e.pl.onPod(pods[1], pods[1].DeepCopy())
	if got := e.act.take(); len(got) != 0 {
		t.Errorf("activated on a plain update: %v", got)
	}
	// The third member is labelled (it becomes a member by an update):
	// the quorum exists, every pending member gets another look.
	unlabelled := pods[2].DeepCopy()
	delete(unlabelled.Labels, api.LabelPodGroup)
	if err := e.pl.podIndexer.Add(pods[2]); err != nil {
		t.Fatal(err)
	}
	e.pl.onPod(unlabelled, pods[2])
	if got, want := e.act.take(), []string{"g-a", "g-b", "g-c"}; !slices.Equal(got, want) {
		t.Errorf("activated %v, want %v", got, want)
	}
	if st := e.pl.PreEnqueue(e.ctx, pods[0]); !st.IsSuccess() {
		t.Errorf("g-a after the quorum: %v", st)
	}

	// Below the quorum (a member gone, a new one added), nothing moves.
	if err := e.pl.podIndexer.Delete(pods[1]); err != nil {
		t.Fatal(err)
	}
	if err := e.pl.podIndexer.Delete(pods[2]); err != nil {
		t.Fatal(err)
	}
	e.pl.onPod(nil, pods[0])
	if got := e.act.take(); len(got) != 0 {
		t.Errorf("activated below the quorum: %v", got)
	}
}

// A member whose bind the scheduler saw fail may still have been stored: it
// shows up bound without passing the barrier. The members waiting there are
// let go as soon as the informer shows it, not at the barrier's timeout.
func TestMemberBoundOutsideBarrierCompletesIt(t *testing.T) {
	pods := members("g", 2, 1)
	e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 2)}, pods)
	if st, _ := e.schedule(pods[0]); !st.IsWait() {
		t.Fatalf("%s: %v, want Wait below the quorum", pods[0].Name, st)
	}
	bound := pods[1].DeepCopy()
	bound.Spec.NodeName = "n1"
	if err := e.pl.podIndexer.Update(bound); err != nil {
		t.Fatal(err)
	}
	e.pl.onPod(pods[1], bound)
	out := e.outcomes(1)
	if st := out[pods[0].Name]; !st.IsSuccess() {
		t.Fatalf("%s: %v, want allowed once the other member is bound", pods[0].Name, st)
	}
	if n := e.waiting(); n != 0 {
		t.Errorf("%d members still waiting", n)
	}
}

// A barrier that expires names the members it waited for in vain, and
// where the plugin last saw them.
func TestBarrierTimeoutReportsMissingMembers(t *testing.T) {
	tests := []struct {
		name string
		held string // reason PreEnqueue last gave the missing member; "" if it passed
		want string
	}{
		{"in the queue", "", "g-c (in the scheduling queue)"},
		{"held before the queue", "waiting for PodGroup x", "g-c (held before the queue: waiting for PodGroup x)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := members("g", 3, 1)
			e := newBarrierEnv(t, []*v1.Node{gpuNode("n1", 4)}, []*schedv1alpha1.PodGroup{podGroup("g", 3)}, pods)
			for _, p := range pods[:2] {
				if st, _ := e.schedule(p); !st.IsWait() {
					t.Fatalf("%s: Permit %v, want Wait", p.Name, st)
				}
			}
			if tc.held != "" {
				e.pl.noteWaiting(pods[2], tc.held)
			}
			drain(e.recorder)
			e.clk.Step(60 * time.Second)
			e.outcomes(2)
			// The report follows the rejections, on the timer's goroutine.
			var got []string
			deadline := time.After(10 * time.Second)
			for len(got) == 0 {
				select {
				case ev := <-e.recorder.Events:
					if strings.Contains(ev, "GangMembersMissing") {
						got = append(got, ev)
					}
				case <-deadline:
					t.Fatal("no GangMembersMissing event within 10s")
				}
			}
			for _, ev := range drain(e.recorder) {
				if strings.Contains(ev, "GangMembersMissing") {
					got = append(got, ev)
				}
			}
			if len(got) != 1 || !strings.Contains(got[0], "1 member(s) neither reserved nor waiting") || !strings.Contains(got[0], tc.want) {
				t.Errorf("events %q, want one GangMembersMissing naming %q", got, tc.want)
			}
		})
	}
}
